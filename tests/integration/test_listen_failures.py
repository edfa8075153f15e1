"""A daemon that cannot listen exits 1 and says why; stale sockets of dead daemons do not stop a start.

Real twistd processes in temporary roots.  The TCP/UDP cases use a random
127.x.y.z address of their own, so the standard ports there are free
(other tests and engineers use 127.0.1.x).
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import crypto, daemons
from ganeti.config.bootstrap import initial_config
from ganeti.daemon import lock_pid_file
from ganeti.paths import Paths
from ganeti.testing.daemons import TWISTD, Daemon, seed_config

BIN = os.path.dirname(sys.executable)


def tool(root: Paths, name: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([os.path.join(BIN, name), "--root", root.root, *args], capture_output=True, text=True,
                          timeout=timeout)


def own_address() -> str:
    """A loopback address nobody else uses, where ports 1811/1814/5080 are free."""
    while True:
        address = "127.%d.%d.%d" % (random.randint(64, 250), random.randint(0, 255), random.randint(2, 250))
        if not any(daemons.accepts_tcp(address, port, timeout=0.2) for port in (1811, 5080)):
            return address


@contextlib.contextmanager
def busy(address: str, tcp_port: int = 0, udp_port: int = 0) -> Iterator[tuple[int, int]]:
    """Another program holds a TCP port (listening) and a UDP port at C{address}."""
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        tcp.bind((address, tcp_port))
        tcp.listen(5)
        udp.bind((address, udp_port))
        yield tcp.getsockname()[1], udp.getsockname()[1]
    finally:
        tcp.close()
        udp.close()


def leave_stale_socket(path: str, pid: int) -> None:
    """What a killed daemon leaves: its socket file, and Twisted's lock naming C{pid}."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.close()
    os.symlink(str(pid), path + ".lock")


@pytest_twisted.ensureDeferred
async def test_stale_sockets_locked_by_a_live_pid(root):
    """The old sockets' locks name a live process (a pid reused, a killed
    daemon not reaped yet): WConfD and LuxiD hold their pid files, so they
    replace the sockets, listen and answer."""
    seed_config(root, initial_config("cluster.test", "node1.test", own_address()))
    sleeper = subprocess.Popen(["sleep", "300"])
    wconfd, luxid = Daemon(root, "ganeti-wconfd"), Daemon(root, "ganeti-luxid")
    try:
        for path in (root.wconfd_socket, root.luxi_socket, root.master_socket):
            leave_stale_socket(path, sleeper.pid)
        wconfd.start()
        await wconfd.ready(reactor)
        luxid.start()
        await luxid.ready(reactor)
        delay = await threads.deferToThread(tool, root, "gnt-debug", "delay", "--no-master", "0.01")
        assert delay.returncode == 0, delay.stdout + delay.stderr
        assert os.readlink(root.luxi_socket + ".lock") == str(luxid.process.pid)
        assert os.readlink(root.wconfd_socket + ".lock") == str(wconfd.process.pid)
        assert "left by a dead instance" in luxid.output()
        second = subprocess.run([TWISTD, "-n", "--pidfile=", "--logfile=-", "ganeti-wconfd", "--root", root.root],
                                capture_output=True, text=True, timeout=60, cwd=root.root)
        assert second.returncode == 1 and "ganeti-wconfd is already running" in second.stdout + second.stderr
        assert os.readlink(root.wconfd_socket + ".lock") == str(wconfd.process.pid)  # the second one touched nothing
        again = await threads.deferToThread(tool, root, "gnt-debug", "delay", "--no-master", "0.01")
        assert again.returncode == 0, again.stdout + again.stderr
    finally:
        luxid.stop()
        wconfd.stop()
        sleeper.kill()
        sleeper.wait()


