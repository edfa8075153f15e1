"""ganeti-daemons: daemon names, the reason a daemon did not start (temp roots, no daemons)."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from ganeti import daemons
from ganeti.paths import Paths


class NameTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.paths = Paths(tempfile.mkdtemp(prefix="dcli"))
        self.addCleanup(shutil.rmtree, self.paths.root, True)

    def test_short_and_full_names(self) -> None:
        for short in ("noded", "confd", "wconfd", "rapi", "luxid"):
            self.assertEqual(daemons.spec_by_name(short).name, "ganeti-" + short)
            self.assertEqual(daemons.spec_by_name("ganeti-" + short).name, "ganeti-" + short)
        self.assertEqual([s.name for s in daemons.selected(self.paths, ["luxid", "ganeti-wconfd"])],
                         ["ganeti-luxid", "ganeti-wconfd"])

    def test_unknown_name(self) -> None:
        error = self.assertRaises(SystemExit, daemons.spec_by_name, "masterd")
        self.assertIn("unknown daemon: masterd", str(error))
        self.assertIn("ganeti-luxid (luxid)", str(error))

    def test_stop_by_short_name(self) -> None:
        """C{ganeti-daemons restart luxid} stops first: a short name there
        raised KeyError."""
        lines: list[str] = []
        self.assertEqual(daemons.stop(self.paths, ["luxid"], out=lines.append), daemons.EXIT_OK)
        self.assertEqual(lines, [])  # it was not running

    def test_stop_continues_a_stopped_daemon(self) -> None:
        """A daemon stopped by SIGSTOP gets SIGCONT after SIGTERM, so it stops at once (as systemd does)
        instead of being killed after the timeout."""
        import signal

        sent: list[tuple[int, int]] = []
        running = [4242]
        self.patch(daemons, "running_pid", lambda paths, spec: running[0] if running else None)

        def kill(pid: int, signum: int) -> None:
            sent.append((pid, signum))
            if signum == signal.SIGCONT:
                running.clear()

        self.patch(daemons.os, "kill", kill)
        lines: list[str] = []
        daemons.stop(self.paths, ["luxid"], timeout=5, out=lines.append)
        self.assertEqual(sent, [(4242, signal.SIGTERM), (4242, signal.SIGCONT)])
        self.assertEqual(lines, ["ganeti-luxid: stopped"])

    def test_stop_ends_with_the_daemon_not_with_its_pid_files_lock(self) -> None:
        """A process that inherited the daemon's locked pid file (a child
        started without closing it) keeps the lock after the daemon exited:
        the daemon is stopped once its own process is gone."""
        import subprocess

        from ganeti import lockfile

        gone = subprocess.Popen(["true"])
        gone.wait()  # a pid no process has now
        fd = lockfile.hold(self.paths.pid_file("ganeti-luxid"))
        self.addCleanup(lockfile.release, fd)
        lockfile.write_pid(fd, gone.pid)
        lines: list[str] = []
        self.assertEqual(daemons.stop(self.paths, ["luxid"], timeout=0.2, out=lines.append), daemons.EXIT_OK)
        self.assertEqual(lines, ["ganeti-luxid: stopped"])

    def test_status_of_a_daemon_not_running(self) -> None:
        daemons.write_node_identity(self.paths, "node1.test", "127.0.1.1")
        lines: list[str] = []
        self.assertEqual(daemons.status(self.paths, ["confd", "luxid"], out=lines.append), daemons.EXIT_FAILURE)
        self.assertEqual(lines, ["ganeti-confd: not running", "ganeti-luxid: not running"])


class ReasonTests(SynchronousTestCase):
    def setUp(self) -> None:
        directory = tempfile.mkdtemp(prefix="dlog")
        self.addCleanup(shutil.rmtree, directory, True)
        self.log = os.path.join(directory, "node-daemon.log")

    def write(self, text: str) -> None:
        with open(self.log, "a") as handle:
            handle.write(text)

    def test_only_what_this_start_logged(self) -> None:
        old = "2026-11-24T23:00:00+0000 [ganeti.listening.Listener#critical] ganeti-noded cannot listen on old\n"
        self.write(old)
        offset = daemons.log_size(self.log)
        self.assertIsNone(daemons.logged_reason(self.log, offset))
        self.write("2026-11-24T23:10:46+0000 [-] twistd starting up.\n"
                   "2026-11-24T23:10:46+0000 [ganeti.listening.Listener#critical] ganeti-noded cannot listen on "
                   "127.0.1.1 port 1811 (TCP): [Errno 98] Address already in use\n")
        self.assertEqual(daemons.logged_reason(self.log, offset),
                         "ganeti-noded cannot listen on 127.0.1.1 port 1811 (TCP): [Errno 98] Address already in use")

    def test_other_critical_line(self) -> None:
        self.write("2026-11-24T23:10:46+0000 [x#info] fine\n2026-11-24T23:10:46+0000 [x#critical] voting lost\n")
        self.assertEqual(daemons.logged_reason(self.log, 0), "voting lost")

    def test_no_log(self) -> None:
        self.assertEqual(daemons.log_size(self.log), 0)
        self.assertIsNone(daemons.logged_reason(self.log, 0))


def test_rapi_port_follows_the_environment(monkeypatch):
    """ganeti-rapi started by NodeD or ganeti-daemons listens on $GANETI_RAPI_PORT
    when set, and status looks for it there."""
    from ganeti.rapi.tap import Options

    rapi = daemons.BY_NAME["ganeti-rapi"]
    monkeypatch.delenv(daemons.RAPI_PORT_ENV, raising=False)
    options = Options()
    options.parseOptions(["--bind", "127.0.0.1"])
    assert (options["port"], daemons.port_of(rapi)) == (5080, 5080)
    monkeypatch.setenv(daemons.RAPI_PORT_ENV, "15080")
    options = Options()
    options.parseOptions(["--bind", "127.0.0.1"])
    assert (options["port"], daemons.port_of(rapi)) == (15080, 15080)
    assert daemons.port_of(daemons.BY_NAME["ganeti-noded"]) == 1811, "only RAPI and confd move"
    options = Options()
    options.parseOptions(["--bind", "127.0.0.1", "--port", "6000"])
    assert options["port"] == 6000, "the option wins"
    monkeypatch.setenv(daemons.RAPI_PORT_ENV, "junk")
    assert daemons.port_of(rapi) == 5080


def test_confd_port_follows_the_environment(monkeypatch):
    """ganeti-confd started by NodeD on a node promoted to master candidate listens on
    $GANETI_CONFD_PORT when set (many loopback clusters on one host), else on 1814."""
    from ganeti.confd.tap import Options

    confd = daemons.BY_NAME["ganeti-confd"]
    monkeypatch.delenv(daemons.CONFD_PORT_ENV, raising=False)
    options = Options()
    options.parseOptions(["--bind", "127.0.0.1"])
    assert (options["port"], daemons.port_of(confd)) == (1814, 1814)
    monkeypatch.setenv(daemons.CONFD_PORT_ENV, "11814")
    options = Options()
    options.parseOptions(["--bind", "127.0.0.1"])
    assert (options["port"], daemons.port_of(confd)) == (11814, 11814)
    options = Options()
    options.parseOptions(["--port", "6000"])
    assert options["port"] == 6000, "the option wins"


class RoleTests(SynchronousTestCase):
    """Which daemons a node runs: confd only on the master and the candidates."""

    def setUp(self) -> None:
        self.paths = Paths(tempfile.mkdtemp(prefix="drole"))
        self.addCleanup(shutil.rmtree, self.paths.root, True)
        daemons.write_node_identity(self.paths, "node3.test", "127.0.1.3")
        os.makedirs(os.path.dirname(self.paths.ssconf("master_node")), exist_ok=True)
        for key, value in (("master_node", "node1.test"), ("master_candidates", "node1.test\nnode2.test")):
            with open(self.paths.ssconf(key), "w") as handle:
                handle.write(value + "\n")
        with open(self.paths.rapi_pem, "w") as handle:
            handle.write("certificate")

    def names(self) -> list[str]:
        return [spec.name for spec in daemons.selected(self.paths, [])]

    def test_plain_node_runs_noded_and_mond(self) -> None:
        self.assertEqual(self.names(), ["ganeti-noded", "ganeti-mond"])

    def test_candidate_runs_confd_and_rapi_too(self) -> None:
        with open(self.paths.ssconf("master_candidates"), "a") as handle:
            handle.write("node3.test\n")
        self.assertEqual(self.names(), ["ganeti-noded", "ganeti-confd", "ganeti-rapi", "ganeti-mond"])

    def test_master_runs_every_daemon(self) -> None:
        with open(self.paths.ssconf("master_node"), "w") as handle:
            handle.write("node3.test\n")
        self.assertEqual(self.names(), [spec.name for spec in daemons.DAEMONS])


class SharedStartTests(SynchronousTestCase):
    """L{daemons.start} forks two or more of a node's daemons from one launcher."""

    def setUp(self) -> None:
        self.paths = Paths(tempfile.mkdtemp(prefix="dshare"))
        self.addCleanup(shutil.rmtree, self.paths.root, True)
        from ganeti import warmstart

        self.patch(warmstart.WarmStarter, "start", lambda starter: None)  # no process in a unit test

    def launchers(self, names: list[str]) -> dict[str, Any]:
        launchers = daemons._shared_launchers(self.paths, [daemons.spec_by_name(n) for n in names])
        for launcher in set(launchers.values()):
            self.addCleanup(launcher.stop)
        return launchers

    def test_one_daemon_of_a_kind_starts_cold(self) -> None:
        self.assertEqual(self.launchers(["noded", "confd"]), {})

    def test_two_share_a_launcher(self) -> None:
        launchers = self.launchers(["noded", "wconfd"])
        self.assertEqual(sorted(launchers), ["ganeti-noded", "ganeti-wconfd"])
        self.assertIs(launchers["ganeti-noded"], launchers["ganeti-wconfd"])
        self.assertTrue(launchers["ganeti-noded"].shared)

    def test_confd_and_mond_share_one_without_tls(self) -> None:
        launchers = self.launchers(["noded", "confd", "wconfd", "mond"])
        self.assertIs(launchers["ganeti-confd"], launchers["ganeti-mond"])
        self.assertIsNot(launchers["ganeti-confd"], launchers["ganeti-noded"])
        self.assertTrue(launchers["ganeti-confd"].plain)
        self.assertFalse(launchers["ganeti-noded"].plain)

    def test_a_plain_node_starts_cold(self) -> None:
        self.assertEqual(self.launchers(["noded", "mond"]), {})

    def test_switched_off_by_the_environment(self) -> None:
        self.patch(os, "environ", dict(os.environ, **{daemons.SHARED_START_ENV: "0"}))
        self.assertEqual(self.launchers(["noded", "wconfd", "confd", "mond"]), {})

    def test_not_in_noded_which_has_its_own(self) -> None:
        self.patch(daemons, "WARM", lambda argv, env, cwd: None)
        self.assertEqual(self.launchers(["noded", "wconfd"]), {})
