"""The node RPC contract: declarations, typed calls, and noded's dispatch from them."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from typing import Any

import pytest
from treq.testing import StubTreq
from twisted.internet import defer
from twisted.internet.task import Clock

from ganeti import serializer
from ganeti.noded import dispatch
from ganeti.noded.procedures import NodeProcedures
from ganeti.noded.server import NodeRpcResource
from ganeti.rpc import procedures, wire
from ganeti.rpc.contract import Call, ContractError, Runner, Table


def _node(root: Any) -> NodeProcedures:
    root.ensure_dirs()
    return NodeProcedures(root, Clock())


def _post(procs: NodeProcedures, name: str, args: list[Any]) -> tuple[int, Any]:
    stub = StubTreq(NodeRpcResource(procs))
    d = stub.request("POST", "https://node/" + name, data=wire.encode_request(args))
    stub.flush()
    out: list[Any] = []
    d.addCallback(lambda r: r.content().addCallback(lambda body: (r.code, serializer.loads(body))))
    d.addBoth(out.append)
    stub.flush()
    return out[0]


# --- the table and noded's handlers --------------------------------------------------------


def test_every_handler_is_declared_and_every_declaration_has_a_handler(root):
    procs = _node(root)
    handlers: dict[str, Any] = {}
    for target in (procs, procs.instances, procs.impexp, procs.hotplug, procs.diskconvert, procs.master, procs.election,
                   procs.oob, procs.hooks,
                   procs.crypto, procs.commands, procs.checks, procs.restricted):
        for name, function in dispatch.handlers_of(target).items():
            assert name not in handlers, "two handlers for %s" % name
            handlers[name] = function
    assert sorted(handlers) == sorted(procedures.TABLE.names())
    assert len(handlers) >= 75
    for declared in procedures.TABLE:
        assert procs.lookup(declared.name) == handlers[declared.name]


def test_each_handler_takes_the_declared_arguments_in_wire_order(root):
    """Names in order, and every call the declaration allows binds to the handler."""
    procs = _node(root)
    for declared in procedures.TABLE:
        handler = procs.lookup(declared.name)
        parameters = list(inspect.signature(handler).parameters.values())
        assert [p.name for p in parameters] == [a.name for a in declared.arguments], declared.name
        for count in range(declared.required, len(declared.arguments) + 1):
            inspect.signature(handler).bind(*range(count))
        assert declared.doc, "%s has no doc line" % declared.name
        assert declared.timeout in (procedures.TMO_URGENT, procedures.TMO_FAST, procedures.TMO_NORMAL,
                                    procedures.TMO_SLOW, procedures.TMO_1DAY)


def test_dispatch_refuses_an_undeclared_handler_and_a_declaration_without_handler():
    table = Table()

    @table.declare(procedures.TMO_URGENT)
    def ping() -> str:
        """Answer."""
        return ""

    @table.declare(procedures.TMO_URGENT)
    def pong() -> str:
        """Answer too."""
        return ""

    class Half:
        @dispatch.handler
        def ping(self) -> str:
            return "ping"

    class Extra(Half):
        @dispatch.handler
        def pong(self) -> str:
            return "pong"

        @dispatch.handler
        def surprise(self) -> None:
            return None

    with pytest.raises(ContractError, match="without handler pong"):
        dispatch.Dispatch([Half()], table)
    with pytest.raises(ContractError, match="undeclared surprise"):
        dispatch.Dispatch([Extra()], table)
    with pytest.raises(ContractError, match="ping has two handlers"):
        dispatch.Dispatch([Half(), Half()], table)

    def ping_again() -> str:
        """Answer again."""
        return ""

    ping_again.__name__ = "ping"
    with pytest.raises(ContractError, match="procedure ping declared twice"):
        table.declare(procedures.TMO_URGENT)(ping_again)


def test_a_procedure_added_is_one_declaration_and_one_handler():
    table = Table()

    @table.declare(procedures.TMO_FAST)
    def vote_cast(term: int, candidate: str, reason: str | None = None) -> bool:
        """Cast this node's vote for C{candidate} in C{term}."""
        return True

    class Node:
        @dispatch.handler
        def vote_cast(self, term: int, candidate: str, reason: str | None = None) -> bool:
            return term > 0 and bool(candidate)

    entry = dispatch.Dispatch([Node()], table).get("vote_cast")
    assert entry is not None and entry.function(3, "node2") is True
    call = vote_cast.call(3, candidate="node2")
    assert call == Call("vote_cast", (3, "node2"), procedures.TMO_FAST)
    assert vote_cast.doc == "Cast this node's vote for C{candidate} in C{term}."


