"""NodeD's hooks runner: Ganeti's RunParts rules, the environment, the timeout, bad requests."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from twisted.internet.defer import ensureDeferred
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from ganeti.noded import hooks
from ganeti.noded.failure import RpcFailure
from ganeti.paths import Paths


class FakeProcess(StringTransport):
    def __init__(self, pid: int) -> None:
        super().__init__()
        self.pid = pid
        self.signals: list[str] = []

    def signalProcess(self, signal: str) -> None:
        self.signals.append(signal)

    def closeStdin(self) -> None:
        pass


class ProcessReactor(Clock):
    """A clock that records spawned processes (the test plays them)."""

    def __init__(self) -> None:
        super().__init__()
        self.spawned: list[tuple[Any, list[str], dict[str, str], str, FakeProcess]] = []

    def spawnProcess(self, protocol: Any, executable: str, args: list[str], env: dict[str, str],
                     path: str) -> FakeProcess:
        process = FakeProcess(1000 + len(self.spawned))
        self.spawned.append((protocol, list(args), dict(env), path, process))
        protocol.makeConnection(process)
        return process


def _script(directory: str, name: str, mode: int = 0o755) -> str:
    path = os.path.join(directory, name)
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\nexit 0\n")
    os.chmod(path, mode)
    return path


class HooksRunnerTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.root = tempfile.mkdtemp(prefix="hooks-")
        self.addCleanup(lambda: os.system("rm -rf %s" % self.root))
        self.paths = Paths(self.root)
        self.reactor = ProcessReactor()
        self.runner = hooks.HooksRunner(self.paths, self.reactor, timeout=30)
        self.dir = os.path.join(self.paths.hooks_dir, "instance-add-pre.d")

    def run_hooks(self, env: dict[str, Any] | None = None, hpath: str = "instance-add", phase: str = "pre") -> Any:
        return ensureDeferred(self.runner.hooks_runner(hpath, phase, env if env is not None else {"A": "1"}))

    def finish(self, index: int, out: bytes = b"", err: bytes = b"", code: int = 0) -> None:
        protocol = self.reactor.spawned[index][0]
        if out:
            protocol.outReceived(out)
        if err:
            protocol.errReceived(err)
        protocol.processEnded(Failure(ProcessDone(0) if code == 0 else ProcessTerminated(exitCode=code)))

    def test_no_directory_no_hooks(self) -> None:
        """A phase without its directory runs nothing and answers []."""
        self.assertEqual(self.successResultOf(self.run_hooks()), [])

    def test_ganeti_rules_and_order(self) -> None:
        """Visible entries in sorted order; only executable regular files with
        a plain name run, the others are skipped; each gets exactly the given
        environment, from /, in a session of its own."""
        os.makedirs(self.dir)
        _script(self.dir, "20-second")
        _script(self.dir, "10-first")
        _script(self.dir, "15.sh")  # a dot: not a hook name
        _script(self.dir, "17-not-executable", 0o644)
        _script(self.dir, ".hidden")
        os.mkdir(os.path.join(self.dir, "18-a-directory"))
        d = self.run_hooks({"GANETI_X": "1", "PATH": "/bin"})
        self.assertEqual(len(self.reactor.spawned), 1)  # one at a time
        _protocol, argv, env, cwd, _process = self.reactor.spawned[0]
        self.assertEqual(argv[-1], os.path.join(self.dir, "10-first"))
        self.assertEqual((env, cwd), ({"GANETI_X": "1", "PATH": "/bin"}, "/"))
        self.finish(0, out=b"fine\n")
        self.finish(1, out=b"out\n", err=b"err\n", code=3)
        self.assertEqual(self.successResultOf(d), [
            ["instance-add-pre.d/10-first", hooks.HKR_SUCCESS, "fine"],
            ["instance-add-pre.d/15.sh", hooks.HKR_SKIP, ""],
            ["instance-add-pre.d/17-not-executable", hooks.HKR_SKIP, ""],
            ["instance-add-pre.d/18-a-directory", hooks.HKR_SKIP, ""],
            ["instance-add-pre.d/20-second", hooks.HKR_FAIL, "out\nerr"],
        ])

    def test_hanging_hook_is_killed(self) -> None:
        """A script still running at the timeout is killed (its session too)
        and fails saying so; the next script still runs."""
        os.makedirs(self.dir)
        _script(self.dir, "a-hangs")
        _script(self.dir, "b-next")
        d = self.run_hooks()
        process = self.reactor.spawned[0][4]
        self.reactor.spawned[0][0].outReceived(b"started\n")
        self.reactor.advance(29)
        self.assertEqual(process.signals, [])
        killed: list[tuple[int, int]] = []
        self.patch(os, "killpg", lambda pid, sig: killed.append((pid, sig)))
        self.reactor.advance(1)
        self.assertEqual(process.signals, ["KILL"])
        self.assertEqual(killed[0][0], process.pid)
        self.finish(0, code=137)
        self.finish(1)
        result = self.successResultOf(d)
        self.assertEqual(result[0][:2], ["instance-add-pre.d/a-hangs", hooks.HKR_FAIL])
        self.assertEqual(result[0][2], "started\nHook script execution error: timed out after 30 seconds (killed)")
        self.assertEqual(result[1][1], hooks.HKR_SUCCESS)

    def test_unsearchable_directory_fails_clearly(self) -> None:
        """A phase directory without any x bit fails the phase with a clear message."""
        os.makedirs(self.dir)
        _script(self.dir, "a")
        os.chmod(self.dir, 0o644)
        self.addCleanup(os.chmod, self.dir, 0o755)
        [[script, status, output]] = self.successResultOf(self.run_hooks())
        self.assertEqual((script, status), ("instance-add-pre.d", hooks.HKR_FAIL))
        self.assertIn("is not searchable (mode 644)", output)
        self.assertEqual(self.reactor.spawned, [])

    def test_bad_requests_refused(self) -> None:
        """A path out of the hooks dir, an unknown phase or a bad environment is refused."""
        for hpath, phase, env, text in (("../etc", "pre", {}, "Invalid hooks path"),
                                        ("instance-add", "middle", {}, "Unknown hooks phase"),
                                        ("instance-add", "pre", ["A"], "must be a mapping"),
                                        ("instance-add", "pre", {"A=B": "1"}, "Invalid hooks environment"),
                                        ("instance-add", "pre", {"A": "x\0y"}, "NUL")):
            failure = self.failureResultOf(ensureDeferred(self.runner.hooks_runner(hpath, phase, env)), RpcFailure)
            self.assertIn(text, str(failure.value))
        self.assertEqual(self.reactor.spawned, [])

    def test_values_become_strings(self) -> None:
        self.assertEqual(hooks.check_request("x", "post", {"A": 1, "B": True}), {"A": "1", "B": "True"})


class LocalHooksTests(SynchronousTestCase):
    """The master IP's hooks, which NodeD runs for itself (Ganeti's RunLocalHooks)."""

    def setUp(self) -> None:
        self.root = tempfile.mkdtemp(prefix="hooks-")
        self.addCleanup(lambda: os.system("rm -rf %s" % self.root))
        self.paths = Paths(self.root)
        os.makedirs(self.paths.data_dir)
        for key, value in (("cluster_name", "c.test"), ("master_node", "n1.test")):
            with open(self.paths.ssconf(key), "w") as handle:
                handle.write(value + "\n")
        self.reactor = ProcessReactor()
        self.runner = hooks.HooksRunner(self.paths, self.reactor, timeout=30)
        for phase in ("pre", "post"):
            os.makedirs(os.path.join(self.paths.hooks_dir, "master-ip-turnup-%s.d" % phase))
            _script(os.path.join(self.paths.hooks_dir, "master-ip-turnup-%s.d" % phase), "a")
        self.done: list[str] = []

    def run_local(self) -> Any:
        return ensureDeferred(self.runner.run_local("OP_CLUSTER_IP_TURNUP", "master-ip-turnup",
                                                    {"MASTER_IP": "192.0.2.9"}, lambda: self.done.append("up")))

    def test_pre_action_post(self) -> None:
        d = self.run_local()
        env = self.reactor.spawned[0][2]
        self.assertEqual((env["GANETI_MASTER_IP"], env["GANETI_HOOKS_PATH"], env["GANETI_CLUSTER"],
                          env["GANETI_MASTER"], env["GANETI_HOOKS_PHASE"]),
                         ("192.0.2.9", "master-ip-turnup", "c.test", "n1.test", "pre"))
        self.reactor.spawned[0][0].processEnded(Failure(ProcessDone(0)))
        self.assertEqual(self.done, ["up"])
        post = self.reactor.spawned[1][2]
        self.assertEqual((post["GANETI_POST_MASTER_IP"], post["GANETI_MASTER_IP"]), ("192.0.2.9", "192.0.2.9"))
        self.reactor.spawned[1][0].processEnded(Failure(ProcessTerminated(exitCode=1)))  # only logged
        self.successResultOf(d)

    def test_failing_pre_hook_refuses(self) -> None:
        d = self.run_local()
        self.reactor.spawned[0][0].outReceived(b"not here\n")
        self.reactor.spawned[0][0].processEnded(Failure(ProcessTerminated(exitCode=1)))
        failure = self.failureResultOf(d, RpcFailure)
        self.assertEqual(str(failure.value), "Hooks of master-ip-turnup failed: master-ip-turnup-pre.d/a: not here")
        self.assertEqual(self.done, [])
