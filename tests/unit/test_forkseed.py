"""The job fork server forked at LuxiD's start (ganeti.forkseed) and LuxiD's adoption of it.

The seed's own life runs in a separate interpreter (prefork forks the
process that calls it); LuxiD's side runs on a MemoryReactorClock with a
socket pair and a pipe standing for the seed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import forkseed
from ganeti.ha import epoch
from ganeti.luxid.forkclient import PID_FILE_NAME, ForkServer, recorded_pid
from ganeti.luxid.spawner import JobChannel
from tests.unit.queue_helpers import temp_root


class WantedTests(SynchronousTestCase):
    def test_only_luxid_with_its_fork_server(self) -> None:
        self.patch(os, "environ", {})
        self.assertTrue(forkseed.wanted(["ganeti-twistd", "-n", "ganeti-luxid", "--root", "/r"]))
        self.assertFalse(forkseed.wanted(["ganeti-twistd", "-n", "ganeti-wconfd", "--root", "/r"]))
        for option in ("--no-forkserver", "--no-fork", "--help", "-h", "--version"):
            self.assertFalse(forkseed.wanted(["ganeti-twistd", "ganeti-luxid", option]), option)
        # twistd's own options before the daemon's name are not LuxiD's
        self.assertTrue(forkseed.wanted(["ganeti-twistd", "--no_save", "ganeti-luxid"]))
        # another daemon's argument named so is not LuxiD
        self.assertFalse(forkseed.wanted(["ganeti-twistd", "ganeti-wconfd", "--root", "ganeti-luxid"]))

    def test_the_environment_can_turn_it_off(self) -> None:
        self.patch(os, "environ", {forkseed.DISABLE_ENV: "1"})
        self.assertFalse(forkseed.wanted(["ganeti-twistd", "ganeti-luxid"]))


def run_python(code: str) -> dict:
    """Run C{code} in a fresh interpreter; the JSON object it printed last."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != forkseed.DISABLE_ENV})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


PREFORK = """
    import json, os, sys, time
    from ganeti import forkseed
    seed = forkseed.prefork(["ganeti-twistd", "-n", "ganeti-luxid"])
"""


class SeedProcessTests(SynchronousTestCase):
    def test_a_seed_nobody_adopts_ends_when_luxid_closes_its_socket(self) -> None:
        """... having forked nothing meanwhile (no spare before the adoption)."""
        result = run_python(textwrap.dedent(PREFORK) + textwrap.dedent("""
            time.sleep(1.5)  # (its imports)
            def parent(entry):
                try:
                    with open("/proc/%s/stat" % entry) as handle:
                        return int(handle.read().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):  # (a process that ended meanwhile)
                    return None
            children = [e for e in os.listdir("/proc") if e.isdigit() and parent(e) == seed.pid]
            with open("/proc/%d/comm" % seed.pid) as handle:
                name = handle.read().strip()
            forkseed.discard()
            _pid, status = os.waitpid(seed.pid, 0)
            print(json.dumps({"children": children, "name": name, "status": status, "taken": forkseed.take()}))
        """))
        self.assertEqual(result, {"children": [], "name": forkseed.NAME, "status": 0, "taken": None})

    def test_a_bad_adoption_ends_the_seed(self) -> None:
        result = run_python(textwrap.dedent(PREFORK) + textwrap.dedent("""
            seed.sock.send(b'{"root": 5}')
            _pid, status = os.waitpid(seed.pid, 0)
            print(json.dumps({"code": os.waitstatus_to_exitcode(status)}))
        """))
        self.assertEqual(result, {"code": 1})

    def test_no_seed_where_a_fork_is_not_safe(self) -> None:
        """A reactor installed (its epoll instance would be shared), another thread running (it may hold a
        lock the child would wait on forever)."""
        result = run_python("""
            import json, threading, time
            from ganeti import forkseed
            argv = ["ganeti-twistd", "ganeti-luxid"]
            stop = threading.Event()
            thread = threading.Thread(target=stop.wait)
            thread.start()
            with_thread = forkseed.prefork(argv)
            stop.set()
            thread.join()
            import twisted.internet.reactor
            with_reactor = forkseed.prefork(argv)
            print(json.dumps([with_thread is None, with_reactor is None]))
        """)
        self.assertEqual(result, [True, True])


