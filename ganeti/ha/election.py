"""Automatic failover decisions (pure: no Twisted, no I/O).

With the cluster parameter C{auto_failover} on, every master candidate's
NodeD watches its heartbeat connection to the master's LuxiD.  Once it has
lost the master for C{failover_timeout} seconds, it asks every node how
things look from there (L{NodeView}, NodeD's C{election_status}) and
L{decide}s:

 - a strict majority of all nodes must have lost the master for the
   timeout, else it waits (the master may be fine and this node cut off);
 - among the reachable candidates losing the master (for the timeout or
   not yet; the master itself excluded), the most up-to-date one (config
   by the epoch of the master that wrote it, then by serial, then job queue
   serial; ties go to the smallest name) proceeds
   once it lost the master for the timeout; the others wait and check
   again later (the winner may have died too).

A candidate does not wait for the timeout to elapse before it looks: it
asks for the nodes' status up to L{lead} seconds before, and when a strict
majority (itself included) will have lost the master for the timeout by
then (L{majority_lost_in}), it asks for the votes at that very moment, with
the views as they will be then (L{aged}); a voter still checks its own
clock, so asking early is never a vote given early.

The one that proceeds asks every node for its vote for one epoch above
every epoch it heard of (NodeD's C{election_vote}).  A node L{refusal}s
unless it too lost the master for the timeout and the candidate's config
and job queue are at least as new as its own; it gives each epoch once
(L{ganeti.ha.epoch.EpochGuard.claim}, recorded durably before it answers).  A
strict majority of all nodes elects: the winner runs the failover of
C{gnt-cluster master-failover} under the epoch it won.

A vote stands for a master to come: until a node hears a master again, it
counts the master as lost only from L{TAKEOVER_ALLOWANCE} seconds after its
vote (L{lost_for}), so the winner has the time to take over before anyone
tries again (the winner too: it voted for itself); the candidate it voted
for may ask again, for a later epoch.

A master whose LuxiD cannot reach a majority of nodes for the timeout
steps down (L{StepDownClock}), so a partitioned minority stops writing
before the majority elects another master.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs

from ganeti.ha.failover import majority

PROCEED, WAIT = "proceed", "wait"

#: seconds an elected candidate has to take over before its voters count the master as lost again
TAKEOVER_ALLOWANCE = 30.0
#: seconds before the failover timeout a candidate asks for the nodes' status (at most half the timeout)
LEAD = 1.0


@attrs.frozen
class NodeView:
    """What one node told of itself (C{election_status}).

    @ivar lost_for: seconds this node has not heard from the master
        (C{None}: it hears the master now)
    @ivar master: the master in this node's ssconf (C{None}: unknown)
    @ivar candidate: whether this node is a master candidate (its ssconf)
    """

    name: str
    lost_for: float | None
    master: str | None
    candidate: bool
    epoch: int
    config_serial: int
    queue_serial: int
    #: the epoch of the master that wrote this node's config (0: none recorded)
    config_epoch: int = 0

    def to_payload(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_payload(cls, payload: Any) -> NodeView:
        """@raise ValueError: not a well-formed answer"""
        if not isinstance(payload, dict):
            raise ValueError("election_status answered %r" % (payload,))
        lost = payload.get("lost_for")
        if lost is not None and (isinstance(lost, bool) or not isinstance(lost, (int, float)) or lost < 0):
            raise ValueError("election_status answered lost_for %r" % (lost,))
        master = payload.get("master")
        if master is not None and not isinstance(master, str):
            raise ValueError("election_status answered master %r" % (master,))
        numbers = []
        for key in ("epoch", "config_serial", "queue_serial", "config_epoch"):
            value = payload.get(key) or 0
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError("election_status answered %s %r" % (key, value))
            numbers.append(value)
        name = payload.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("election_status answered name %r" % (name,))
        return cls(name, None if lost is None else float(lost), master, bool(payload.get("candidate")), *numbers)

    def lost(self, timeout: float) -> bool:
        """Whether this node has lost the master for C{timeout} seconds."""
        return self.lost_for is not None and self.lost_for >= timeout


@attrs.frozen
class Decision:
    """What a candidate does after asking the others.

    @ivar action: L{PROCEED} (ask for votes for C{epoch}) or L{WAIT}
    @ivar reason: why, for the log
    @ivar soon: (L{WAIT}) look again at the next tick: the other nodes may
        lose the master any moment; else after a while (another candidate
        should proceed)
    """

    action: str
    reason: str
    epoch: int = 0
    soon: bool = False


def lost_for(now: float, lost_since: float | None, voted_at: float | None,
             allowance: float = TAKEOVER_ALLOWANCE) -> float | None:
    """Seconds this node counts the master as lost (C{None}: connected).

    @param lost_since: when the heartbeat connection was lost (or the node started)
    @param voted_at: when this node last voted: if no master was heard
        since, the master counts as lost only from C{allowance} seconds after
    """
    if lost_since is None:
        return None
    if voted_at is None or lost_since > voted_at:
        return max(0.0, now - lost_since)
    return max(0.0, now - (voted_at + allowance))


def lead(timeout: float) -> float:
    """Seconds before C{timeout} a candidate looks at the other nodes (L{LEAD}, at most half the timeout)."""
    return min(LEAD, timeout / 2.0)


def majority_lost_in(me: str, views: Mapping[str, NodeView], total: int, timeout: float) -> float | None:
    """Seconds until C{me} and a strict majority of all C{total} nodes will
    have lost the master for C{timeout}, if every node of C{views} that lost
    it stays without it (0: now); C{None}: C{me} hears the master, or fewer
    than a majority of nodes lost it."""
    mine = views.get(me)
    if mine is None or mine.lost_for is None:
        return None
    remaining = sorted(max(0.0, timeout - view.lost_for) for view in views.values() if view.lost_for is not None)
    needed = total // 2 + 1  # the smallest strict majority
    if len(remaining) < needed:
        return None
    return max(remaining[needed - 1], timeout - mine.lost_for, 0.0)


def aged(views: Mapping[str, NodeView], seconds: float) -> dict[str, NodeView]:
    """The views C{seconds} later, every node that lost the master still without it."""
    if seconds < 0:
        raise ValueError("cannot age views by %r seconds" % (seconds,))
    return {name: view if view.lost_for is None else attrs.evolve(view, lost_for=view.lost_for + seconds)
            for name, view in views.items()}


def newness(config_epoch: int, config_serial: int, queue_serial: int) -> tuple[int, int, int]:
    """How up to date a node is, greatest newest: its config by the epoch of
    the master that wrote it, then its serial (a replaced master may hold
    changes no majority confirmed, at serials its successor used for other
    changes), then the job queue serial."""
    return (config_epoch, config_serial, queue_serial)


def rank(view: NodeView) -> tuple[int, int, int, str]:
    """Sort key: the most up-to-date first (L{newness}), ties to the smallest name."""
    return (-view.config_epoch, -view.config_serial, -view.queue_serial, view.name)


def decide(me: str, views: Mapping[str, NodeView], total: int, timeout: float) -> Decision:
    """Whether C{me} proceeds to an election (see the module docstring).

    @param views: every node that answered C{election_status}, C{me} included
    @param total: the number of nodes of the cluster
    """
    mine = views.get(me)
    if mine is None:
        return Decision(WAIT, "this node's own NodeD did not answer")
    if not mine.lost(timeout):
        return Decision(WAIT, "this node has not lost the master for %g s" % timeout)
    if mine.master == me or not mine.candidate:
        return Decision(WAIT, "this node is the master or not a master candidate")
    lost = sorted(name for name, view in views.items() if view.lost(timeout))
    if not majority(len(lost), total):
        return Decision(WAIT, "only %d of %d nodes lost the master for %g s (%s)"
                        % (len(lost), total, timeout, ", ".join(lost)), soon=True)
    # every candidate losing the master contends, also one that lost it a moment later than this one
    # (else two candidates could each find the other short of the timeout, and split the votes)
    contenders = sorted((view for view in views.values()
                         if view.lost_for is not None and view.candidate and view.name != view.master), key=rank)
    best = contenders[0]
    if best.name != me:
        return Decision(WAIT, "%s is more up to date (config epoch %d serial %d, queue serial %d) or first by name"
                        % (best.name, best.config_epoch, best.config_serial, best.queue_serial),
                        soon=not best.lost(timeout))
    epoch = max(view.epoch for view in views.values()) + 1
    return Decision(PROCEED, "%d of %d nodes lost the master %s for %g s" % (len(lost), total, mine.master, timeout),
                    epoch)


def refusal(mine: NodeView, candidate: str, config_serial: int, queue_serial: int, timeout: float, *,
            config_epoch: int = 0) -> str | None:
    """Why this node (C{mine}) refuses its vote to C{candidate}, or C{None}:
    it votes (the once-per-epoch rule is the epoch record's).  A candidate
    is behind when its L{newness} is lower: as L{rank} orders, so that the
    candidate every node ranks first gets every vote."""
    if not mine.lost(timeout):
        if mine.lost_for is None:
            return "this node still hears the master"
        return "this node lost the master only %.1f s ago (timeout %g s)" % (mine.lost_for, timeout)
    theirs, ours = (newness(config_epoch, config_serial, queue_serial),
                    newness(mine.config_epoch, mine.config_serial, mine.queue_serial))
    if theirs < ours:
        return ("%s is behind this node (config epoch, config serial, queue serial: %s < %s)"
                % (candidate, "/".join(map(str, theirs)), "/".join(map(str, ours))))
    return None


def elected(granted: int, total: int) -> bool:
    """Whether C{granted} votes of C{total} nodes elect (a strict majority of all nodes)."""
    return majority(granted, total)


class StepDownClock:
    """When a master must step down: it reached no majority (itself
    included) for C{timeout} seconds running."""

    def __init__(self) -> None:
        #: since when the master has reached no majority (C{None}: it reaches one)
        self.since: float | None = None

    def update(self, now: float, reachable: int, total: int, timeout: float) -> bool:
        """Feed the count of nodes reachable now (this one included); whether to step down."""
        if majority(reachable, total):
            self.since = None
            return False
        if self.since is None:
            self.since = now
        return now - self.since >= timeout

    def without_majority_for(self, now: float) -> float:
        return 0.0 if self.since is None else now - self.since


__all__ = ["Decision", "LEAD", "NodeView", "PROCEED", "StepDownClock", "TAKEOVER_ALLOWANCE", "WAIT", "aged", "decide",
           "elected", "lead", "lost_for", "majority_lost_in", "newness", "rank", "refusal"]
