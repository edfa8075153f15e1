"""Which files node RPC may write, and where (pure path policy).

C{upload_file} may replace only the files Ganeti distributes to nodes:
config.data, the ssconf files, the certificates and secrets that are
cluster-wide (not this node's own C{client.pem}), the RAPI users file,
known_hosts, and job queue files.  The queue procedures may touch only
files inside the queue directory (never its lock file).  Anything else,
and any path that tries to leave the root, is refused before a byte is
written.
"""

from __future__ import annotations

import os

from ganeti.paths import Paths
from ganeti.rpc import wire
from ganeti.ssconf import KEYS as SSCONF_KEYS


class PathRefused(Exception):
    """A path outside what a procedure may touch."""


#: Queue files never replaced or removed over RPC.
_QUEUE_PROTECTED = frozenset(["lock"])


def upload_targets(paths: Paths) -> frozenset[str]:
    """The exact real paths C{upload_file} may replace (queue files aside)."""
    data = paths.data_dir
    names = ["config.data", "server.pem", "rapi.pem", "spice.pem", "spice-ca.pem", "hmac.key",
             "cluster-domain-secret", "known_hosts", "ganeti_pub_keys",
             # what renew-crypto trusts besides the current keys while it changes them
             "cluster-trust.pem", "hmac.key.accept"]
    targets = {os.path.join(data, name) for name in names}
    targets.add(paths.rapi_users)
    targets.add(paths.ui_revoked)
    targets.update(paths.ssconf(key) for key in SSCONF_KEYS)
    return frozenset(targets)


def _inside(path: str, directory: str) -> bool:
    return path.startswith(directory.rstrip(os.sep) + os.sep)


def _no_symlinked_dirs(paths: Paths, real: str) -> None:
    """Refuse when the directories above C{real} resolve (through symbolic
    links) to somewhere outside the root.  The final component is replaced
    by rename, so a symbolic link there is replaced, never followed."""
    probe = os.path.dirname(real)
    while not os.path.exists(probe) and _inside(probe, paths.root):
        probe = os.path.dirname(probe)
    root = os.path.realpath(paths.root)
    resolved = os.path.realpath(probe)
    if resolved != root and not _inside(resolved, root):
        raise PathRefused("%s leads outside the node's root" % real)


def queue_file(paths: Paths, vpath: object) -> str:
    """The real path of a job queue file named by virtual path C{vpath}.

    @raise PathRefused: outside the queue directory, the queue lock, or unsafe
    """
    try:
        real = wire.localize(paths.root, vpath)
    except wire.RpcWireError as e:
        raise PathRefused(str(e)) from None
    if not _inside(real, paths.queue_dir):
        raise PathRefused("%s is not inside the job queue directory" % (vpath,))
    if os.path.relpath(real, paths.queue_dir) in _QUEUE_PROTECTED:
        raise PathRefused("%s may not be changed over RPC" % (vpath,))
    _no_symlinked_dirs(paths, real)
    return real


def upload_file(paths: Paths, vpath: object) -> str:
    """The real path C{upload_file} may write for virtual path C{vpath}.

    @raise PathRefused: not on the allow-list, or unsafe
    """
    try:
        real = wire.localize(paths.root, vpath)
    except wire.RpcWireError as e:
        raise PathRefused(str(e)) from None
    if real in upload_targets(paths):
        _no_symlinked_dirs(paths, real)
        return real
    if _inside(real, paths.queue_dir):
        return queue_file(paths, vpath)
    raise PathRefused("%s is not a file that may be uploaded to a node" % (vpath,))
