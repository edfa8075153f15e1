"""Node RPC: the contract (L{procedures}), wire format (L{wire}), TLS policy
(L{tls}), client (L{client}).

The client and the TLS policy are loaded on first use, so that a daemon
that only names procedures (or encodes arguments) does not load Twisted's
HTTP client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ganeti.rpc.client import RpcClient, RpcError, RpcResult
    from ganeti.rpc.tls import Credentials, PinnedPolicy

__all__ = ["Credentials", "PinnedPolicy", "RpcClient", "RpcError", "RpcResult"]

_LAZY = {"RpcClient": "client", "RpcError": "client", "RpcResult": "client",
         "Credentials": "tls", "PinnedPolicy": "tls"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    return getattr(importlib.import_module("ganeti.rpc." + module), name)
