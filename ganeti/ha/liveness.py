"""Liveness of the master itself (pure: no Twisted, no I/O).

Two decisions, one per side of the master's liveness:

 - L{master_silent}, on every node: the master's LuxiD answers each beat
   (when both ends negotiated it, L{ganeti.heartbeat.wire}); a node that
   has heard nothing from it for the liveness timeout counts it lost from
   the last time it heard it, whatever TCP says: a paused or stuck LuxiD
   keeps its connections open, as its kernel still answers for it.
 - L{StallGuard}, in the master's LuxiD and WConfD: every operation (and
   a tick a few times a second) reads a monotonic clock that runs while
   the process is stopped or the machine suspended; a gap longer than
   L{stall_threshold} means this master was not running for that long,
   long enough for the other nodes to elect another.  Until a majority of
   nodes says again that it is the master (L{confirms}), it serves
   nothing: no job accepted or started, no config written, no answer.
"""

from __future__ import annotations

from typing import Iterable

from ganeti.ha.election import NodeView
from ganeti.ha.failover import majority

#: seconds a connection to the master may take to be accepted (TLS, hello)
#: beyond the liveness timeout before the node tries elsewhere
ACCEPT_ALLOWANCE = 2.0
#: the smallest gap that counts as a stall (seconds): a loaded machine's event loop lags less
MIN_STALL = 1.0
#: the fraction of the failover timeout a stall must reach to be re-checked
STALL_FRACTION = 0.25


def master_silent(now: float, connected_at: float, last_heard: float | None, accepted: bool, beats: bool,
                  timeout: float, allowance: float = ACCEPT_ALLOWANCE) -> bool:
    """Whether a node leaves its heartbeat connection to the master as dead.

    @param connected_at: when the connection was made
    @param last_heard: when the last byte of LuxiD arrived (C{None}: none yet)
    @param accepted: whether LuxiD accepted the hello
    @param beats: whether LuxiD answers beats (negotiated in the hello);
        without (an older LuxiD) an accepted connection is left to TCP
    @param timeout: the liveness timeout
    """
    if not accepted:
        return now - connected_at > timeout + allowance
    if not beats:
        return False
    heard = connected_at if last_heard is None else last_heard
    return now - heard > timeout


def stall_threshold(failover_timeout: float) -> float:
    """The gap between two runs of the event loop that counts as a stall (seconds)."""
    return max(MIN_STALL, failover_timeout * STALL_FRACTION)


class StallGuard:
    """Whether this master's process was stalled, and so must be confirmed again.

    Feed it the monotonic time at every operation and tick (L{observe});
    a gap over the threshold makes it L{suspect} until L{confirmed}.
    """

    def __init__(self, now: float) -> None:
        self.last = now
        #: why this master must be confirmed again before it serves (C{None}: it need not)
        self.suspect: str | None = None
        #: the longest gap seen (seconds)
        self.longest = 0.0

    def observe(self, now: float, threshold: float) -> bool:
        """Note that the event loop runs at C{now}; whether a stall was just found."""
        gap, self.last = now - self.last, max(self.last, now)
        self.longest = max(self.longest, gap)
        if gap <= threshold:
            return False
        self.suspect = ("this master did not run for %.1f s (paused or stuck): it serves nothing until a majority"
                        " of nodes confirms it is still the master" % gap)
        return True

    def confirmed(self) -> None:
        self.suspect = None


def confirms(me: str, epoch: int, views: Iterable[NodeView], total: int, auto_failover: bool,
             failover_timeout: float) -> tuple[bool, str]:
    """Whether the nodes' answers (NodeD's C{election_status}) confirm C{me}
    as the master of C{epoch}, and why (for the log).

    A node confirms when its ssconf names C{me}, it has seen no epoch above
    C{epoch} (it neither voted for a later master nor heard of one), and,
    with automatic failover on, it hears a master or lost it for less than
    half the failover timeout (it cannot vote for another before it hears
    this one again).  A strict majority of all C{total} nodes must confirm.
    """
    yes, no = [], []
    for view in views:
        if view.master != me:
            no.append("%s names %s the master" % (view.name, view.master))
        elif view.epoch > epoch:
            no.append("%s has seen master epoch %d" % (view.name, view.epoch))
        elif auto_failover and view.lost_for is not None and view.lost_for >= failover_timeout / 2.0:
            no.append("%s lost the master %.1f s ago" % (view.name, view.lost_for))
        else:
            yes.append(view.name)
    ok = majority(len(yes), total)
    why = "%d of %d nodes confirm %s as master of epoch %d%s" % (
        len(yes), total, me, epoch, "" if not no else " (%s)" % "; ".join(sorted(no)))
    return ok, why


__all__ = ["ACCEPT_ALLOWANCE", "MIN_STALL", "STALL_FRACTION", "StallGuard", "confirms", "master_silent",
           "stall_threshold"]
