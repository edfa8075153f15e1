"""Node RPC: wire format (L{wire}), TLS policy (L{tls}), client (L{client})."""

from ganeti.rpc.client import RpcClient, RpcError, RpcResult
from ganeti.rpc.tls import Credentials, PinnedPolicy

__all__ = ["Credentials", "PinnedPolicy", "RpcClient", "RpcError", "RpcResult"]
