"""ganeti.asyncutil and the LUs' resolve phase: a job's reactor never blocks
on a name lookup, a port probe or an external program."""

from __future__ import annotations

import signal
import socket
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.interfaces import IReactorProcess, IReactorThreads
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from ganeti import errors, opcodes
from ganeti.asyncutil import Network, ProgramTimeout
from ganeti.cmdlib import allocator, lookup
from ganeti.cmdlib.base import OpContext
from ganeti.jobs import model
from ganeti.jobs.processor import CANCELED_RESULT
from ganeti.opcodes import typed
from tests.unit.test_processor import Env, delay
from tests.unit.wconfd_helpers import make_config


class FakeNet:
    """Every lookup waits until the test answers it."""

    def __init__(self) -> None:
        self.lookups: list[tuple[str, Deferred[Any]]] = []

    def resolve(self, name: str) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        self.lookups.append((name, d))
        return d

    def port_open(self, address: str, port: int, timeout: float) -> Deferred[bool]:
        return succeed(False)


def node_add(name: str = "node9.test") -> dict[str, Any]:
    return {"OP_ID": "OP_NODE_ADD", "node_name": name}


class ResolvePhaseTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.env = Env()
        self.net = FakeNet()

    def test_a_cancel_is_answered_while_a_lookup_is_pending(self) -> None:
        run = self.env.start(1, [node_add()], net=self.net)
        self.assertEqual([name for name, _ in self.net.lookups], ["node9.test"])
        (op,) = run.ops
        self.assertEqual(op.status, model.WAITING)
        self.assertFalse(run.done.called)
        self.assertTrue(run.processor.request_cancel())
        self.env.settle()
        self.successResultOf(run.done)
        self.assertEqual((op.status, op.result), (model.CANCELED, CANCELED_RESULT))
        self.assertTrue(self.net.lookups[0][1].called)  # the lookup was given up
        self.assertEqual(self.env.locks_of(run.owner), [])
        self.assertEqual(self.env.pending(), [])

    def test_other_work_gets_its_locks_while_a_lookup_is_pending(self) -> None:
        waiting = self.env.start(1, [node_add()], net=self.net)
        other = self.env.start(2, [delay(1, no_locks=False)])
        self.assertNotEqual(self.env.locks_of(other.owner), [])
        self.env.finish(other)
        self.assertEqual(other.job.status, model.SUCCESS)
        self.assertEqual(waiting.ops[0].status, model.WAITING)
        self.assertEqual(self.env.locks_of(waiting.owner), [])

    def test_a_failed_lookup_is_a_resolver_error(self) -> None:
        run = self.env.start(1, [node_add()], net=self.net)
        self.net.lookups[0][1].errback(socket.gaierror(-2, "Name or service not known"))
        self.env.settle()
        self.successResultOf(run.done)
        (op,) = run.ops
        self.assertEqual(op.status, model.ERROR)
        self.assertIn("Cannot resolve node name 'node9.test'", str(op.result))
        self.assertIn(errors.ECODE_RESOLVER, str(op.result))

    def test_node_add_takes_the_resolved_address(self) -> None:
        op = opcodes.validate(node_add())
        lu = lookup("OP_NODE_ADD")(typed.from_dict(op), OpContext(None, None, Clock(), net=self.net), make_config())
        lu.check_arguments()
        d = ensureDeferred(lu.resolve())
        self.net.lookups[0][1].callback(("node9.test", [], ["192.0.2.9", "192.0.2.10"]))
        self.successResultOf(d)
        self.assertEqual((lu.op.primary_ip, lu.op.secondary_ip), ("192.0.2.9", "192.0.2.9"))

    def test_instance_create_name_and_ip_checks(self) -> None:
        op = opcodes.validate({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web", "mode": "create",
                               "disk_template": "diskless", "disks": [], "nics": [], "os_type": "noop",
                               "name_check": True, "ip_check": True})
        answers = {"192.0.2.7": True}

        class Net(FakeNet):
            def port_open(self, address: str, port: int, timeout: float) -> Deferred[bool]:
                return succeed(answers.get(address, False))
        net = Net()
        lu = lookup("OP_INSTANCE_CREATE")(typed.from_dict(op), OpContext(None, None, Clock(), net=net), make_config())
        lu.check_arguments()
        d = ensureDeferred(lu.resolve())
        net.lookups[0][1].callback(("web.example.test", [], ["192.0.2.7"]))
        failure = self.failureResultOf(d, errors.OpPrereqError)
        self.assertIn("IP 192.0.2.7 of instance web.example.test already in use", str(failure.value))
        answers.clear()
        opcode = typed.from_dict(opcodes.validate(dict(op)))
        lu = lookup("OP_INSTANCE_CREATE")(opcode, OpContext(None, None, Clock(), net=net),
                                          make_config())
        lu.check_arguments()
        d = ensureDeferred(lu.resolve())
        net.lookups[1][1].callback(("web.example.test", [], ["192.0.2.7"]))
        self.successResultOf(d)
        self.assertEqual(lu.op.instance_name, "web.example.test")


    def test_instance_rename_takes_the_canonical_new_name(self) -> None:
        op = opcodes.validate({"OP_ID": "OP_INSTANCE_RENAME", "instance_name": "inst1.example.test",
                               "new_name": "web2", "name_check": True, "ip_check": True})
        opcode = typed.from_dict(op)
        lu = lookup("OP_INSTANCE_RENAME")(opcode, OpContext(None, None, Clock(), net=self.net), make_config())
        lu.check_arguments()
        d = ensureDeferred(lu.resolve())
        self.assertEqual([name for name, _ in self.net.lookups], ["web2"])
        self.assertNoResult(d)
        self.net.lookups[0][1].callback(("web2.example.test", [], ["192.0.2.8"]))
        self.successResultOf(d)
        self.assertEqual(lu.op.new_name, "web2.example.test")

    def test_instance_rename_refuses_a_name_resolving_to_another_one(self) -> None:
        """Rename checks the resolved name as create does (Ganeti's CheckHostnameSane in both)."""
        op = opcodes.validate({"OP_ID": "OP_INSTANCE_RENAME", "instance_name": "inst1.example.test",
                               "new_name": "web2", "name_check": True, "ip_check": False})
        opcode = typed.from_dict(op)
        lu = lookup("OP_INSTANCE_RENAME")(opcode, OpContext(None, None, Clock(), net=self.net), make_config())
        lu.check_arguments()
        d = ensureDeferred(lu.resolve())
        self.net.lookups[0][1].callback(("db.example.test", [], ["192.0.2.8"]))
        failure = self.failureResultOf(d, errors.OpPrereqError)
        self.assertIn("Resolved hostname 'db.example.test' does not look like 'web2'", str(failure.value))
        self.assertEqual(failure.value.args[1], errors.ECODE_INVAL)
        self.assertEqual(lu.op.new_name, "web2")

    def test_instance_rename_ip_check_refuses_an_address_in_use(self) -> None:
        class Net(FakeNet):
            def port_open(self, address: str, port: int, timeout: float) -> Deferred[bool]:
                return succeed(address == "192.0.2.8")

        net = Net()
        op = opcodes.validate({"OP_ID": "OP_INSTANCE_RENAME", "instance_name": "inst1.example.test",
                               "new_name": "web2", "name_check": True, "ip_check": True})
        lu = lookup("OP_INSTANCE_RENAME")(typed.from_dict(op), OpContext(None, None, Clock(), net=net), make_config())
        lu.check_arguments()
        d = ensureDeferred(lu.resolve())
        net.lookups[0][1].callback(("web2.example.test", [], ["192.0.2.8"]))
        failure = self.failureResultOf(d, errors.OpPrereqError)
        self.assertIn("IP 192.0.2.8 of instance web2.example.test already in use", str(failure.value))
        self.assertEqual(failure.value.args[1], errors.ECODE_NOTUNIQUE)


