"""The LUXI contract (issue 22): every method declared once in
L{ganeti.luxi.methods}, LuxiD's handlers paired with the declarations,
arguments refused before a handler runs, clients built from the table."""

from __future__ import annotations

import os
import subprocess
import sys
import typing
from typing import Any, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from ganeti import contract, errors
from ganeti.luxi import jobwait, methods, wire
from ganeti.luxi.client import LuxiClient
from ganeti.luxi.server import DeclaredHandler
from ganeti.luxid.handler import LuxiHandler
from ganeti.luxid.live import LiveData
from ganeti.luxid.service import LuxidService
from tests.unit.queue_helpers import open_queue, temp_root

#: the methods the brief names, and those LuxiD served before the table
EXPECTED = {
    "SubmitJob", "SubmitJobToDrainedQueue", "SubmitManyJobs", "WaitForJobChange", "CancelJob", "ArchiveJob",
    "AutoArchiveJobs", "ChangeJobPriority", "Query", "QueryFields", "QueryJobs", "QueryInstances", "QueryNodes",
    "QueryGroups", "QueryNetworks", "QueryExports", "QueryClusterInfo", "QueryConfigValues", "QueryTags",
    "SetDrainFlag", "SetWatcherPause", "PickupJob", "QueryFilters", "ReplaceFilter", "DeleteFilter",
}


class _Service:
    liveness = watcher = None


def _handler(tmp_path: Any) -> LuxiHandler:
    return LuxiHandler(_Service(), None, LiveData(lambda: None))


# --- the table ------------------------------------------------------------------------------


def test_the_table_declares_every_method_with_a_doc_and_json_types():
    assert set(methods.TABLE.names()) == EXPECTED
    for declared in methods.TABLE:
        assert declared.doc, declared.name
        for argument in declared.arguments:
            contract.fits(argument.kind, None, contract.STRICT)  # a JSON type the checker knows
        assert declared.arguments == tuple(declared.arguments)


def test_luxid_has_exactly_one_handler_per_declaration_taking_the_declared_arguments(tmp_path):
    handler = _handler(tmp_path)
    for declared in methods.TABLE:
        function = getattr(handler, "luxi_" + declared.name)
        contract.check_signature(declared, function)
        hints = typing.get_type_hints(function)
        assert [hints.get(a.name) for a in declared.arguments] == [a.kind for a in declared.arguments], declared.name
    undeclared = [n for n in dir(handler) if n.startswith("luxi_") and n[5:] not in methods.TABLE]
    assert undeclared == []


def test_a_handler_missing_or_undeclared_or_misshapen_refuses_to_start():
    table = methods.Table()

    @table.declare
    def Ping(value: int) -> int:
        """Answer C{value}."""
        return value

    @table.declare
    def Pong() -> None:
        """Nothing."""

    class Half(DeclaredHandler):
        def luxi_Ping(self, value: int) -> int:
            return value

    class Extra(Half):
        def luxi_Pong(self) -> None:
            return None

        def luxi_Surprise(self) -> None:
            return None

    class Misshapen(Half):
        def luxi_Pong(self, extra: int) -> None:
            return None

    class Whole(Half):
        def luxi_Pong(self) -> None:
            return None

    with pytest.raises(contract.ContractError, match="without handler Pong"):
        Half(table)
    with pytest.raises(contract.ContractError, match="undeclared Surprise"):
        Extra(table)
    with pytest.raises(contract.ContractError, match="the handler of Pong takes \\(extra\\), not the declared \\(\\)"):
        Misshapen(table)
    with pytest.raises(contract.ContractError, match="method Ping declared twice"):
        table.declare(Ping._stub)
    assert Whole(table).handle("Ping", [3]) == 3


def test_luxid_refuses_to_start_without_a_handler(tmp_path, monkeypatch):
    monkeypatch.delattr(LuxiHandler, "luxi_QueryTags")
    with pytest.raises(contract.ContractError, match="without handler QueryTags"):
        _handler(tmp_path)


# --- checks before the handler ------------------------------------------------------------


