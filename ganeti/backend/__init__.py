"""Node-side backend: hypervisors, storage and the OS interface.

Everything below this package is plain synchronous Python; noded runs it
in a thread (or a child process) and hands the results to the RPC layer.
"""
