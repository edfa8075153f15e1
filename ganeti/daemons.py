"""C{ganeti-daemons start|stop|restart|status [DAEMON...]}: run a node's daemons.

Each daemon runs as its twistd plugin, daemonized, with the node's root:

    twistd --pidfile= --logfile=ROOT/var/log/ganeti/<log>.log ganeti-wconfd --root ROOT

and holds C{ROOT/var/run/ganeti/<daemon>.pid} locked while it runs, which
is how L{status} and L{stop} find it.  Which daemons a node runs, and on
which address, comes from C{ROOT/var/lib/ganeti/node.json} (written by
C{gnt-cluster init}): every node runs noded and mond; the master also
runs confd, wconfd, rapi and luxid, in Ganeti's order (mond last); a master
candidate also runs confd and rapi (it forwards to the master's).  As in
Ganeti, a plain node runs no confd: it finds the master through ssconf and
the candidates' confd, as its MonD and NodeD do anyway.  Daemons whose plugin is not
installed are skipped.  A daemon is named in full (C{ganeti-luxid}) or
short (C{luxid}).

A daemon that cannot listen exits with status 1 and logs why
(L{ganeti.listening}); C{start} reports that reason at once and C{status}
calls a daemon running only while it holds its pid file and accepts
connections on its socket or port.
"""

from __future__ import annotations

import argparse
import errno
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Callable, NamedTuple, Sequence

from ganeti import lockfile, ports
from ganeti.listening import CANNOT_LISTEN
from ganeti.paths import Paths

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
#: environment variable naming the log file of a daemon this starts (read by L{ganeti.logfile.observer})
LOG_FILE_ENV = "GANETI_LOG_FILE"
#: what a daemon says when another instance holds its pid file (L{ganeti.daemon.lock_pid_file})
ALREADY_RUNNING = "is already running on root"


class Spec(NamedTuple):
    name: str
    package: str  # ganeti.<package>.tap must exist for the daemon to be available
    master_only: bool
    bind: bool  # takes --bind ADDRESS
    port: int  # TCP (UDP if udp) port it listens on (0: none)
    socket: str  # Paths attribute of its Unix socket ("" : none)
    logbase: str
    udp: bool = False


#: Ganeti's start order (daemons.md): noded, confd, wconfd, rapi, luxid, mond
DAEMONS = (
    Spec("ganeti-noded", "noded", False, True, ports.NODED, "", "node-daemon"),
    Spec("ganeti-confd", "confd", True, True, ports.CONFD, "", "conf-daemon", udp=True),
    Spec("ganeti-wconfd", "wconfd", True, False, 0, "wconfd_socket", "wconf-daemon"),
    Spec("ganeti-rapi", "rapi", True, True, ports.RAPI, "", "rapi-daemon"),
    Spec("ganeti-luxid", "luxid", True, False, 0, "luxi_socket", "luxi-daemon"),
    Spec("ganeti-mond", "mond", False, True, ports.MOND, "", "monitoring-daemon"),
)
MOND = DAEMONS[-1]
BY_NAME = {spec.name: spec for spec in DAEMONS}
#: full and short names (C{ganeti-luxid}, C{luxid})
NAMES = {**BY_NAME, **{spec.package: spec for spec in DAEMONS}}


def node_file(paths: Paths) -> str:
    return os.path.join(paths.data_dir, "node.json")


def write_node_identity(paths: Paths, name: str, address: str) -> None:
    from ganeti import serializer

    os.makedirs(paths.data_dir, exist_ok=True)
    serializer.write_file(node_file(paths), json.dumps({"name": name, "address": address}) + "\n", mode=0o644)


def read_node_identity(paths: Paths) -> dict[str, str]:
    try:
        with open(node_file(paths)) as handle:
            value = json.load(handle)
    except FileNotFoundError:
        raise SystemExit("%s: this root has no node identity; run 'gnt-cluster init' first" % node_file(paths)) from None
    except ValueError as e:
        raise SystemExit("%s is corrupt: %s" % (node_file(paths), e)) from e
    return {"name": str(value.get("name", "")), "address": str(value.get("address", ""))}


def node_address(paths: Paths) -> str:
    """The node's primary IP from its identity file, or C{""} (none, or unreadable)."""
    try:
        with open(node_file(paths)) as handle:
            value = json.load(handle)
    except (OSError, ValueError):
        return ""
    address = value.get("address") if isinstance(value, dict) else None
    return address if isinstance(address, str) else ""


