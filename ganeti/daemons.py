"""C{ganeti-daemons start|stop|status [DAEMON...]}: run a node's daemons.

Each daemon runs as its twistd plugin, daemonized, with the node's root:

    twistd --pidfile= --logfile=ROOT/var/log/ganeti/<log>.log ganeti-wconfd --root ROOT

and holds C{ROOT/var/run/ganeti/<daemon>.pid} locked while it runs, which
is how L{status} and L{stop} find it.  Which daemons a node runs, and on
which address, comes from C{ROOT/var/lib/ganeti/node.json} (written by
C{gnt-cluster init}): every node runs noded and confd; the master also runs
wconfd, rapi and luxid, in Ganeti's order.  Daemons whose plugin is not
installed are skipped.
"""

from __future__ import annotations

import argparse
import fcntl
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import NamedTuple

from ganeti.logfile import LOG_FILE_ENV
from ganeti.paths import Paths

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class Spec(NamedTuple):
    name: str
    package: str  # ganeti.<package>.tap must exist for the daemon to be available
    master_only: bool
    bind: bool  # takes --bind ADDRESS
    port: int  # TCP port to wait for (0: none)
    socket: str  # Paths attribute of its Unix socket ("" : none)
    logbase: str


#: Ganeti's start order (daemons.md): noded, confd, wconfd, rapi, luxid
DAEMONS = (
    Spec("ganeti-noded", "noded", False, True, 1811, "", "node-daemon"),
    Spec("ganeti-confd", "confd", False, True, 0, "", "conf-daemon"),
    Spec("ganeti-wconfd", "wconfd", True, False, 0, "wconfd_socket", "wconf-daemon"),
    Spec("ganeti-rapi", "rapi", True, True, 5080, "", "rapi-daemon"),
    Spec("ganeti-luxid", "luxid", True, False, 0, "luxi_socket", "luxi-daemon"),
)
BY_NAME = {spec.name: spec for spec in DAEMONS}


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
        raise SystemExit("%s: this root has no node identity; run 'gnt-cluster init' first" % node_file(paths))
    except ValueError as e:
        raise SystemExit("%s is corrupt: %s" % (node_file(paths), e))
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


def available(spec: Spec) -> bool:
    try:
        return importlib.util.find_spec("ganeti.%s.tap" % spec.package) is not None
    except ModuleNotFoundError:
        return False


def running_pid(paths: Paths, spec: Spec) -> int | None:
    """The pid of the running daemon, or None (its pid file is not locked)."""
    path = paths.pid_file(spec.name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            data = os.read(fd, 32).decode(errors="replace").strip()
            return int(data) if data.isdigit() else -1
        return None
    finally:
        os.close(fd)


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


def free_port(address: str = "127.0.1.1", udp: bool = False) -> int:
    """A port nothing listens on at C{address} right now (tests, benchmarks)."""
    kind = socket.SOCK_DGRAM if udp else socket.SOCK_STREAM
    with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, kind) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def _ready(paths: Paths, spec: Spec, address: str) -> bool:
    if spec.socket:
        return accepts_unix(getattr(paths, spec.socket))
    if spec.port:
        return accepts_tcp(address, spec.port)
    return True


def selected(paths: Paths, names: list[str]) -> list[Spec]:
    if names:
        unknown = [n for n in names if n not in BY_NAME]
        if unknown:
            raise SystemExit("unknown daemon(s): %s (known: %s)" % (", ".join(unknown), ", ".join(BY_NAME)))
        return [BY_NAME[n] for n in names]
    master = is_master(paths)
    return [spec for spec in DAEMONS if available(spec) and (master or not spec.master_only)]


def twistd_command(paths: Paths, spec: Spec, options: list[str]) -> tuple[list[str], dict[str, str]]:
    """How to run C{spec}'s daemon daemonized: its argv and environment.

    It logs through L{ganeti.logfile.observer} to C{ROOT/var/log/ganeti/<logbase>.log}
    (appending, info level; C{GANETI_DEBUG=1} in the environment adds debug
    lines).  twistd is the one installed beside this Python, else the one
    on C{PATH} (a C{pip install --user} puts it in C{~/.local/bin}).
    """
    twistd = os.path.join(os.path.dirname(sys.executable), "twistd")
    if not os.access(twistd, os.X_OK):
        twistd = shutil.which("twistd") or twistd
    env = dict(os.environ)
    env[LOG_FILE_ENV] = paths.log_file(spec.logbase)
    argv = [twistd, "--pidfile=", "--umask=022", "--logger=ganeti.logfile.observer", spec.name, *options]
    return argv, env


def start(paths: Paths, names: list[str] = (), timeout: float = 30.0, out=print) -> int:  # type: ignore[assignment]
    identity = read_node_identity(paths)
    paths.ensure_dirs()
    failed = 0
    for spec in selected(paths, list(names)):
        pid = running_pid(paths, spec)
        if pid is not None:
            out("%s: already running (pid %s)" % (spec.name, pid))
            continue
        argv, env = twistd_command(paths, spec, ["--root", paths.root])
        if spec.bind:
            argv += ["--bind", identity["address"]]
        result = subprocess.run(argv, cwd=paths.root, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            out("%s: failed to start: %s" % (spec.name, (result.stderr or result.stdout).strip()[-500:]))
            failed += 1
            continue
        deadline = time.monotonic() + timeout
        while not (running_pid(paths, spec) and _ready(paths, spec, identity["address"])):
            if time.monotonic() > deadline:
                out("%s: did not come up within %ss; see %s" % (spec.name, timeout, paths.log_file(spec.logbase)))
                failed += 1
                break
            time.sleep(0.05)
        else:
            out("%s: started (pid %s)" % (spec.name, running_pid(paths, spec)))
    return EXIT_FAILURE if failed else EXIT_OK


def stop(paths: Paths, names: list[str] = (), timeout: float = 30.0, out=print) -> int:  # type: ignore[assignment]
    specs = [BY_NAME[n] for n in names] if names else list(reversed(DAEMONS))
    for spec in specs:
        pid = running_pid(paths, spec)
        if pid is None:
            continue
        if pid > 0:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while running_pid(paths, spec) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        if running_pid(paths, spec) is not None and pid > 0:
            os.kill(pid, signal.SIGKILL)
            out("%s: killed (pid %s) after %ss" % (spec.name, pid, timeout))
        else:
            out("%s: stopped" % spec.name)
    return EXIT_OK


def status(paths: Paths, names: list[str] = (), out=print) -> int:  # type: ignore[assignment]
    specs = selected(paths, list(names))  # by default the daemons this node runs
    all_running = True
    for spec in specs:
        pid = running_pid(paths, spec)
        all_running &= pid is not None
        out("%s: %s" % (spec.name, "running (pid %s)" % pid if pid is not None else "stopped"))
    return EXIT_OK if all_running else EXIT_FAILURE


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ganeti-daemons", description="Start, stop or show a node's Ganeti daemons.")
    parser.add_argument("--root", help="root of the node's files (default: $GANETI_ROOT or /)")
    parser.add_argument("action", choices=("start", "stop", "status", "restart"))
    parser.add_argument(
        "daemons", nargs="*", metavar="DAEMON", help="default: every daemon this node runs (%s)" % ", ".join(BY_NAME)
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