class ForkRunningTests(SynchronousTestCase):
    def test_a_seed_forked_from_a_running_daemon_keeps_none_of_its_reactor_signals_or_logging(self) -> None:
        """A reactor running with its signal handlers, a log observer writing to a file and a thread of
        its pool busy: the child has none of them once L{forkseed._leave_running} ran, and installs a
        reactor of its own."""
        log = os.path.join(temp_root(self, "gntfr").root, "daemon.log")
        result = run_python("""
            import gc, json, os, signal, sys, time
            from twisted.internet import reactor
            from twisted.logger import Logger, globalLogBeginner, textFileLogObserver
            from ganeti import forkseed

            globalLogBeginner.beginLoggingTo([textFileLogObserver(open(%r, "a"))])

            def inside():
                reactor.callInThread(time.sleep, 1)  # a thread of the pool, busy at the fork
                old = id(reactor)
                before = [signal.getsignal(signal.SIGTERM) != signal.SIG_DFL, signal.set_wakeup_fd(-1)]
                signal.set_wakeup_fd(before[1])
                r, w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    forkseed._leave_running()
                    Logger().info("written by the child")
                    from twisted.internet import reactor as own
                    state = {"own_reactor": id(own) != old, "term": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
                             "int": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
                             "wakeup": signal.set_wakeup_fd(-1), "frozen": gc.get_freeze_count() > 0,
                             "stdout": sys.stdout is sys.__stdout__}
                    os.write(w, json.dumps(state).encode())
                    os._exit(0)
                os.close(w)
                state = json.loads(os.read(r, 65536))
                os.waitpid(pid, 0)
                Logger().info("written by the daemon")
                os.write(1, json.dumps({"before": before, "child": state}).encode() + b"\\n")  # (print: the log)
                reactor.stop()

            reactor.callWhenRunning(inside)
            reactor.run()
        """ % log)
        self.assertEqual(result["child"], {"own_reactor": True, "term": True, "int": True, "wakeup": -1,
                                           "frozen": True, "stdout": True})
        self.assertTrue(result["before"][0] and result["before"][1] >= 0, result)  # (the daemon had them)
        with open(log, encoding="utf-8") as handle:
            written = handle.read()
        self.assertIn("written by the daemon", written)
        self.assertNotIn("written by the child", written)


class AdoptionTests(SynchronousTestCase):
    """LuxiD's side: the seed is told what it needs, its reports are read, its end is seen."""

    def setUp(self) -> None:
        self.paths = temp_root(self, "gntseed")
        os.makedirs(self.paths.run_dir, exist_ok=True)
        self.reactor = MemoryReactorClock()
        self.orphans: list[list[JobChannel]] = []
        self.server = ForkServer(self.reactor, self.paths, lambda _exit: None, self.orphans.append, rpc_port=1811)
        self.luxid_end, self.seed_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.addCleanup(self.seed_end.close)
        reports, self.report_w = os.pipe()
        self.addCleanup(lambda: os.close(self.report_w))
        self.seed = forkseed.Seed(os.getpid(), self.luxid_end, reports)  # a pid that exists, not a child
        self.patch(forkseed, "_seed", self.seed)
        epoch.adopt(7)
        self.addCleanup(epoch.forget)

    def watched(self) -> list:
        return [r for r in self.reactor.getReaders() if r.logPrefix() == "forkserver"]

    def test_the_seed_learns_the_root_port_and_luxids_environment(self) -> None:
        self.server.start()
        adoption = json.loads(self.seed_end.recv(forkseed.MAX_ADOPT))
        self.assertEqual((adoption["root"], adoption["rpc_port"]), (self.paths.root, 1811))
        self.assertEqual(adoption["env"][epoch.ENV], "7")  # the master epoch LuxiD adopted on its start
        self.assertTrue(self.server.running)
        self.assertEqual(recorded_pid(self.paths), os.getpid())
        self.assertIsNone(forkseed.take())  # adopted once

    def test_reports_are_read_from_its_pipe(self) -> None:
        self.server.start()
        os.write(self.report_w, b'{"spare": 4242}\n')
        for reader in self.watched():
            if reader.fileno() == self.seed.reports:
                reader.doRead()
        self.assertEqual(self.server.spare, 4242)

    def test_the_end_of_its_socket_is_its_end(self) -> None:
        self.server.start()
        reports = self.seed.reports
        self.seed_end.close()
        sock_reader = [r for r in self.watched() if r.fileno() == self.luxid_end.fileno()][0]
        reason = sock_reader.doRead()
        self.assertIsNotNone(reason)  # the reactor then calls connectionLost
        sock_reader.connectionLost(reason)
        self.assertFalse(self.server.running)
        self.assertEqual(self.watched(), [])
        self.assertIsNone(recorded_pid(self.paths))
        self.assertFalse(os.path.exists(self.paths.pid_file(PID_FILE_NAME)))
        self.assertEqual(self.seed.reports, -1)
        self.assertRaises(OSError, os.fstat, reports)
        # its descriptors are closed once: numbers reused since are left alone, whatever comes after
        reused = os.open(os.devnull, os.O_RDONLY)
        self.addCleanup(os.close, reused)
        sock_reader.connectionLost(reason)
        self.server.stop()
        os.fstat(reused)

    def test_stopping_luxid_closes_the_seeds_socket(self) -> None:
        self.server.start()
        self.seed_end.recv(forkseed.MAX_ADOPT)
        self.server.stop()
        self.assertEqual(self.seed_end.recv(100), b"")  # end of file: the seed exits
        self.assertEqual(self.watched(), [])
        self.assertIsNone(recorded_pid(self.paths))

    def test_a_seed_gone_before_its_adoption_leaves_the_usual_start(self) -> None:
        self.seed_end.close()
        started: list[bool] = []
        self.reactor.spawnProcess = lambda *a, **k: started.append(True) or type("P", (), {"pid": 1})()
        self.server.start()
        self.assertEqual(started, [True])  # python -m ganeti.luxid.forkserver
        self.assertEqual(self.watched(), [])