class ThreadPool:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, Any, tuple[Any, ...]]] = []

    def callInThreadWithCallback(self, on_result: Any, function: Any, *args: Any) -> None:
        self.calls.append((on_result, function, args))


@implementer(IReactorThreads)
class ThreadedClock(Clock):
    def __init__(self) -> None:
        super().__init__()
        self.pool = ThreadPool()

    def getThreadPool(self) -> ThreadPool:  # type: ignore[override]
        return self.pool

    def callFromThread(self, function: Any, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        function(*args, **kwargs)


class Transport:
    def __init__(self) -> None:
        self.signals: list[int] = []
        self.stdin_closed = False

    def closeStdin(self) -> None:
        self.stdin_closed = True

    def signalProcess(self, sig: int) -> None:
        self.signals.append(sig)


@implementer(IReactorProcess)
class ProcessClock(Clock):
    def __init__(self) -> None:
        super().__init__()
        self.spawned: list[tuple[Any, str, list[str], Transport]] = []

    def spawnProcess(self, protocol: Any, executable: str, args: list[str], env: Any = None, **kw: Any) -> Transport:  # type: ignore[override]
        transport = Transport()
        protocol.makeConnection(transport)
        self.spawned.append((protocol, executable, args, transport))
        return transport


class NetworkTests(SynchronousTestCase):
    def test_resolve_runs_in_the_thread_pool(self) -> None:
        reactor = ThreadedClock()
        d = Network(reactor).resolve("vm1.example.test")
        ((on_result, function, args),) = reactor.pool.calls
        self.assertIs(function, socket.gethostbyname_ex)
        self.assertEqual(args, ("vm1.example.test",))
        self.assertNoResult(d)
        on_result(True, ("vm1.example.test", [], ["192.0.2.1"]))
        self.assertEqual(self.successResultOf(d), ("vm1.example.test", [], ["192.0.2.1"]))

    def test_port_open(self) -> None:
        reactor = MemoryReactorClock()
        net = Network(reactor)
        refused = net.port_open("192.0.2.5", 1811, 1.5)
        host, port, factory, timeout, _bind = reactor.tcpClients[0]
        self.assertEqual((host, port, timeout), ("192.0.2.5", 1811, 1.5))
        self.assertNoResult(refused)
        factory.clientConnectionFailed(None, Failure(ConnectionRefusedError()))
        self.assertFalse(self.successResultOf(refused))
        answered = net.port_open("192.0.2.6", 1811, 1.5)
        reactor.tcpClients[1][2].buildProtocol(None)
        self.assertTrue(self.successResultOf(answered))

    def test_run_collects_output_and_exit_code(self) -> None:
        reactor = ProcessClock()
        d = Network(reactor).run("/bin/alloc", ["in.json", "--x"], 10.0, env={})
        protocol, executable, args, transport = reactor.spawned[0]
        self.assertEqual((executable, args, transport.stdin_closed), ("/bin/alloc", ["/bin/alloc", "in.json", "--x"],
                                                                       True))
        protocol.childDataReceived(1, b"out")
        protocol.childDataReceived(2, b"err")
        self.assertNoResult(d)
        protocol.processEnded(Failure(ProcessTerminated(exitCode=3)))
        self.assertEqual(self.successResultOf(d), (b"out", b"err", 3))
        self.assertEqual(reactor.getDelayedCalls(), [])

    def test_run_kills_a_program_after_its_timeout(self) -> None:
        reactor = ProcessClock()
        d = Network(reactor).run("/bin/alloc", [], 10.0, env={})
        protocol, _executable, _args, transport = reactor.spawned[0]
        reactor.advance(9.9)
        self.assertEqual(transport.signals, [])
        reactor.advance(0.1)
        self.assertEqual(transport.signals, [signal.SIGKILL])
        protocol.processEnded(Failure(ProcessTerminated(signal=signal.SIGKILL)))
        self.failureResultOf(d, ProgramTimeout)

    def test_allocator_runs_on_the_reactor(self) -> None:
        reactor = ProcessClock()
        d = ensureDeferred(allocator.run_raw("fake", "/bin/alloc", {}, reactor))
        protocol, executable, args, _transport = reactor.spawned[0]
        self.assertEqual(executable, "/bin/alloc")
        protocol.childDataReceived(1, b'{"success": true, "info": "", "result": ["node1"]}')
        protocol.processEnded(Failure(ProcessDone(0)))
        self.assertEqual(self.successResultOf(d), ["node1"])
