"""HA parameters ranked as configs are: by the epoch of the master that made
the change, then by serial (issue 23).  Where candidates hold differing
C{ha.data}, the newest wins: on a node sent a copy, in the keeper of a
master that learns of a newer one, and in a take-over, which fetches the
newest copy from the candidates before the new master starts."""

from __future__ import annotations

from ganeti import serializer
from ganeti.ha import epoch
from ganeti.ha import params as ha_params
from ganeti.ha.failover import NodeState, newest_state
from ganeti.ha.params import HaParams
from ganeti.paths import Paths
from ganeti.rpc import wire
from tests.unit.test_failover import call, inline_threads  # noqa: F401  (a fixture)
from tests.unit.test_ha_takeover import run, view  # noqa: F401  (fixture)


def made(epoch_: int, serial: int, **values: object) -> HaParams:
    return HaParams(serial_no=serial, epoch=epoch_, **values)


def state(ha: tuple[int, int]) -> NodeState:
    return NodeState(2, 10, 5, {}, config_epoch=2, ha=ha)


def test_a_newer_epoch_wins_over_a_higher_serial_of_an_older_one(tmp_path):
    paths = Paths(str(tmp_path))
    ha_params.write(paths, made(2, 3, liveness_timeout=4.0))
    # a replaced master's change that nobody confirmed (epoch 1) does not replace its successor's
    assert not ha_params.accept(paths, made(1, 9, liveness_timeout=1.0))
    assert ha_params.read(paths).liveness_timeout == 4.0
    # within an epoch the higher serial wins; a newer epoch wins whatever its serial
    assert ha_params.accept(paths, made(2, 4, liveness_timeout=5.0))
    assert ha_params.accept(paths, made(3, 1, liveness_timeout=6.0))
    assert ha_params.read(paths) == made(3, 1, liveness_timeout=6.0)
    # a copy written before epochs were recorded counts as epoch 0
    assert HaParams.from_dict({"serial_no": 7}).rank() == (0, 7)


def test_the_take_over_plan_names_the_candidate_with_the_newest_copy():
    states = {"n2": state((1, 2)), "n1": state((1, 9)), "n3": state((2, 3))}
    assert newest_state("n2", states).ha_from == "n3"  # epoch 2 beats n1's higher serial of epoch 1
    states = {"n2": state((2, 3)), "n1": state((1, 9)), "n3": state((2, 3))}
    assert newest_state("n2", states).ha_from is None  # ours is as new as any
    states = {"n2": state((0, 0)), "n3": state((0, 4))}
    assert newest_state("n2", states).ha_from == "n3"  # a node with no file at all is behind everyone


def test_noded_reports_and_hands_out_its_copy(root, inline_threads):  # noqa: F811  (root: conftest)
    root.ensure_dirs()
    ha_params.write(root, made(2, 5, auto_failover=True))
    ok, status = call(root, "failover_status")
    assert ok and (status["ha_epoch"], status["ha_serial"]) == (2, 5)
    ok, files = call(root, "failover_read", ["ha.data"])
    assert ok and HaParams.from_dict(serializer.loads(wire.decompress(files["ha.data"]))) == made(
        2, 5, auto_failover=True)


def test_a_take_over_fetches_the_newest_copy_before_anything_else(monkeypatch, view):  # noqa: F811
    """n2 (this node) holds serial 2 of epoch 1, n3 serial 3 of epoch 2, the old master n1 serial 9 of epoch 1
    (never confirmed): n3's copy is fetched, whatever happens to the failover next."""
    ha_params.write(view.paths, made(1, 2))
    newest = made(2, 3, liveness_timeout=3.0, failover_timeout=15.0, auto_failover=True)
    status = {"epoch": 2, "config_serial": 10, "queue_serial": 5, "jobs": {}, "config_epoch": 2}
    answers = {"master_node_name": {name: "n1" for name in view.addresses},
               "failover_status": {"n1": dict(status, ha_epoch=1, ha_serial=9),
                                   "n2": dict(status, ha_epoch=1, ha_serial=2),
                                   "n3": dict(status, ha_epoch=2, ha_serial=3)},
               "failover_read": {"n3": {"ha.data": wire.compress(serializer.dumps(newest.to_dict()))}},
               "epoch_claim": {"n2": None}}  # no majority for the epoch: the failover stops there
    done, said, calls = run(monkeypatch, view, answers)
    assert done is False
    assert ha_params.read(view.paths) == newest
    assert ("step", "Fetched the newer HA parameters (serial 3, epoch 2) from n3") in said
    assert calls.index(("failover_read", None)) < calls.index(("epoch_claim", 3))


def test_the_fetch_waits_briefly_on_a_node(monkeypatch, view):  # noqa: F811
    """A candidate that answered its state, then froze, holds the take-over up for a bounded time only."""
    from tests.unit.test_ha_takeover import FakeRpc

    limits = []
    run_one = FakeRpc.run_one

    async def timed(self, name, address, call):
        limits.append((call.procedure, call.timeout))
        return await run_one(self, name, address, call)

    monkeypatch.setattr(FakeRpc, "run_one", timed)
    test_a_take_over_fetches_the_newest_copy_before_anything_else(monkeypatch, view)
    from ganeti.ha import takeover

    assert ("failover_read", takeover.FETCH_TIMEOUT) in limits


def test_a_change_is_made_under_the_masters_epoch(tmp_path):
    from twisted.internet.defer import ensureDeferred
    from twisted.internet.task import Clock

    from ganeti.ha.keeper import HaKeeper
    from tests.unit.wconfd_helpers import make_config

    paths = Paths(str(tmp_path))
    paths.ensure_dirs()
    epoch.write_epoch(paths, 4)
    ha_params.write(paths, made(1, 6))
    keeper = HaKeeper(paths, Clock(), lambda: make_config(nodes=1))
    results: list[object] = []
    ensureDeferred(keeper.change({"auto_failover": True})).addBoth(results.append)
    assert results == [made(4, 7, auto_failover=True, mtime=results[0].mtime)]
    assert ha_params.read(paths).rank() == (4, 7)
