"""Every on-disk path of a node, derived from one root directory.

A production node uses the root C{/}; tests, benchmarks and the demo give
each node of a cluster its own root so that many nodes live on one machine.
The root comes from C{--root}, else C{GANETI_ROOT}, else C{/}.  Below the
root the layout is Ganeti's.
"""

from __future__ import annotations

import os
from functools import cached_property

ROOT_ENV = "GANETI_ROOT"


def default_root() -> str:
    """The root named by C{GANETI_ROOT}, or C{/}."""
    return os.environ.get(ROOT_ENV) or "/"


class Paths:
    """The file layout of one node under C{root}.

    A plain class (no attrs): every gnt-* command imports it, and start-up
    time matters there.
    """

    def __init__(self, root: str = "/") -> None:
        self.root = os.path.abspath(root or "/")

    def __repr__(self) -> str:
        return "Paths(%r)" % self.root

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Paths) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    @classmethod
    def from_option(cls, root: str | None = None) -> Paths:
        """Paths for an explicit C{--root}, falling back to the environment."""
        return cls(root or default_root())

    def _under(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    # --- /var/lib/ganeti --------------------------------------------------
    @cached_property
    def data_dir(self) -> str:
        return self._under("var", "lib", "ganeti")

    @property
    def config_data(self) -> str:
        return os.path.join(self.data_dir, "config.data")

    @property
    def config_journal(self) -> str:
        """WConfD's journal of entity changes not yet folded into config.data."""
        return os.path.join(self.data_dir, "config.journal")

    @property
    def locks_data(self) -> str:
        return os.path.join(self.data_dir, "locks.data")

    @property
    def locks_journal(self) -> str:
        """WConfD's journal of lock changes not yet folded into locks.data."""
        return os.path.join(self.data_dir, "locks.journal")

    @property
    def wconfd_requests(self) -> str:
        """WConfD's answers of the last requests of each owner (retries get them)."""
        return os.path.join(self.data_dir, "wconfd-requests.data")

    @property
    def tempres_data(self) -> str:
        return os.path.join(self.data_dir, "tempres.data")

    def ssconf(self, key: str) -> str:
        """The file holding ssconf value C{key} (C{ssconf_<key>})."""
        return os.path.join(self.data_dir, "ssconf_" + key)

    @property
    def server_pem(self) -> str:
        return os.path.join(self.data_dir, "server.pem")

    @property
    def client_pem(self) -> str:
        return os.path.join(self.data_dir, "client.pem")

    @property
    def rapi_pem(self) -> str:
        return os.path.join(self.data_dir, "rapi.pem")

    @property
    def hmac_key(self) -> str:
        return os.path.join(self.data_dir, "hmac.key")

    @property
    def cluster_domain_secret(self) -> str:
        return os.path.join(self.data_dir, "cluster-domain-secret")

    @property
    def rapi_users(self) -> str:
        return os.path.join(self.data_dir, "rapi", "users")

    @property
    def ui_revoked(self) -> str:
        """The web console's revoked sessions (L{ganeti.rapi.ui.sessions.RevocationFile})."""
        return os.path.join(self.data_dir, "rapi", "ui-revoked")

    @property
    def queue_dir(self) -> str:
        return os.path.join(self.data_dir, "queue")

    # --- /etc/ganeti --------------------------------------------------------
    @cached_property
    def conf_dir(self) -> str:
        return self._under("etc", "ganeti")

    @property
    def hooks_dir(self) -> str:
        """The LU hooks: C{<hpath>-<phase>.d/} directories (Ganeti's C{HOOKS_BASE_DIR})."""
        return os.path.join(self.conf_dir, "hooks")

    # --- /var/run/ganeti --------------------------------------------------
    @cached_property
    def run_dir(self) -> str:
        return self._under("var", "run", "ganeti")

    @property
    def socket_dir(self) -> str:
        return os.path.join(self.run_dir, "socket")

    @property
    def wconfd_socket(self) -> str:
        return os.path.join(self.socket_dir, "ganeti-wconfd")

    @property
    def luxi_socket(self) -> str:
        return os.path.join(self.socket_dir, "ganeti-query")

    @property
    def master_socket(self) -> str:
        return os.path.join(self.socket_dir, "ganeti-master")

    @property
    def noded_socket(self) -> str:
        """NodeD's node RPC for this node's own processes: plain HTTP over a Unix socket (L{ganeti.rpc.local})."""
        return os.path.join(self.socket_dir, "ganeti-noded")

    @property
    def livelock_dir(self) -> str:
        return os.path.join(self.run_dir, "livelocks")

    def pid_file(self, daemon: str) -> str:
        return os.path.join(self.run_dir, daemon + ".pid")

    # --- /var/lock/ganeti, /var/log/ganeti, /srv/ganeti --------------------
    @cached_property
    def lock_dir(self) -> str:
        """Job and daemon lock files (owners of WConfD locks live here)."""
        return self._under("var", "lock", "ganeti")

    @cached_property
    def log_dir(self) -> str:
        return self._under("var", "log", "ganeti")

    def log_file(self, logbase: str) -> str:
        return os.path.join(self.log_dir, logbase + ".log")

    @property
    def export_dir(self) -> str:
        """Instance exports (Ganeti's C{/var/lib/ganeti/export})."""
        return os.path.join(self.data_dir, "export")

    @property
    def file_storage_dir(self) -> str:
        return self._under("srv", "ganeti", "file-storage")

    @property
    def shared_file_storage_dir(self) -> str:
        return self._under("srv", "ganeti", "shared-file-storage")

    @property
    def os_search_dir(self) -> str:
        """Where the node's OS definitions live (Ganeti's C{/srv/ganeti/os})."""
        return self._under("srv", "ganeti", "os")

    @property
    def os_log_dir(self) -> str:
        """Logs of the OS scripts (create, rename, ...)."""
        return os.path.join(self.log_dir, "os")

    def owner_dirs(self) -> tuple[str, ...]:
        """Directories in which a lock owner's lock file may live."""
        return (self.lock_dir, self.livelock_dir)

    def ensure_dirs(self) -> None:
        """Create the directories a daemon needs, with Ganeti's modes."""
        for path, mode in (
            (self.data_dir, 0o755),
            (os.path.dirname(self.rapi_users), 0o750),
            (self.queue_dir, 0o700),
            (self.run_dir, 0o775),
            (self.socket_dir, 0o750),
            (self.livelock_dir, 0o775),
            (self.lock_dir, 0o755),
            (self.log_dir, 0o750),
        ):
            os.makedirs(path, mode=mode, exist_ok=True)