class Spy(LuxiHandler):
    """LuxiD's handler whose methods only record that they ran."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.ran: list[str] = []
        for name, (declared, _function) in list(self._entries.items()):
            self._entries[name] = (declared, lambda *a, _n=name: self.ran.append(_n))


def _spy() -> Spy:
    return Spy(_Service(), None, LiveData(lambda: None))


def test_wrong_count_is_a_luxi_error_and_the_handler_does_not_run():
    spy = _spy()
    with pytest.raises(errors.LuxiError) as caught:
        spy.handle("QueryTags", ["cluster"])
    assert str(caught.value) == "Wrong number of arguments for QueryTags: expected 2, got 1"
    with pytest.raises(errors.LuxiError, match="Wrong number of arguments for CancelJob: expected 1 to 2, got 3"):
        spy.handle("CancelJob", [1, False, 3])
    with pytest.raises(errors.LuxiError, match="Wrong number of arguments for Query: expected 3, got 2"):
        spy.handle("Query", ["node", ["name"]])
    with pytest.raises(errors.LuxiError, match="Unknown method 'Nope'"):
        spy.handle("Nope", [])
    with pytest.raises(errors.LuxiError, match="Unknown method '__init__'"):
        spy.handle("__init__", [])
    assert spy.ran == []
    spy.handle("CancelJob", [1])
    spy.handle("SetWatcherPause", [])
    assert spy.ran == ["CancelJob", "SetWatcherPause"]


def test_wrong_type_is_a_wrong_input_error_naming_the_argument():
    spy = _spy()
    cases = [
        ("SetDrainFlag", ["false"], "SetDrainFlag: flag must be a boolean, not 'false' (argument 1)"),
        ("SetDrainFlag", [1], "SetDrainFlag: flag must be a boolean, not 1 (argument 1)"),
        ("QueryNodes", [[], ["name"], 0], "QueryNodes: use_locking must be a boolean, not 0 (argument 3)"),
        ("QueryJobs", [[1, 2.5], ["id"]], "QueryJobs: job_ids must be a list of integers or strings or null"),
        ("SubmitJob", [[{"OP_ID": "OP_TEST_DELAY"}, "op"]], "SubmitJob: ops must be a list of dicts"),
        ("SubmitManyJobs", [[[{}], {}]], "SubmitManyJobs: jobs must be a list of lists of dicts"),
        ("Query", ["node", "name", None], "Query: fields must be a list of strings, not 'name' (argument 2)"),
        ("ChangeJobPriority", [1, False], "ChangeJobPriority: priority must be an integer, not False"),
        ("SetWatcherPause", [True], "SetWatcherPause: until must be a number or null, not True"),
        ("WaitForJobChange", [1, ["status"], None, None, "10"], "WaitForJobChange: timeout must be a number"),
    ]
    for method, args, message in cases:
        with pytest.raises(errors.OpPrereqError) as caught:
            spy.handle(method, args)
        assert caught.value.args[0].startswith(message), caught.value.args[0]
        assert caught.value.args[1] == errors.ECODE_INVAL
    assert spy.ran == []
    for method, args in [("QueryJobs", [["7", 8], ["id"]]), ("QueryJobs", [None, ["id"]]),
                         ("SetWatcherPause", [12]), ("Query", ["node", ["name"], ["=", "name", "x"]]),
                         ("WaitForJobChange", ["3", ["status"], [None], 4, 1.5])]:
        spy.handle(method, args)
    assert len(spy.ran) == 5


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=10,
)


@st.composite
def _bad_request(draw: Any) -> tuple[str, list[Any]]:
    """A request to a declared method whose arguments do not fit: a wrong
    count, or one argument of another type."""
    declared = draw(st.sampled_from(list(methods.TABLE)))
    count = len(declared.arguments)
    if count == 0 or draw(st.booleans()):
        wrong = draw(st.integers(0, count + 3).filter(lambda n: not declared.required <= n <= count))
        return declared.name, draw(st.lists(_JSON, min_size=wrong, max_size=wrong))
    args = [_good_value(a.kind) for a in declared.arguments]
    index = draw(st.integers(0, count - 1))
    argument = declared.arguments[index]
    args[index] = draw(_JSON.filter(lambda v: not argument.accepts(v, contract.STRICT)))
    return declared.name, args


def _good_value(kind: Any) -> Any:
    for value in (None, True, 1, "1", [], {}):
        if contract.fits(kind, value, contract.STRICT):
            return value
    raise AssertionError(kind)


class _Cleanups:
    """Enough of a test case for the queue helpers: cleanups run at the fixture's end."""

    def __init__(self) -> None:
        self.cleanups: list[tuple[Any, tuple[Any, ...]]] = []

    def addCleanup(self, function: Any, *args: Any) -> None:
        self.cleanups.append((function, args))


