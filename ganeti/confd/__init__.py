"""RConfD: Ganeti's UDP configuration query service (C{ganeti-confd}).

C{wire} is the pure packet codec, C{answers} the pure index and request
handlers, C{protocol}/C{service}/C{tap} the daemon, C{client} the async
client and C{cli} the C{gnt-confd-query} command.
"""
