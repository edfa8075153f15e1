"""Node RPC wire format (pure: no Twisted, no I/O).

A request is C{POST /<procedure>} whose body is the JSON array of the
procedure's positional arguments; the answer (HTTP 200) is
C{[true, payload]} or C{[false, "error message"]}.  File contents travel
as Ganeti's C{COMPRESS} encoding (C{[0, text]} or C{[1, base64(zlib)]}),
and file names as I{virtual paths}: absolute paths relative to the node's
root (Ganeti's C{vcluster} virtual paths), which every node maps onto its
own root.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import zlib
from typing import Any, cast

from ganeti import CONFIG_VERSION, ports, serializer
from ganeti.rpc import procedures as _contract

#: The node RPC protocol version (Ganeti's C{PROTOCOL_VERSION}).
PROTOCOL_VERSION = CONFIG_VERSION
#: our own C{node_verify} check (missing and orphan disk files), unknown to Ganeti's nodes
NV_DISK_FILES = "disk-files"
#: our own C{node_verify} check: free and total MiB of the node's data directory
NV_DATA_SPACE = "data-space"
#: The noded TCP port.
DEFAULT_PORT = ports.NODED

#: Read timeout classes, seconds (Ganeti's C{RPC_TMO_*}): those of the contract
TMO_URGENT = _contract.TMO_URGENT
TMO_FAST = _contract.TMO_FAST
TMO_NORMAL = _contract.TMO_NORMAL
TMO_SLOW = _contract.TMO_SLOW
TMO_1DAY = _contract.TMO_1DAY
#: Connect timeout (Ganeti's C{RPC_CONNECT_TIMEOUT}).
CONNECT_TIMEOUT = 5
#: Seconds a job's RPC client goes on sending a call to a node whose NodeD
#: refuses connections (restarting: a few seconds), see L{ganeti.rpc.RpcClient}.
RETRY_WINDOW = 15.0
#: First and longest pause between two tries of a call, seconds.
RETRY_FIRST_DELAY = 0.1
RETRY_MAX_DELAY = 1.0

#: C{COMPRESS} encodings.
ENCODING_NONE = 0
ENCODING_ZLIB_BASE64 = 1
#: Smaller payloads are sent as they are.
COMPRESS_THRESHOLD = 512

#: Largest request body a node accepts.
MAX_BODY = 512 * 1024 * 1024

_PROCEDURE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class RpcWireError(ValueError):
    """A request or an answer does not follow the node RPC format."""


def valid_procedure(name: str) -> bool:
    return bool(_PROCEDURE.match(name))


def encode_request(args: list[Any] | tuple[Any, ...]) -> bytes:
    """The body of a call with positional C{args}."""
    return serializer.dumps(list(args))


def decode_request(body: bytes) -> list[Any]:
    """The positional arguments in a request body.

    A procedure without arguments takes C{[]} (what every Ganeti client
    sends); an empty or blank body is refused, not read as "no arguments".

    @raise RpcWireError: empty, not JSON, or not a JSON array
    """
    if not body.strip():
        raise RpcWireError("Empty request body: send a JSON array of arguments ([] for none)")
    try:
        args = serializer.loads(body)
    except ValueError as e:
        raise RpcWireError("Request body is not valid JSON: %s" % e) from None
    if not isinstance(args, list):
        raise RpcWireError("Request body must be a JSON array of arguments, not %s" % type(args).__name__)
    return args


def encode_response(success: bool, payload: Any) -> bytes:
    return serializer.dumps([bool(success), payload])


def decode_response(body: bytes) -> tuple[bool, Any]:
    """C{(success, payload)} of an answer.

    @raise RpcWireError: not a two-element JSON array with a boolean first
    """
    try:
        answer = serializer.loads(body)
    except ValueError as e:
        raise RpcWireError("Answer is not valid JSON: %s" % e) from None
    if not (isinstance(answer, list) and len(answer) == 2 and isinstance(answer[0], bool)):
        raise RpcWireError("Answer is not [success, payload]: %.100r" % (answer,))
    return answer[0], answer[1]


# --- COMPRESS --------------------------------------------------------------------------


def compress(data: bytes | str) -> list[Any]:
    """Ganeti's C{COMPRESS} argument encoding of C{data}."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) < COMPRESS_THRESHOLD:
        return [ENCODING_NONE, data.decode("utf-8", errors="surrogateescape")]
    return [ENCODING_ZLIB_BASE64, base64.b64encode(zlib.compress(data, 3)).decode("ascii")]


def decompress(value: Any) -> bytes:
    """The bytes of a C{COMPRESS}-encoded value.

    @raise RpcWireError: unknown encoding or corrupt data
    """
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[1], str)):
        raise RpcWireError("Compressed data must be [encoding, text]")
    encoding, text = value
    if encoding == ENCODING_NONE:
        return cast("bytes", text.encode("utf-8", errors="surrogateescape"))
    if encoding == ENCODING_ZLIB_BASE64:
        try:
            return zlib.decompress(base64.b64decode(text.encode("ascii"), validate=True))
        except (ValueError, zlib.error) as e:
            raise RpcWireError("Corrupt compressed data: %s" % e) from None
    raise RpcWireError("Unknown data encoding %r" % (encoding,))


def file_details(
    virtual_path: str,
    data: bytes | str,
    *,
    mode: int = 0o640,
    owner: str = "",
    group: str = "",
    atime: float | None = None,
    mtime: float | None = None,
) -> list[Any]:
    """Ganeti's C{FILE_DETAILS} argument of C{upload_file}."""
    return [virtual_path, compress(data), mode, owner, group, atime, mtime]


# --- virtual paths and digests ---------------------------------------------------------


def virtual_path(root: str, path: str) -> str:
    """C{path} (under C{root}) as the root-relative path sent on the wire."""
    root = os.path.abspath(root)
    path = os.path.abspath(path)
    if root == "/":
        return path
    if path != root and not path.startswith(root + os.sep):
        raise ValueError("%s is not under the root %s" % (path, root))
    return "/" + os.path.relpath(path, root) if path != root else "/"


def localize(root: str, vpath: Any) -> str:
    """The real path on this node of the virtual path C{vpath}.

    Refuses anything that could leave the root: non-strings, relative
    paths, C{..} components, NUL bytes.

    @raise RpcWireError: an unsafe or malformed path
    """
    if not isinstance(vpath, str) or not vpath:
        raise RpcWireError("File name must be a non-empty string")
    if "\0" in vpath or not vpath.startswith("/"):
        raise RpcWireError("File name %r must be an absolute path" % (vpath,))
    parts = [part for part in vpath.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise RpcWireError("File name %r must not contain '..'" % (vpath,))
    return os.path.join(os.path.abspath(root), *parts)


def sha1_hex(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()
