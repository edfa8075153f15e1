"""A blocking LUXI client that rides through a master failover (the gnt-* tools).

    client = MasterClient(paths, on_wait=print)     # a LuxiClient: same methods
    job_id = client.submit_job(ops)                 # the job carries a submission id
    client.wait_for_job_change(job_id, ...)         # followed on the new master after a failover

The client talks to this node's LuxiD, or, when this node is not the
master, to the master's LuxiD over TLS (L{ganeti.luxi.locate}).  When the
connection is refused or lost it looks the master up again (ssconf, then
the master candidates' confd) and tries again, with a backoff, for up to
the cluster's failover timeout plus L{MARGIN} seconds
(L{ganeti.ha.params}; counted again from a connection that a master
accepted, then lost, up to L{MAX_LOST} times), telling C{on_wait} once that
it waits for a new master.  It retries only what is safe (L{retry_safe}):

  - queries and C{WaitForJobChange}, always;
  - a request that never reached the server (nothing sent), always;
  - a submission, when every job carries a submission id
    (L{ganeti.luxi.submitid}): a resubmission answers the first ids.
    This client gives every job it submits an id.  Such a submission is
    also sent again when a master refused it without making a job
    (L{refused_unmade}: during a failover the old master cannot get the
    job's file onto a majority of the candidates, or it stepped down).

Anything else that was sent when the connection broke raises
L{OutcomeUnknown}: it may or may not have been done.
"""

from __future__ import annotations

import os
import time

from ganeti import errors
from ganeti.luxi import locate, methods
from ganeti.luxi.client import DEFAULT_TIMEOUT, CallTimeout, ConnectionLost, LuxiClient, NotSent
from ganeti.luxi.submitid import reason_entry, submission_id
from ganeti.paths import Paths

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

#: seconds added to the failover timeout: election, take-over and the new LuxiD's start (with the default
#: timeout, 30 s in all: Ganeti's client waits as long for its master daemon, LUXI_DEF_CTMO)
MARGIN = 20.0
#: the first and the longest pause between two attempts, in seconds
FIRST_DELAY = 0.1
MAX_DELAY = 1.0

#: lost connections (a master answered, then went away) after which the wait no longer starts again
MAX_LOST = 5

#: methods that may be sent again whatever happened to the first attempt
SAFE_METHODS = frozenset({
    m.name for m in methods.TABLE
    if m.name.startswith("Query") or m.name in ("WaitForJobChange", "SetDrainFlag", "SetWatcherPause")
})
#: the submissions (safe when every job has a submission id)
SUBMISSIONS = frozenset({"SubmitJob", "SubmitJobToDrainedQueue", "SubmitManyJobs"})


class OutcomeUnknown(errors.LuxiError):
    """A request that changes something was sent, and the connection broke
    before its answer: it may or may not have been done."""


#: what a master answers when it made no job: it could not get a majority of the candidates to hold the
#: job's file (the master is being replaced, or cut off), or it stepped down (L{ganeti.luxid.service})
UNMADE_REFUSALS = ("not replicated to a majority of the master candidates", "This master stepped down",
                   # the master guard (ganeti.ha.guard) refuses before the handler runs: a resumed old master
                   "not confirmed as master by a majority of nodes")


def refused_unmade(error: BaseException) -> bool:
    """Whether C{error} is a master's refusal of a submission that made no job
    (a resubmission with the same submission ids is safe, see L{retry_safe})."""
    text = str(error)
    return any(marker in text for marker in UNMADE_REFUSALS)


def jobs_of(method: str, args: tuple[Any, ...]) -> list[Any] | None:
    """The jobs (lists of opcodes) of a submission's arguments, else C{None}."""
    if method not in SUBMISSIONS or not args or not isinstance(args[0], list):
        return None
    return list(args[0]) if method == "SubmitManyJobs" else [args[0]]


def retry_safe(method: str, args: tuple[Any, ...]) -> bool:
    """Whether C{method} may be sent again after a connection broke once it was sent."""
    if method in SAFE_METHODS:
        return True
    jobs = jobs_of(method, args)
    return bool(jobs) and all(submission_id(ops) is not None for ops in jobs or [])


def with_submission_ids(method: str, args: tuple[Any, ...], make_id: Callable[[], str],
                        now_ns: Callable[[], int] = time.time_ns) -> tuple[Any, ...]:
    """C{args} of a submission with a submission id on every job that has
    none (the opcodes are copied, not changed); other calls unchanged."""
    jobs = jobs_of(method, args)
    if not jobs:
        return args
    named = []
    for ops in jobs:
        if submission_id(ops) is None and isinstance(ops, list) and ops and isinstance(ops[0], dict):
            first = dict(ops[0])
            trail = first.get("reason")
            first["reason"] = (list(trail) if isinstance(trail, list) else []) + [reason_entry(make_id(), now_ns())]
            ops = [first] + list(ops[1:])
        named.append(ops)
    return ((named if method == "SubmitManyJobs" else named[0]),) + tuple(args[1:])


