"""Run real daemons of a node root for tests, benchmarks and the demo.

    root = make_root()                      # short path: Unix sockets allow 108 bytes
    seed_config(root, initial_config(...))
    wconfd = Daemon(root, "ganeti-wconfd")
    wconfd.start(); await wconfd.ready(reactor)
    ...
    wconfd.stop()
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time

from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import deferLater

from ganeti import daemons, serializer
from ganeti.daemons import accepts_tcp, accepts_unix, free_port, launcher_path
from ganeti.locking import Owner
from ganeti.objects import ConfigData
from ganeti.paths import Paths
from ganeti.testing import procs, warmfork

#: ganeti-twistd (twistd without Twisted's own plugins), as the daemons run in production
TWISTD = launcher_path()

_SOCKETS = {"ganeti-wconfd": "wconfd_socket", "ganeti-luxid": "luxi_socket"}


def make_root(prefix: str = "gnt") -> Paths:
    """A fresh node root under /tmp (short, so socket paths fit)."""
    return Paths(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


def remove_root(paths: Paths) -> None:
    """Stop what still runs of the root (L{stop_root}), then remove its files."""
    stop_root(paths)
    shutil.rmtree(paths.root, ignore_errors=True)
    shutil.rmtree(paths.root + SHARED_SUFFIX, ignore_errors=True)


def stop_root(paths: Paths) -> list[int]:
    """Stop every daemon of the root that holds its pid file (as C{ganeti-daemons stop}: those a NodeD
    started, such as confd and RAPI on a promoted candidate or a failover's master daemons), then SIGKILL
    every process still running with C{--root ROOT} on its command line: the job processes and their fork
    server, a warm launcher and what it forked, a daemon that did not stop.  Returns the pids killed.
    A test that fails half-way leaves nothing behind (its cluster's ports stay free for the next)."""
    if os.path.isdir(paths.run_dir):
        daemons.stop(paths, out=lambda _line: None)
    return kill_root_processes(paths)


def _processes_of(paths: Paths, wanted: tuple[str, ...], jobs: bool = False) -> list[int]:
    """The pids of the processes with all of C{wanted} and C{--root ROOT} on their command line; with
    C{jobs}, also those whose stderr is the root's jobs log: the fork server and its job processes (one forked
    at LuxiD's start, and the jobs forked from it, have the command line of LuxiD's launcher)."""
    log = paths.log_file("jobs")
    found = []
    for pid, argv in procs.processes():
        if jobs and _stderr(pid) == log:
            found.append(pid)
            continue
        if "--root" in argv and all(word in argv for word in wanted) \
                and argv.index("--root") + 1 < len(argv) and argv[argv.index("--root") + 1] == paths.root:
            found.append(pid)
    return found


def _stderr(pid: int) -> str | None:
    try:
        return os.readlink("/proc/%d/fd/2" % pid)
    except OSError:
        return None


def _kill(pids: list[int]) -> list[int]:
    killed = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except OSError:
            pass
    return killed


def kill_root_processes(paths: Paths) -> list[int]:
    """SIGKILL every process with C{--root ROOT} on its command line (not this one), and the daemons of the
    root forked warm (L{warmfork.forked_pids}); the pids killed."""
    found = _processes_of(paths, (), jobs=True)
    return _kill(found + [pid for pid in warmfork.forked_pids(paths.root) if pid not in found])


def kill_job_processes(paths: Paths) -> list[int]:
    """SIGKILL the root's fork server and the job processes forked from it
    (by their command line or their stderr, L{_processes_of}) that outlived their LuxiD: a job waiting
    for a WConfD a test stopped would otherwise keep reconnecting for
    minutes, taking CPU from the tests after it.  Returns the pids killed."""
    return _kill(_processes_of(paths, ("ganeti.luxid.forkserver",), jobs=True))


#: the common sharedfile directory of roots sharing storage: next to the first
SHARED_SUFFIX = "-shared"


def share_file_storage(roots: list[Paths]) -> str:
    """Make the C{srv/ganeti/shared-file-storage} of every root a symlink to
    one common directory (C{<first root>-shared}, removed with that root),
    so that a sharedfile disk is visible on every node; returns it."""
    common = roots[0].root + SHARED_SUFFIX
    os.makedirs(common, exist_ok=True)
    for paths in roots:
        link = paths.shared_file_storage_dir
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.islink(link):
            continue
        if os.path.isdir(link):
            os.rmdir(link)  # only an empty one: disks are never dropped
        os.symlink(common, link)
    return common


def seed_config(paths: Paths, config: ConfigData) -> None:
    paths.ensure_dirs()
    serializer.write_file(paths.config_data, config.to_json(), mode=0o640)


def listens_in_netns(pid: int, port: int) -> bool:
    """Whether a TCP socket listens on C{port} in the network namespace of process C{pid}."""
    for table in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, table)) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 3 and fields[3] == "0A" and fields[1].rsplit(":", 1)[-1] == "%04X" % port:
                return True
    return False