def test_busy_ports_end_the_daemons(root):
    """noded, rapi and confd on a port someone else holds: exit 1 at once,
    with one line naming the address, the port and the reason, pid file
    released."""
    crypto.bootstrap_secrets(root, "cluster.test", node_name="node1.test")
    address = own_address()
    with busy(address) as (tcp_port, udp_port):
        for name, port, kind in (
            ("ganeti-noded", tcp_port, "TCP"),
            ("ganeti-rapi", tcp_port, "HTTPS"),
            ("ganeti-confd", udp_port, "UDP"),
        ):
            started = time.monotonic()
            result = subprocess.run(
                [TWISTD, "-n", "--pidfile=", "--logfile=-", name, "--root", root.root, "--bind", address,
                 "--port", str(port)],
                capture_output=True, text=True, timeout=60, cwd=root.root,
            )
            output = result.stdout + result.stderr
            assert result.returncode == 1, output
            line = "%s cannot listen on %s port %d (%s): [Errno 98] Address already in use" % (name, address, port, kind)
            assert line in output
            assert "Traceback" not in output
            assert time.monotonic() - started < 20
            assert daemons.running_pid(root, daemons.spec_by_name(name)) is None


def test_ganeti_daemons_reports_a_daemon_that_cannot_listen(root):
    """C{ganeti-daemons start} says which daemon failed and why, at once,
    and exits 1; C{status} says it is not running; once the port is free,
    a second C{start} starts it."""
    address = own_address()
    crypto.bootstrap_secrets(root, "cluster.test", node_name="node1.test")
    daemons.write_node_identity(root, "node1.test", address)
    try:
        with busy(address, tcp_port=1811):
            started = time.monotonic()
            first = tool(root, "ganeti-daemons", "start")
            assert time.monotonic() - started < 20
            assert first.returncode == 1, first.stdout + first.stderr
            assert ("ganeti-noded failed to start: ganeti-noded cannot listen on %s port 1811 (TCP): "
                    "[Errno 98] Address already in use" % address) in first.stdout
            assert "ganeti-mond: started" in first.stdout  # a node without a role: noded and mond
            status = tool(root, "ganeti-daemons", "status")
            assert status.returncode == 1
            assert "ganeti-noded: not running" in status.stdout and "ganeti-mond: running" in status.stdout
        second = tool(root, "ganeti-daemons", "start")
        assert second.returncode == 0, second.stdout + second.stderr
        assert "ganeti-noded: started" in second.stdout and "ganeti-mond: already running" in second.stdout
        status = tool(root, "ganeti-daemons", "status", "noded", "mond")
        assert status.returncode == 0, status.stdout
    finally:
        tool(root, "ganeti-daemons", "stop")


def test_restart_by_short_name_and_status_of_a_silent_daemon(root):
    """C{ganeti-daemons restart luxid} (a traceback before); C{status} calls a
    daemon that holds its pid file but does not listen "running but not
    listening", and C{start} does not take it for a working one."""
    address = own_address()
    seed_config(root, initial_config("cluster.test", "node1.test", address))
    daemons.write_node_identity(root, "node1.test", address)
    try:
        assert tool(root, "ganeti-daemons", "start", "wconfd", "luxid").returncode == 0
        restart = tool(root, "ganeti-daemons", "restart", "luxid")
        assert restart.returncode == 0, restart.stdout + restart.stderr
        assert restart.stdout.splitlines()[0] == "ganeti-luxid: stopped"
        assert restart.stdout.splitlines()[1].startswith("ganeti-luxid: started (pid ")
        delay = tool(root, "gnt-debug", "delay", "--no-master", "0.01")
        assert delay.returncode == 0, delay.stdout + delay.stderr
        assert tool(root, "ganeti-daemons", "status", "wconfd", "luxid").returncode == 0
    finally:
        tool(root, "ganeti-daemons", "stop", "luxid", "wconfd")

    fd = lock_pid_file(root, "ganeti-luxid")  # a luxid that never listened (hung, or an old build)
    try:
        status = tool(root, "ganeti-daemons", "status", "luxid")
        assert status.returncode == 1
        assert status.stdout == (
            "ganeti-luxid: running (pid %d) but not listening: nothing accepts connections on unix socket %s\n"
            % (os.getpid(), root.luxi_socket))
        again = tool(root, "ganeti-daemons", "start", "luxid")
        assert again.returncode == 1 and "but not listening" in again.stdout
    finally:
        os.close(fd)
