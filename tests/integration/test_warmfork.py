"""Test daemons forked from a warm launcher (ganeti.testing.warmfork): a real ganeti-confd forked from a
launcher of its own runs as the cold command would (its pid file, its port, the environment and working
directory it was given, no TLS libraries), its exit status is reported, and it ends when the launcher
ends, so no test daemon outlives the test process that started it."""

from __future__ import annotations

import os
import signal
import time

from ganeti import crypto, daemons
from ganeti.childproc import pid_exists
from ganeti.daemons import free_port
from ganeti.testing import warmfork
from ganeti.testing.cluster import loopback_config
from ganeti.testing.daemons import TWISTD, seed_config

CONFD = daemons.BY_NAME["ganeti-confd"]


def _until(check, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_confd_forked_warm_runs_reports_its_exit_and_ends_with_its_launcher(root):
    crypto.bootstrap_secrets(root, "cluster.test", node_name="node1.test")
    seed_config(root, loopback_config(1))
    port = free_port("127.0.1.1", udp=True)
    argv = [TWISTD, "-n", "--pidfile=", "--logfile=-", "ganeti-confd", "--root", root.root, "--bind", "127.0.1.1"]
    env = dict(os.environ, **{daemons.CONFD_PORT_ENV: str(port)})  # the port comes from its environment
    log = os.path.join(root.root, "confd.out")
    launcher = warmfork.Launcher("plain")
    try:
        process = launcher.spawn(argv, env, root.root, log=log)
        assert process is not None
        _until(lambda: daemons.running_pid(root, CONFD) == process.pid and daemons.udp_bound("127.0.1.1", port))
        assert os.readlink("/proc/%d/cwd" % process.pid) == root.root
        with open("/proc/%d/maps" % process.pid) as handle:
            assert "cryptography" not in handle.read()
        assert process.poll() is None

        def logged() -> bool:  # its output goes to its log (written just after the bind: not at once under load)
            with open(log) as handle:
                return "ConfdServerProtocol starting on %d" % port in handle.read()

        _until(logged)
        process.kill()
        assert process.wait(timeout=30) == -signal.SIGKILL  # as subprocess.Popen says it
        assert not daemons.udp_bound("127.0.1.1", port)

        # the launcher ends (as when the test process dies): what it forked ends too
        again = launcher.spawn(argv, env, root.root, log=log)
        assert again is not None
        _until(lambda: daemons.running_pid(root, CONFD) == again.pid)
        launcher.close()
        again.wait(timeout=30)
        assert not pid_exists(again.pid) and daemons.running_pid(root, CONFD) is None
        assert launcher.spawn(argv, env, root.root, log=log) is None, "a closed launcher forks nothing"
    finally:
        launcher.close()
        daemons.stop(root, [CONFD.name], out=lambda _line: None)