class Daemon:
    """One daemon of one node root, run by twistd in the foreground."""

    def __init__(self, paths: Paths, name: str, *args: str, tcp: tuple[str, int] | None = None,
                 env: dict[str, str] | None = None) -> None:
        """@param tcp: C{(address, port)} the daemon listens on, for L{ready}
        (default: its Unix socket)
        @param env: variables the daemon gets besides this process's environment"""
        self.paths = paths
        self.tcp = tcp
        self.env = dict(env or {})
        self.name = name
        self.args = list(args)
        self.process: subprocess.Popen[bytes] | warmfork.ForkedProcess | None = None
        self.log_path = os.path.join(paths.root, "%s.out" % name)
        #: the heartbeat port this daemon uses unless C{env} or the caller's environment names one
        self.heartbeat_port = free_port()
        #: the network namespace it runs in (C{ip netns exec}; L{ganeti.testing.netns}), or None
        self.netns: str | None = None

    @property
    def socket_path(self) -> str:
        return str(getattr(self.paths, _SOCKETS[self.name]))

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None, "already running"
        log = open(self.log_path, "ab")
        argv = [TWISTD, "-n", "--pidfile=", "--logfile=-", self.name, "--root", self.paths.root, *self.args]
        if self.netns is not None:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        env = dict(os.environ, **self.env) if self.env else None
        if self.name in ("ganeti-luxid", "ganeti-noded") and "GANETI_HEARTBEAT_PORT" not in (env or os.environ):
            # never the fixed heartbeat port in tests: other clusters run at the same time
            env = dict(env or os.environ, GANETI_HEARTBEAT_PORT=str(self.heartbeat_port))
        forked = None
        if self.netns is None:  # forked from a warm launcher: no interpreter start, no imports (warmfork)
            forked = warmfork.spawn(self.name, argv, env if env is not None else dict(os.environ), self.paths.root,
                                    self.log_path)
        if forked is not None:
            self.process = forked
        else:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.paths.root,
                                            env=env)
        log.close()

    async def ready(self, reactor: IReactorTime, timeout: float = 90.0) -> None:
        """Wait until the daemon accepts connections on its socket."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError("%s exited with %s:\n%s" % (self.name, self.process.returncode, self.output()))
            if self.tcp and self.netns is not None and self.process is not None:
                if listens_in_netns(self.process.pid, self.tcp[1]):  # unreachable from here: ask its namespace
                    return
            elif accepts_tcp(*self.tcp, timeout=1) if self.tcp else accepts_unix(self.socket_path):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("%s did not start within %ss:\n%s" % (self.name, timeout, self.output()))
            await deferLater(reactor, 0.02, lambda: None)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=30)

    def stop(self) -> int | None:
        """SIGTERM and wait; returns the exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def output(self) -> str:
        try:
            with open(self.log_path, "rb") as handle:
                return handle.read().decode(errors="replace")[-4000:]
        except OSError:
            return ""


class LiveOwner:
    """A lock owner backed by a lock file this process holds (alive until released)."""

    def __init__(self, paths: Paths, ident: int | str) -> None:
        os.makedirs(paths.lock_dir, exist_ok=True)
        self.path = os.path.join(paths.lock_dir, "owner-%s-%d" % (ident, os.getpid()))
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        self.owner = Owner(ident, self.path, os.getpid())

    def die(self) -> None:
        """Drop the lock, as a dying process would."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class MasterNoded:
    """The master's ganeti-noded, for tests that run WConfD and LuxiD by hand:
    opcodes that reach the master by RPC (OP_TEST_DELAY sleeps there, as in
    Ganeti) find it.  LuxiD needs L{luxid_args} and L{env}::

        noded = MasterNoded(root)
        await noded.start(reactor)
        luxid = Daemon(root, "ganeti-luxid", *noded.luxid_args, env=noded.env)
    """

    def __init__(self, paths: Paths, address: str = "127.0.1.1", cluster_name: str = "cluster.test",
                 node_name: str = "node1.test") -> None:
        self.paths = paths
        self.cluster_name = cluster_name
        self.node_name = node_name
        self.port = free_port(address)
        self.heartbeat_port = free_port()
        self.daemon = Daemon(paths, "ganeti-noded", "--bind", address, "--port", str(self.port),
                             tcp=(address, self.port), env={"GANETI_HEARTBEAT_PORT": str(self.heartbeat_port)})

    @property
    def luxid_args(self) -> list[str]:
        return ["--rpc-port", str(self.port)]

    @property
    def env(self) -> dict[str, str]:
        """What LuxiD (and its job processes) need to be found by the node daemon (its port: L{luxid_args})."""
        return {"GANETI_HEARTBEAT_PORT": str(self.heartbeat_port)}

    async def start(self, reactor: IReactorTime) -> None:
        """Create the cluster's secrets if missing; start noded and wait for it."""
        from ganeti import crypto

        crypto.bootstrap_secrets(self.paths, self.cluster_name, node_name=self.node_name)
        self.daemon.start()
        await self.daemon.ready(reactor)

    def stop(self) -> None:
        self.daemon.stop()


__all__ = ["Daemon", "LiveOwner", "MasterNoded", "make_root", "remove_root", "stop_root", "seed_config", "share_file_storage", "signal"]
