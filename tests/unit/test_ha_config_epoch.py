"""Configs ranked by (epoch of the master that wrote them, serial): a replaced
master's unconfirmed changes never win over the changes its successor confirmed.

The story of every test: a 3-node cluster, n1 master of epoch 1, every node
at config serial 10.  n1 is paused (or killed) after it wrote serials 11 and
12 to its own config only (never confirmed by a majority).  n2 is elected for
epoch 2, takes over at serial 11 (its own config, 10, plus the change naming
it master) and confirms a tag at serial 12 with n3: n2 and n3 hold (2, 12).
n2 is then killed; n1 comes back before n2 pushed it the new config.
"""

from __future__ import annotations

from ganeti.ha.election import PROCEED, WAIT, NodeView, decide, rank, refusal
from ganeti.ha.failover import NodeState, newest_state

TIMEOUT = 10.0


def view(name: str, config_epoch: int, config_serial: int, queue: int = 5, *, epoch: int = 2) -> NodeView:
    # after n2's death every node has lost the master n2 for the timeout
    return NodeView(name, 20.0, "n2", True, epoch, config_serial, queue, config_epoch=config_epoch)


def state(config_epoch: int, config_serial: int, queue: int = 5, epoch: int = 2) -> NodeState:
    return NodeState(epoch, config_serial, queue, {}, config_epoch=config_epoch)


def test_an_old_masters_higher_serial_loses_the_election_to_the_newer_epochs_config():
    # n1 wrote 11..13 alone at epoch 1; n3 holds n2's confirmed 12 at epoch 2
    views = {"n1": view("n1", 1, 13, epoch=1), "n3": view("n3", 2, 12)}
    assert decide("n1", views, 3, TIMEOUT).action == WAIT
    assert decide("n3", views, 3, TIMEOUT).action == PROCEED
    assert sorted(views.values(), key=rank)[0].name == "n3"


def test_an_old_masters_equal_serial_does_not_win_by_name():
    # the same serial number, different content: the newer epoch's goes first, whatever the names
    views = {"n1": view("n1", 1, 12, epoch=1), "n3": view("n3", 2, 12)}
    assert decide("n1", views, 3, TIMEOUT).action == WAIT
    assert decide("n3", views, 3, TIMEOUT).action == PROCEED


def test_a_voter_holding_the_newer_epochs_config_refuses_the_old_master():
    n3 = view("n3", 2, 12)
    why = refusal(n3, "n1", 13, 5, TIMEOUT, config_epoch=1)
    assert why is not None and "n1" in why


def test_the_old_master_votes_for_the_newer_epochs_config_even_with_a_higher_job_serial():
    # n1 allocated job ids alone too: it must not hold the election up (the take-over fetches the
    # highest queue serial anyway)
    n1 = view("n1", 1, 13, queue=9, epoch=1)
    assert refusal(n1, "n3", 12, 5, TIMEOUT, config_epoch=2) is None


def test_the_take_over_fetches_the_newer_epochs_config_not_the_higher_serial():
    # n1 won anyway (say n3 was slow to answer the status): its take-over must fetch n3's config
    plan = newest_state("n1", {"n1": state(1, 13, epoch=1), "n3": state(2, 12)})
    assert plan.config_from == "n3"
    plan = newest_state("n1", {"n1": state(1, 12, epoch=1), "n3": state(2, 12)})
    assert plan.config_from == "n3"


def test_within_one_epoch_the_higher_serial_still_wins():
    plan = newest_state("n3", {"n1": state(2, 14), "n3": state(2, 12)})
    assert plan.config_from == "n1"
    views = {"n1": view("n1", 2, 12), "n3": view("n3", 2, 13)}
    assert decide("n3", views, 3, TIMEOUT).action == PROCEED


def test_configs_without_a_recorded_epoch_count_as_epoch_0():
    assert NodeView.from_payload({"name": "n1", "lost_for": 20.0, "master": "n2", "candidate": True, "epoch": 1,
                                  "config_serial": 13, "queue_serial": 5}).config_epoch == 0
    assert NodeState.from_payload({"epoch": 1, "config_serial": 13, "queue_serial": 5, "jobs": {}}).config_epoch == 0
    # an upgraded node (no record) loses to a node that recorded epoch 1, keeps winning by serial among equals
    plan = newest_state("n1", {"n1": state(0, 13), "n3": state(1, 12)})
    assert plan.config_from == "n3"
    plan = newest_state("n1", {"n1": state(0, 12), "n3": state(0, 13)})
    assert plan.config_from == "n3"


def test_the_rightful_candidate_does_not_fetch_the_old_masters_higher_serial():
    # n1 still names itself master (it missed n2's ssconf), so n3 is elected; its take-over asks n1 too
    plan = newest_state("n3", {"n1": state(1, 13, epoch=1), "n3": state(2, 12)})
    assert plan.config_from is None