def is_master(paths: Paths) -> bool:
    """This node is the master if ssconf says so (master_node = our name)."""
    try:
        with open(paths.ssconf("master_node")) as handle:
            master = handle.read().strip()
    except FileNotFoundError:
        return False
    return master == read_node_identity(paths)["name"]


def is_candidate(paths: Paths) -> bool:
    """This node is a master candidate if ssconf says so (and it has the RAPI certificate)."""
    try:
        with open(paths.ssconf("master_candidates")) as handle:
            candidates = handle.read().split()
    except FileNotFoundError:
        return False
    return os.path.exists(paths.rapi_pem) and read_node_identity(paths)["name"] in candidates


#: Master daemons that also run on every master candidate (confd answers from its replica of the config;
#: rapi forwards to the master's).
ON_CANDIDATES = frozenset({"ganeti-confd", "ganeti-rapi"})


def available(spec: Spec) -> bool:
    try:
        return importlib.util.find_spec("ganeti.%s.tap" % spec.package) is not None
    except ModuleNotFoundError:
        return False


def running_pid(paths: Paths, spec: Spec) -> int | None:
    """The pid of the running daemon, or None (its pid file is not locked)."""
    return lockfile.holder_pid(paths.pid_file(spec.name))


def accepts_unix(path: str, timeout: float = 0.5) -> bool:
    """Whether something accepts connections on Unix socket C{path}."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        return True
    except OSError:
        return False
    finally:
        sock.close()


def accepts_tcp(address: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on C{address}:C{port}."""
    try:
        socket.create_connection((address, port), timeout=timeout).close()
        return True
    except OSError:
        return False


#: how many ports each test process (an xdist worker, or the lone runner) has to itself
_PORT_SLICE = 2000
_next_port: dict[str, int] = {}


def _port_pool() -> range:
    """The ports L{free_port} hands out in this process: none from the kernel's
    ephemeral range (a connection's local port or another process's C{bind(0)}
    may take any of those between our probe and the daemon's bind), one slice
    of the rest per xdist worker so that parallel workers never pick the same."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(word) for word in f.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    below, above = range(max(1024, low - 8 * _PORT_SLICE), low), range(high + 1, 65536)
    ports = below if len(below) >= len(above) else above
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) if worker[2:].isdigit() else os.getpid()
    slices = max(1, len(ports) // _PORT_SLICE)
    start = ports.start + (index % slices) * _PORT_SLICE
    return range(start, min(start + _PORT_SLICE, ports.stop))


def free_port(address: str = "127.0.1.1", udp: bool = False) -> int:
    """A port nothing listens on at C{address} right now (tests, benchmarks),
    from this process's L{_port_pool}, each handed out once per process."""
    kind = socket.SOCK_DGRAM if udp else socket.SOCK_STREAM
    pool = _port_pool()
    # another process of the same worker (a script a test runs) starts elsewhere in the slice
    key = "%s/%d" % (pool.start, os.getpid())
    offset = _next_port.get(key, os.getpid() * 7919)
    for step in range(len(pool)):
        port = pool.start + (offset + step) % len(pool)
        with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, kind) as sock:
            try:
                sock.bind((address, port))
            except OSError:
                continue
        _next_port[key] = offset + step + 1
        return port
    raise OSError(errno.EADDRINUSE, "no free port left in %d..%d at %s" % (pool.start, pool.stop - 1, address))