# --- calls ------------------------------------------------------------------------------------


def test_a_call_gives_the_positional_list_and_the_timeout_class():
    disk = {"dev_type": "file", "logical_id": ["loop", "/srv/ganeti/file-storage/i/disk0"], "size": 128}
    call = procedures.blockdev_create.call(disk, 128, "inst1.test", True, "originstname+inst1.test", False)
    assert call.procedure == "blockdev_create"
    assert list(call.args) == [disk, 128, "inst1.test", True, "originstname+inst1.test", False]
    assert call.timeout == procedures.TMO_NORMAL == wire.TMO_NORMAL
    assert call.within(42).timeout == 42 and call.within(42).args == call.args


def test_optional_arguments_left_out_stay_off_the_wire_unless_a_later_one_is_given():
    assert procedures.impexp_status.call(["t1"]).args == (["t1"],)
    assert procedures.impexp_status.call(["t1"], 5).args == (["t1"], 5)
    assert procedures.instance_start.call({"name": "i"}).args == ({"name": "i"},)
    # reason given, startup_paused left out: it is sent as its default
    assert procedures.instance_start.call({"name": "i"}, reason=[]).args == ({"name": "i"}, False, [])


@pytest.mark.parametrize("make, message", [
    (lambda: procedures.blockdev_create.call({}, "10"), r"blockdev_create: argument 2 \(size\) must be an integer"),
    (lambda: procedures.instance_migrate.call("c", [], "1.2.3.4"), r"instance_migrate: argument 2 \(inst\) must be a dict"),
    (lambda: procedures.epoch_claim.call(True, "node1"), r"epoch_claim: argument 1 \(epoch\) must be an integer"),
    (lambda: procedures.version.call(1), r"Bad arguments for version"),  # type: ignore[call-arg]
    (lambda: procedures.epoch_claim.call(3), r"Bad arguments for epoch_claim.*holder"),  # type: ignore[call-arg]
    (lambda: procedures.export_info.call(name="x", other=1), r"Bad arguments for export_info"),  # type: ignore[call-arg]
])
def test_a_wrong_call_fails_where_it_is_built(make, message):
    with pytest.raises(ContractError, match=message):
        make()


def test_flags_take_json_booleans_and_ganetis_0_and_1():
    assert procedures.node_leave_cluster.call(1).args == (1,)
    assert procedures.node_leave_cluster.call(None).args == (None,)
    with pytest.raises(ContractError, match="must be a boolean or null"):
        procedures.node_leave_cluster.call(2)


def test_untyped_calls_are_checked_against_the_table():
    assert procedures.untyped("test_delay", [1.5]) == Call("test_delay", (1.5,), procedures.TMO_URGENT)
    with pytest.raises(ContractError, match="Unknown procedure 'no_such'"):
        procedures.untyped("no_such", [])
    with pytest.raises(ContractError, match="argument 1 \\(duration\\) must be a number"):
        procedures.untyped("test_delay", ["soon"])


class _Recorder(Runner):
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def call(self, nodes: Any, procedure: str, args: list[Any], **kwargs: Any) -> Any:
        self.calls.append((dict(nodes), procedure, args, kwargs))
        return defer.succeed({name: (procedure, args) for name in dict(nodes)})


