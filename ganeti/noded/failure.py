"""The refusal of a node RPC procedure (shared by the procedure modules)."""


class RpcFailure(Exception):
    """A procedure's refusal or failure, sent as C{[false, message]}."""