def udp_bound(address: str, port: int) -> bool:
    """Whether some socket is bound to UDP C{address}:C{port} (a bind attempt fails)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        try:
            sock.bind((address, port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
    return False


#: The environment variable that moves RAPI off its port (tests, benchmarks: many clusters on one host).
RAPI_PORT_ENV = "GANETI_RAPI_PORT"
#: The same for confd's UDP port: the confd a NodeD starts on a node promoted to master candidate listens on
#: it (many loopback clusters share 127.0.1.N: on the fixed port their confds would clash).
CONFD_PORT_ENV = "GANETI_CONFD_PORT"
_PORT_ENVS = {"ganeti-rapi": RAPI_PORT_ENV, "ganeti-confd": CONFD_PORT_ENV}


def port_of(spec: Spec) -> int:
    """The port C{spec}'s daemon listens on: its own, but RAPI's is
    C{$GANETI_RAPI_PORT} and confd's C{$GANETI_CONFD_PORT} when set (a
    daemon started here inherits it)."""
    variable = _PORT_ENVS.get(spec.name)
    if variable is not None:
        value = os.environ.get(variable, "")
        if value.isdigit() and 0 < int(value) < 65536:
            return int(value)
    return spec.port


def listening_problem(paths: Paths, spec: Spec, address: str) -> str | None:
    """Why C{spec}'s daemon does not listen where it should, or None when it does.

    Unix socket and TCP port: something accepts connections there; UDP
    port: something is bound to it.
    """
    spec = spec._replace(port=port_of(spec))
    if spec.socket:
        path = getattr(paths, spec.socket)
        return None if accepts_unix(path) else "nothing accepts connections on unix socket %s" % path
    if spec.port and spec.udp:
        return None if udp_bound(address, spec.port) else "nothing is bound to %s port %d (UDP)" % (address, spec.port)
    if spec.port:
        return None if accepts_tcp(address, spec.port) else "nothing accepts connections on %s port %d (TCP)" % (
            address, spec.port)
    return None


#: a log line, in Ganeti's layout (L{ganeti.logfile}: "2026-11-24 23:10:46,123:
#: ganeti-noded pid=42 CRITICAL text") or twistd's ("2026-11-24T23:10:46+0000
#: [system#critical] text"), the text captured
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d(?: \S+: \S+ pid=\d+ [A-Z]+|T\S+ \[[^\]]*\]) (.*)$")


def log_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def logged_reason(path: str, offset: int) -> str | None:
    """Why a daemon ended, from what it appended to its log after C{offset}.

    The last "cannot listen" line (L{ganeti.listening}), else the last
    critical one, without its timestamp and logger prefix; None if neither.
    """
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            text = handle.read().decode(errors="replace")
    except OSError:
        return None
    lines = text.splitlines()
    chosen = [line for line in lines if CANNOT_LISTEN in line] or [
        line for line in lines if "#critical]" in line or " CRITICAL " in line]
    if not chosen:
        return None
    match = _LOG_LINE.match(chosen[-1])
    return (match.group(1) if match else chosen[-1]).strip()


def spec_by_name(name: str) -> Spec:
    """The daemon called C{name}, in full (C{ganeti-luxid}) or short (C{luxid})."""
    try:
        return NAMES[name]
    except KeyError:
        raise SystemExit("unknown daemon: %s (known: %s)" % (name, ", ".join(
            "%s (%s)" % (spec.name, spec.package) for spec in DAEMONS))) from None


def selected(paths: Paths, names: list[str]) -> list[Spec]:
    if names:
        return [spec_by_name(n) for n in names]
    master = is_master(paths)
    candidate = not master and is_candidate(paths)
    return [spec for spec in DAEMONS if available(spec)
            and (master or not spec.master_only or (candidate and spec.name in ON_CANDIDATES))]


def launcher_path() -> str:
    """The daemons' runner: C{ganeti-twistd}, else C{twistd}, beside this
    Python (the same installation) first, else on C{PATH}."""
    runners = ("ganeti-twistd", "twistd")
    for name in runners:
        beside = os.path.join(os.path.dirname(sys.executable), name)
        if os.access(beside, os.X_OK):
            return beside
    for name in runners:
        found = shutil.which(name)
        if found:
            return found
    return os.path.join(os.path.dirname(sys.executable), "twistd")


def twistd_command(paths: Paths, spec: Spec, options: list[str],
                   env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """How to run C{spec}'s daemon daemonized: its argv and environment.

    It logs through L{ganeti.logfile.observer} to C{ROOT/var/log/ganeti/<logbase>.log}
    (appending, info level; C{GANETI_DEBUG=1} in the environment adds debug
    lines).  The runner is L{ganeti.launcher}'s C{ganeti-twistd} (twistd
    without Twisted's own plugins loaded, ~1.7 MiB less per daemon), else
    C{twistd}: the one installed beside this Python, else the one on C{PATH}
    (a C{pip install --user} puts them in C{~/.local/bin}).
    """
    twistd = launcher_path()
    env = {**os.environ, **(env or {})}
    env[LOG_FILE_ENV] = paths.log_file(spec.logbase)
    argv = [twistd, "--pidfile=", "--umask=022", "--logger=ganeti.logfile.observer", spec.name, *options]
    return argv, env


#: The daemons L{WARM} starts.
WARM_DAEMONS = ("ganeti-wconfd", "ganeti-luxid", "ganeti-rapi")
#: The daemons L{start} forks from one launcher when it starts two or more of them (L{SHARED_START_ENV}).
SHARED_DAEMONS = ("ganeti-noded", "ganeti-wconfd", "ganeti-rapi", "ganeti-luxid")
#: The daemons L{start} forks from one launcher without TLS when it starts both (L{SHARED_START_ENV}).
PLAIN_DAEMONS = ("ganeti-confd", "ganeti-mond")
#: C{0} in the environment: L{start} starts every daemon cold, each its own interpreter.
SHARED_START_ENV = "GANETI_SHARED_START"
#: Runs twistd warm (L{ganeti.warmstart.WarmStarter.run}: C{(argv, env, cwd)} to C{(exit status, output)}, or
#: None when it cannot); set in NodeD on a master candidate, None: every daemon starts cold
WARM: Callable[[list[str], dict[str, str], str], tuple[int, str] | None] | None = None


def _start_one(paths: Paths, spec: Spec, address: str, timeout: float, out: Callable[[str], object],
               options: list[str] = (), env: dict[str, str] | None = None,  # type: ignore[assignment]
               shared: Callable[[list[str], dict[str, str], str], tuple[int, str] | None] | None = None) -> bool:
    pid = running_pid(paths, spec)
    if pid is not None:
        problem = listening_problem(paths, spec, address)
        if problem is None:
            out("%s: already running (pid %s)" % (spec.name, pid))
            return True
        out("%s: already running (pid %s) but not listening: %s" % (spec.name, pid, problem))
        return False
    log_path = paths.log_file(spec.logbase)
    offset = log_size(log_path)
    argv, env = twistd_command(paths, spec, ["--root", paths.root, *options], env)
    if spec.bind:
        argv += ["--bind", address]
    if shared is not None:
        warm = shared(argv, env, paths.root)
    else:
        warm = WARM(argv, env, paths.root) if WARM is not None and spec.name in WARM_DAEMONS else None
    if warm is not None:  # forked from NodeD's launcher, its imports done (ganeti.warmstart)
        returncode, output = warm
    else:
        result = subprocess.run(argv, cwd=paths.root, capture_output=True, text=True, env=env)
        returncode, output = result.returncode, result.stderr + result.stdout
    if returncode != 0:  # twistd reports failures up to listening (status pipe)
        if ALREADY_RUNNING in output and running_pid(paths, spec) is not None:
            # started meanwhile by someone else (noded starts mond once joined)
            return _wait_listening(paths, spec, address, timeout, out, log_path, "already running")
        reason = logged_reason(log_path, offset) or output.strip()[-500:]
        out("%s failed to start: %s" % (spec.name, reason))
        return False
    return _wait_listening(paths, spec, address, timeout, out, log_path, "started", offset)


def _wait_listening(paths: Paths, spec: Spec, address: str, timeout: float, out: Callable[[str], object],
                    log_path: str, state: str, offset: int | None = None) -> bool:
    """Wait until the daemon that holds its pid file listens; report C{state} then."""
    deadline = time.monotonic() + timeout
    while True:
        pid = running_pid(paths, spec)
        if pid is None:  # it ended after the status pipe said it started
            reason = (logged_reason(log_path, offset) if offset is not None else None) or (
                "it exited; see %s" % log_path)
            out("%s failed to start: %s" % (spec.name, reason))
            return False
        problem = listening_problem(paths, spec, address)
        if problem is None:
            out("%s: %s (pid %s)" % (spec.name, state, pid))
            return True
        if time.monotonic() > deadline:
            out("%s: did not come up within %ss (%s); see %s" % (spec.name, timeout, problem, log_path))
            return False
        time.sleep(0.05)


def start(paths: Paths, names: Sequence[str] = (), timeout: float = 30.0,
          out: Callable[[str], object] = print,
          options: dict[str, list[str]] | None = None, env: dict[str, str] | None = None) -> int:
    """Start the daemons not running yet; non-zero when one fails to, with its reason.

    @param options: more command line options per daemon (full name)
    @param env: more environment variables for every daemon
    """
    identity = read_node_identity(paths)
    paths.ensure_dirs()
    failed = 0
    specs = selected(paths, list(names))
    launchers = _shared_launchers(paths, specs)
    try:
        for spec in specs:
            launcher = launchers.get(spec.name)
            if not _start_one(paths, spec, identity["address"], timeout, out, (options or {}).get(spec.name, []), env,
                              launcher.run if launcher is not None else None):
                failed += 1
    finally:
        for launcher in set(launchers.values()):
            launcher.stop()
    return EXIT_FAILURE if failed else EXIT_OK


def _shared_launchers(paths: Paths, specs: list[Spec]) -> dict[str, Any]:
    """The launchers (L{ganeti.warmstart}) to fork C{specs}' daemons from, by daemon name: one for the
    L{SHARED_DAEMONS}, one without TLS for the L{PLAIN_DAEMONS}, each when two or more of its daemons are
    to start.

    A launcher imports its daemons' shared libraries once and freezes its
    heap (C{gc.freeze}); the daemons forked from it share those pages (less
    PSS per node) and keep sharing them after it exits, once they all run.
    Each stays its own twistd process and plugin, started with the same
    command line (its C{ps} name is the daemon's, its command line the
    launcher's).  Not in NodeD (L{WARM}), nor when C{GANETI_SHARED_START=0}.
    """
    if WARM is not None or os.environ.get(SHARED_START_ENV, "1") == "0":
        return {}
    found: dict[str, Any] = {}
    for group, plain in ((SHARED_DAEMONS, False), (PLAIN_DAEMONS, True)):
        members = [spec for spec in specs if spec.name in group]
        if len(members) < 2:
            continue
        names = [spec.name for spec in members if running_pid(paths, spec) is None]
        if len(names) < 2:
            continue
        from ganeti.warmstart import WarmStarter

        launcher = WarmStarter(paths.root, paths.run_dir, shared=not plain, plain=plain)
        try:
            launcher.start()
        except OSError:
            continue
        found.update(dict.fromkeys(names, launcher))
    return found


def stop(paths: Paths, names: Sequence[str] = (), timeout: float = 30.0,
         out: Callable[[str], object] = print) -> int:
    specs = [spec_by_name(n) for n in names] if names else list(reversed(DAEMONS))
    for spec in specs:
        pid = running_pid(paths, spec)
        if pid is None:
            continue
        if pid > 0:
            try:
                os.kill(pid, signal.SIGTERM)
                os.kill(pid, signal.SIGCONT)  # a stopped daemon (SIGSTOP) must run to stop, as systemd does
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while _still_running(paths, spec, pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _still_running(paths, spec, pid) and pid > 0:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # it exited at the last moment
                pass
            out("%s: killed (pid %s) after %ss" % (spec.name, pid, timeout))
        else:
            out("%s: stopped" % spec.name)
    return EXIT_OK


def _still_running(paths: Paths, spec: Spec, pid: int) -> bool:
    """Whether the daemon C{pid} (read from its pid file) has not stopped:
    its pid file is held and, when the pid is known, that process exists (a
    child that inherited the locked descriptor is not the daemon)."""
    if running_pid(paths, spec) is None:
        return False
    if pid <= 0:
        return True
    from ganeti.childproc import pid_exists

    return pid_exists(pid)


def status(paths: Paths, names: Sequence[str] = (), out: Callable[[str], object] = print) -> int:
    """One line per daemon; zero only when every one runs and listens."""
    specs = selected(paths, list(names))  # by default the daemons this node runs
    address = ""
    if any(spec.bind for spec in specs):
        address = read_node_identity(paths)["address"]
    all_running = True
    for spec in specs:
        pid = running_pid(paths, spec)
        if pid is None:
            all_running = False
            out("%s: not running" % spec.name)
            continue
        problem = listening_problem(paths, spec, address)
        if problem is None:
            out("%s: running (pid %s)" % (spec.name, pid))
        else:
            all_running = False
            out("%s: running (pid %s) but not listening: %s" % (spec.name, pid, problem))
    return EXIT_OK if all_running else EXIT_FAILURE


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ganeti-daemons", description="Start, stop or show a node's Ganeti daemons.")
    parser.add_argument("--root", help="root of the node's files (default: $GANETI_ROOT or /)")
    parser.add_argument("action", choices=("start", "stop", "status", "restart"))
    parser.add_argument(
        "daemons", nargs="*", metavar="DAEMON",
        help="full or short name (ganeti-noded or noded, ...); default: every daemon this node runs (%s)"
        % ", ".join(BY_NAME),
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    paths = Paths.from_option(args.root)
    if args.action == "start":
        return start(paths, args.daemons)
    if args.action == "stop":
        return stop(paths, args.daemons)
    if args.action == "restart":
        stop(paths, args.daemons)
        return start(paths, args.daemons)
    return status(paths, args.daemons)


if __name__ == "__main__":
    sys.exit(main())