def test_a_runner_sends_the_declared_call_by_name():
    rpc = _Recorder()
    call = procedures.blockdev_getdimensions.call([]).within(7)
    got = []
    defer.ensureDeferred(rpc.run({"a": "1.1.1.1", "b": "1.1.1.2"}, call,
                                 per_node={"b": procedures.blockdev_getdimensions.call([{"size": 1}])},
                                 offline=["a"])).addCallback(got.append)
    defer.ensureDeferred(rpc.run_one("c", "1.1.1.3", procedures.version.call())).addCallback(got.append)
    assert rpc.calls == [
        ({"a": "1.1.1.1", "b": "1.1.1.2"}, "blockdev_getdimensions", [[]],
         {"timeout": 7, "node_args": {"b": [[{"size": 1}]]}, "offline": ["a"]}),
        ({"c": "1.1.1.3"}, "version", [], {"timeout": procedures.TMO_URGENT}),
    ]
    assert got[1] == ("version", [])
    failed: list[Any] = []
    defer.ensureDeferred(rpc.run({"a": "x"}, procedures.version.call(),
                                 per_node={"a": procedures.master_node_name.call()})).addErrback(failed.append)
    assert failed[0].check(ContractError) and "per-node calls must be of procedure version" in str(failed[0].value)
    assert len(rpc.calls) == 2


# --- noded refuses what does not fit, before the handler -------------------------------------


def test_noded_refuses_a_wrong_count_with_400_naming_the_procedure_and_its_arguments(root):
    procs = _node(root)
    code, (ok, message) = _post(procs, "epoch_claim", [5])
    assert (code, ok) == (400, False)
    assert message == "Bad arguments for epoch_claim: it takes 2 arguments (epoch, holder), not 1"
    code, (ok, message) = _post(procs, "instance_start", [])
    assert (code, ok) == (400, False) and "it takes 1 to 3 arguments (inst, startup_paused, reason)" in message


def test_noded_refuses_a_wrong_type_before_the_handler_runs(root):
    procs = _node(root)
    ran = []
    original = procs.lookup("jobqueue_update")

    def spy(*args: Any) -> Any:
        ran.append(args)
        return original(*args)

    entry = procs.dispatch.get("jobqueue_update")
    object.__setattr__(entry, "function", spy)
    code, (ok, message) = _post(procs, "jobqueue_update", [7, wire.compress(b"{}")])
    assert (code, ok) == (200, False)
    assert message == "Bad arguments for jobqueue_update: argument 1 (file_name) must be a string, not 7"
    assert ran == [] and not os.listdir(root.queue_dir)
    code, (ok, _) = _post(procs, "jobqueue_update", ["/var/lib/ganeti/queue/job-1", wire.compress(b"{}")])
    assert (code, ok) == (200, True) and len(ran) == 1


def test_naming_procedures_does_not_load_the_http_client():
    """Daemons that only name procedures (LuxiD, WConfD) stay lean."""
    code = ("import sys; import ganeti.rpc.procedures, ganeti.rpc.wire; "
            "assert 'ganeti.rpc.client' not in sys.modules and 'twisted.web.client' not in sys.modules; "
            "from ganeti.rpc import RpcClient; assert RpcClient.run")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_handler_marked_with_its_procedure_is_dispatched_and_must_bear_its_name():
    table = Table()

    @table.declare(procedures.TMO_FAST)
    def vote_cast(term: int, candidate: str, reason: str | None = None) -> bool:
        """Cast this node's vote for C{candidate} in C{term}."""
        return True

    declared = vote_cast  # a class body that defines vote_cast does not see this function's vote_cast

    class Node:
        @dispatch.handler(declared)
        def vote_cast(self, term: int, candidate: str, reason: str | None = None) -> bool:
            return term > 0 and bool(candidate)

    entry = dispatch.Dispatch([Node()], table).get("vote_cast")
    assert entry is not None and entry.function(3, "node2") is True
    with pytest.raises(ContractError, match="handler cast_vote marked as the handler of procedure vote_cast"):

        class Misnamed:
            @dispatch.handler(declared)
            def cast_vote(self, term: int, candidate: str, reason: str | None = None) -> bool:
                return True