class _Luxid:
    """LuxiD's real handler over a real queue (one job in it), without a reactor."""

    def __init__(self, case: _Cleanups) -> None:
        self.paths = temp_root(case, "luxicontract")
        self.queue = open_queue(case, self.paths)
        self.service = LuxidService(self.paths, Clock(), self.queue)
        self.service.running = True  # accept submissions without starting processes
        self.handler = LuxiHandler(self.service, self.paths, LiveData.for_node(Clock(), self.paths))

    def state(self) -> Any:
        files = sorted(os.listdir(self.paths.queue_dir))
        pause = os.path.exists(os.path.join(self.paths.data_dir, "watcher.pause"))
        jobs = {i: (j.status, j.priority) for i, j in self.service.jobs.items()}
        return self.queue.serial(), files, jobs, self.queue.is_drained(), pause


@pytest.fixture(scope="module")
def luxid():
    case = _Cleanups()
    server = _Luxid(case)
    submitted: list[Any] = []
    Deferred.fromCoroutine(server.handler.handle("SubmitJob", [[{"OP_ID": "OP_TEST_DELAY", "duration": 0}]])
                           ).addBoth(submitted.append)
    assert submitted == [1]
    yield server
    for function, args in reversed(case.cleanups):
        function(*args)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=_bad_request())
def test_bad_arguments_are_refused_with_an_error_and_change_nothing(luxid, request):
    """Any declared method, a wrong count or one argument of a wrong type: a
    LUXI error at once (no handler runs), no job, no queue change, no flag."""
    before = luxid.state()
    assert before[0] == 1, "the one job submitted"
    method, args = request
    with pytest.raises((errors.LuxiError, errors.OpPrereqError)) as caught:
        luxid.handler.handle(method, args)
    if isinstance(caught.value, errors.OpPrereqError):
        assert caught.value.args[1] == errors.ECODE_INVAL
        assert caught.value.args[0].startswith(method + ": ")
    else:
        assert str(caught.value).startswith("Wrong number of arguments for %s:" % method)
    assert wire.encode_error(caught.value)  # answered in the usual [ClassName, [args]] shape
    assert luxid.state() == before


# --- clients -------------------------------------------------------------------------------


def test_the_blocking_client_offers_every_method_under_its_snake_case_name():
    offered = {v.method.name: k for k, v in vars(LuxiClient).items() if isinstance(v, methods.Blocking)}
    assert set(offered) == set(methods.TABLE.names())
    for name, attribute in offered.items():
        snake = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
        assert attribute == snake


class _Recorder(LuxiClient):
    def __init__(self) -> None:
        super().__init__("/nonexistent")
        self.sent: list[tuple[str, tuple[Any, ...]]] = []

    def call(self, method: str, *args: Any) -> Any:
        self.sent.append((method, args))
        return None


def test_clients_send_every_argument_defaults_filled_in():
    client = _Recorder()
    client.cancel_job(5)
    client.query("node", ["name"])
    client.query_fields("node")
    client.query_nodes([], ["name"])
    client.query_exports(["n1"])
    client.set_watcher_pause(None)
    client.run(methods.SetDrainFlag.call(flag=True))
    assert client.sent == [
        ("CancelJob", (5, False)), ("Query", ("node", ["name"], None)), ("QueryFields", ("node", None)),
        ("QueryNodes", ([], ["name"], False)), ("QueryExports", (["n1"], False)), ("SetWatcherPause", (None,)),
        ("SetDrainFlag", (True,)),
    ]
    with pytest.raises(errors.LuxiError, match="Bad arguments for QueryTags: missing name"):
        client.query_tags("cluster")
    with pytest.raises(errors.LuxiError, match="too many"):
        client.set_drain_flag(True, False)


def test_jobwait_follows_with_declared_requests():
    steps = jobwait.follow(7, 10)
    first = next(steps)
    assert first == methods.WaitForJobChange.call(7, ["status"], None, None, 10)
    assert isinstance(first, methods.Request)
    last = steps.send([["success"], []])
    assert last == methods.QueryJobs.call([7], list(jobwait.RESULT_FIELDS))


def test_sequences_read_as_json_arrays():
    kind: Any = Sequence[int]
    assert contract.fits(kind, [1, 2], contract.STRICT)
    assert not contract.fits(kind, "12", contract.STRICT)
    assert not contract.fits(kind, [True], contract.STRICT)
    assert contract.type_name(kind) == "a list of integers"


def test_importing_the_client_reads_no_stub():
    """The declarations are read on first use: a gnt-* command pays for the one it calls."""
    code = ("import ganeti.luxi.client, ganeti.luxi.methods as m; "
            "print(sum(1 for d in m.TABLE if d._parsed is not None))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0"
