"""Master failover decisions (pure: no Twisted, no I/O).

L{check_candidate} and L{master_vote} are Ganeti's checks of
C{gnt-cluster master-failover} (spec/ha.md section 1); L{startup_vote} is the
start-up voting of the master daemons; L{newest_state} is what Ganeti lacks
(its issue 1242): before taking over, the new master finds which candidate
holds the newest config (by the epoch of the master that wrote it, then by
serial), the newest HA parameters (ranked alike) and the most advanced
version of every job file.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable, Mapping

import attrs

from ganeti.jobs import lifecycle

#: The reason given to jobs that were running on the old master.
FAILOVER_REASON = "master failover: the job was running on the old master"

START, RETRY, FAIL = "start", "retry", "fail"


class FailoverRefused(Exception):
    """The failover must not happen; the message says why."""


def check_candidate(me: str, master: str, candidates: list[str]) -> None:
    """Refuse unless C{me} may become the master (Ganeti's messages).

    @raise FailoverRefused: C{me} is the master already, or no candidate
    """
    if me == master:
        raise FailoverRefused("This commands must be run on the node where you want the new master to be."
                              " %s is already the master" % master)
    if me not in candidates:
        others = [name for name in candidates if name != master]
        raise FailoverRefused("This node is not among the nodes marked as master candidates. Only these nodes"
                              " can become masters. Current list of master candidates is:\n%s" % "\n".join(others))


def majority(count: int, total: int) -> bool:
    """Whether C{count} of C{total} is a strict majority."""
    return 2 * count > total


def answered(total: int, must: Iterable[str] = (), also: int = 0,
             among: Iterable[str] | None = None) -> Callable[[Mapping[str, Any]], bool]:
    """A node RPC's C{enough} (L{ganeti.rpc.RpcClient.call}): a strict
    majority of C{total} answered (C{also} more counted as answered; only
    nodes of C{among} count, when given), every node of C{must} among them."""
    must = list(must)
    counted = None if among is None else set(among)

    def enough(results: Mapping[str, Any]) -> bool:
        ok = {name for name, result in results.items() if result.success}
        mine = ok if counted is None else ok & counted
        return majority(len(mine) + also, total) and all(name in ok for name in must)

    return enough


def fenced(nodes: int, candidates: list[str], me: str) -> Callable[[Mapping[str, Any]], bool]:
    """The C{epoch_claim} round's C{enough}: a strict majority of all nodes
    and a strict majority of the master candidates hold the new epoch, this
    node among them.  The candidates still without it are then too few to
    acknowledge anything for the old master."""
    of_nodes = answered(nodes, [me])
    of_candidates = answered(len(candidates), [me], among=candidates)
    return lambda results: of_nodes(results) and of_candidates(results)


def named_by_majority(me: str, total: int) -> Callable[[Mapping[str, Any]], bool]:
    """A C{master_node_name} round's C{enough}: a strict majority of
    C{total} names C{me} master (L{startup_vote} says L{START} whatever
    the others answer)."""

    def enough(results: Mapping[str, Any]) -> bool:
        return majority(sum(1 for r in results.values() if r.success and r.payload == me), total)

    return enough


def master_vote(answers: Mapping[str, str | None], believed: str) -> None:
    """Ganeti's voting before a failover.

    @param answers: node name -> the master it names (C{None}: no answer)
    @param believed: the master this node believes in
    @raise FailoverRefused: no strict majority answered, or the most voted
        master is another one
    """
    healthy = [name for name, vote in answers.items() if vote is not None]
    if not majority(len(healthy), len(answers)):
        unhealthy = sorted(name for name, vote in answers.items() if vote is None)
        raise FailoverRefused("Master-failover with voting is only possible if the majority of nodes are still"
                              " healthy; use the --no-voting option after ensuring by other means that you won't"
                              " end up in a dual-master scenario. Unhealthy nodes: %s" % unhealthy)
    votes = Counter(vote for vote in answers.values() if vote is not None)
    voted = sorted(votes.items(), key=lambda item: (-item[1], item[0]))[0][0]
    if voted != believed:
        raise FailoverRefused("I have a wrong configuration, I believe the master is %s but the other nodes voted"
                              " %s. Please resync the configuration of this node." % (believed, voted))


def startup_vote(answers: Mapping[str, str | None], me: str) -> str:
    """Ganeti's start-up voting of LuxiD and WConfD.

    @param answers: node name -> the master it names (C{None}: no answer)
    @return: L{START} (a strict majority names C{me}), L{RETRY} (it still
        could, with the nodes that did not answer), else L{FAIL}
    """
    total = len(answers)
    for_me = sum(1 for vote in answers.values() if vote == me)
    unknown = sum(1 for vote in answers.values() if vote is None)
    if majority(for_me, total):
        return START
    if majority(for_me + unknown, total):
        return RETRY
    return FAIL


@attrs.frozen
class NodeState:
    """What C{failover_status} told of one candidate."""

    epoch: int
    config_serial: int
    queue_serial: int
    jobs: dict[str, str | None]
    #: the epoch of the master that wrote the node's config (0: none recorded)
    config_epoch: int = 0
    #: how new the node's HA parameters are (L{ganeti.ha.params.HaParams.rank}: epoch, serial)
    ha: tuple[int, int] = (0, 0)

    @classmethod
    def from_payload(cls, payload: Any) -> NodeState:
        if not isinstance(payload, dict):
            raise ValueError("failover_status answered %r" % (payload,))
        jobs = payload.get("jobs") or {}
        if not isinstance(jobs, dict):
            raise ValueError("failover_status answered jobs %r" % (jobs,))
        return cls(int(payload.get("epoch") or 0), int(payload.get("config_serial") or 0),
                   int(payload.get("queue_serial") or 0), {str(k): v for k, v in jobs.items()},
                   int(payload.get("config_epoch") or 0),
                   (int(payload.get("ha_epoch") or 0), int(payload.get("ha_serial") or 0)))


def _progress(status: str | None) -> int:
    return -1 if status is None else lifecycle.status_index(status)


@attrs.frozen
class Plan:
    """What the new master fetches before it takes over.

    @ivar config_from: the candidate whose newer config.data to fetch (C{None}: ours is newest)
    @ivar serial_from: the candidate whose higher queue serial to fetch (C{None}: ours is highest)
    @ivar jobs: candidate -> job file names to fetch from it (more advanced there, or missing here)
    @ivar epoch: the epoch to raise to (one above every epoch seen)
    @ivar ha_from: the candidate whose newer HA parameters (C{ha.data}) to fetch (C{None}: ours are newest)
    """

    config_from: str | None
    serial_from: str | None
    jobs: dict[str, list[str]]
    epoch: int
    ha_from: str | None = None


def newest_state(me: str, states: Mapping[str, NodeState]) -> Plan:
    """Which candidate is ahead of C{me}, for the config and for each job.

    @param states: every candidate that answered, C{me} included
    """
    mine = states[me]
    config_from = serial_from = ha_from = None
    best_ha = mine.ha
    # a config by the epoch of the master that wrote it first: a replaced master may hold changes no
    # majority confirmed, at serials (equal or higher) its successor used for the changes it confirmed
    best_config, best_serial = (mine.config_epoch, mine.config_serial), mine.queue_serial
    wanted: dict[str, tuple[int, str]] = {}
    for name, state in sorted(states.items()):
        if name == me:
            continue
        if (state.config_epoch, state.config_serial) > best_config:
            best_config, config_from = (state.config_epoch, state.config_serial), name
        if state.queue_serial > best_serial:
            best_serial, serial_from = state.queue_serial, name
        if state.ha > best_ha:  # as configs: by the epoch of the master that made them, then by serial
            best_ha, ha_from = state.ha, name
        for job, status in state.jobs.items():
            ours = _progress(mine.jobs[job]) if job in mine.jobs else -2
            best = wanted[job][0] if job in wanted else ours
            if _progress(status) > best:
                wanted[job] = (_progress(status), name)
    jobs: dict[str, list[str]] = {}
    for job, (_rank, name) in sorted(wanted.items()):
        jobs.setdefault(name, []).append(job)
    epoch = max(state.epoch for state in states.values()) + 1
    return Plan(config_from, serial_from, jobs, epoch, ha_from)