def wait_window(paths: Paths) -> float:
    """Seconds to wait for a new master: the failover timeout plus L{MARGIN};
    none when this node's ssconf names no master candidate but one (a
    one-node cluster: nobody could take over, so the client fails at once,
    as Ganeti's does).

    Read from this node's copy of the HA parameters (L{ganeti.ha.params})
    with the standard library: the command line must not pay for the HA
    package's imports (attrs, Twisted's logger) to know one number.
    """
    from ganeti import lightjson

    try:
        with open(paths.ssconf("master_candidates")) as handle:
            if len({line.strip() for line in handle if line.strip()}) <= 1:
                return 0.0
    except OSError:  # not known here: wait as for any cluster
        pass
    timeout = 10.0  # ganeti.ha.bounds.DEFAULT_FAILOVER_TIMEOUT
    try:
        with open(os.path.join(paths.data_dir, "ha.data"), "rb") as handle:  # ganeti.ha.params.FILE_NAME
            value = lightjson.loads(handle.read()).get("failover_timeout")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 3600:
            timeout = float(value)
    except (OSError, ValueError, AttributeError):  # missing, unreadable, damaged: the default
        pass
    return timeout + MARGIN


class MasterClient(LuxiClient):
    """See the module docstring.

    @ivar target: where the client talks LUXI now (L{locate.Target});
        C{None} before it looked (this node's socket)
    """

    def __init__(
        self,
        paths: Paths,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        on_wait: Callable[[str], Any] | None = None,
        window: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = time.sleep,
        **kwargs: Any,
    ) -> None:
        """
        @param on_wait: told once, in words, that the client waits for a new master.
        @param window: seconds to keep trying (default L{wait_window}).
        """
        super().__init__(paths.luxi_socket, timeout, **kwargs)
        self.paths = paths
        self.on_wait = on_wait
        self.window = window
        self.clock = clock
        self.sleep = sleep
        self.target: locate.Target | None = None
        self.told = False
        self.make_id = lambda: os.urandom(16).hex()  # a random id, as uuid4's (uuid costs an import)
        #: finds the master (L{locate.locate}; tests replace it)
        self.locate: Callable[[Paths, bool], locate.Target | None] = locate.locate

    # --- where the master is ------------------------------------------------
    def _open_socket(self) -> Any:
        target = self.target
        if target is None or target.address is None:
            self.address = self.paths.luxi_socket
            return super()._open_socket()
        self.address = "%s (%s port %d)" % (target.name, target.address, target.port)
        return locate.open_tls(self.paths, target.address, target.port, self.connect_timeout)

    def relocate(self, ask_confd: bool) -> bool:
        """Look the master up again; whether one is known."""
        self.close()
        self.target = self.locate(self.paths, ask_confd)
        return self.target is not None

    # --- calls ----------------------------------------------------------------
    def call_once(self, method: str, *args: Any) -> Any:
        """One attempt, at the current target (L{LuxiClient.call})."""
        return super().call(method, *args)

    def call(self, method: str, *args: Any) -> Any:
        if method == "WaitForJobChange" and len(args) == 5 and isinstance(args[4], (int, float)):
            # a paused master keeps the connection open: give up on it once the wait and the window are over
            saved = self.timeout
            window = self.window if self.window is not None else wait_window(self.paths)
            self.timeout = min(saved, max(float(args[4]), 0.0) + window)
            try:
                return self._call(method, *args)
            finally:
                self.timeout = saved
        return self._call(method, *args)

    def _call(self, method: str, *args: Any) -> Any:
        args = with_submission_ids(method, args, self.make_id)
        safe = retry_safe(method, args)
        started: float | None = None
        window = 0.0
        delay = FIRST_DELAY
        attempts = lost = 0
        while True:
            try:
                return self.call_once(method, *args)
            except NotSent as e:
                error: errors.GenericError = e
            except errors.JobQueueError as e:
                if not (safe and (method in SUBMISSIONS or method in SAFE_METHODS) and refused_unmade(e)):
                    raise
                error = e  # a master in a failover refused it and made nothing: the next master may take it
            except (ConnectionLost, CallTimeout) as e:
                if not safe:
                    raise OutcomeUnknown(
                        "outcome unknown: %s; %s may have been done or not" % (e, method)
                    ) from None
                error = e
                lost += 1
                if lost <= MAX_LOST:
                    started = None  # a master was there: the wait for the next one starts now
            now = self.clock()
            if started is None:
                started, window = now, self.window if self.window is not None else wait_window(self.paths)
            elif now - started >= window:
                raise error
            before = self.target
            if not self.relocate(ask_confd=attempts > 0):
                raise error  # no cluster known here: nothing to wait for
            attempts += 1
            if attempts == 1 and self.target != before:
                continue  # the master is elsewhere: try it at once
            if not self.told and self.on_wait is not None:
                self.told = True
                self.on_wait("Waiting for a new master (up to %d s): the master daemon at %s does not answer"
                             % (round(window), self.address))
            import random  # only when retrying: its import (hashlib's sha512, bisect) costs every command 1.5 ms

            self.sleep(delay * (0.5 + random.random() / 2))
            delay = min(delay * 2, MAX_DELAY)


__all__ = ["MARGIN", "MasterClient", "OutcomeUnknown", "refused_unmade", "retry_safe", "wait_window", "with_submission_ids"]
