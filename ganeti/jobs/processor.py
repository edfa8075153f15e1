"""The opcode processor of a job process: runs a job's opcodes in order.

For each opcode not yet finished:

  1. validate it (L{ganeti.opcodes.validate}) and find its LU; an invalid
     opcode fails here, before any lock is asked for;
  2. status C{waiting}, C{start_timestamp} (written to the job file only
     when the locks take over L{WAITING_SAVE_DELAY}); build the LU on a
     config snapshot (the job process's client reuses its copy while the
     serial is the same), C{check_arguments}, C{await resolve()}, C{expand_names},
     C{await probe()};
  3. take its locks through WConfD, the BGL first, then level by level in
     lock order, at the opcode's priority.  The first attempts have
     timeouts (L{DEFAULT_LOCK_TIMEOUTS}, for the whole set of locks); when
     one runs out every lock is given back, the opcode's priority goes up
     by one (to at most C{PRIO_HIGHEST}) and the LU is built again; after
     the last timeout the processor waits as long as it takes.  New locks
     (C{add_locks}) and existing ones of one level are taken in lock
     order.  A level the LU marks in C{opportunistic_locks} is taken with
     WConfD's guarded opportunistic union: only the members free now, and
     WConfD waits (pushed by lock changes, not polled) until at least the
     LU's count is; what was got is in C{lu.acquired};
  4. status C{running}, C{exec_timestamp}; re-read the config,
     C{check_prereq}, then through L{ganeti.cmdlib.hooks.execute}: the pre
     hooks, C{exec_} (skipped with C{dry_run}), the post hooks;
  5. an LU result that is a L{ganeti.jobs.lifecycle.ResultWithJobs} has
     its jobs submitted (the result becomes C{{"jobs": [...]}});
     status C{success} with the result, or C{error} with the encoded
     exception (C{[ClassName, [args]]}), C{end_timestamp}; every lock is
     released.  After an error every later opcode fails with
     C{OpExecError("Preceding opcode failed")} and the job ends.

Every change of status goes through L{ganeti.jobs.lifecycle} (which
refuses one its table does not allow); what step 3 asks WConfD for, level
by level and attempt by attempt, is planned by L{ganeti.jobs.lockplan}.

The job is handed to C{save} after every change of state and every log
entry (the job process writes the job file there; LuxiD sees the write
through inotify and replicates it to the master candidates); saves
never overlap and coalesce when they come faster than they finish.

L{Processor.request_cancel} stops a job whose current opcode has not started
running: its opcodes become C{canceling}, a lock wait in progress is
abandoned (the pending request withdrawn), and they all end C{canceled}.
L{Processor.kill} (the job process got SIGTERM: C{CancelJob} with C{kill})
stops it even while an opcode runs: what the opcode awaits is cancelled
(the LU stops at that point, its C{finally} clauses run), and the job ends
C{canceled} with the reason as result and log entry; its locks are released
as after any opcode.
L{Processor.change_priority} changes the priority of the pending opcodes,
also of a lock request already waiting when that makes it more urgent.
"""

from __future__ import annotations

import copy
import inspect
from functools import partial
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable

from twisted.internet.defer import CancelledError, Deferred, ensureDeferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import deferLater
from twisted.logger import Logger

from ganeti import errors, opcodes
from ganeti.jobs import followup, lifecycle, lockplan, model, private, trace
from ganeti.jobs.model import QueuedJob, QueuedOpCode
from ganeti.locking.names import LEVEL_CLUSTER, LEVELS

if TYPE_CHECKING:
    from ganeti.cmdlib.base import LogicalUnit, OpContext
    from ganeti.opcodes.typed import OpCode

    LUClass = type[LogicalUnit[OpCode]]

#: Timeouts (seconds) of the lock attempts before the blocking one.
DEFAULT_LOCK_TIMEOUTS: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
#: Retry delays when creating new locks is blocked (doubling up to the max).
ADD_LOCKS_FIRST_DELAY = 0.05
ADD_LOCKS_MAX_DELAY = 2.0
#: How long one opportunistic lock request may wait in WConfD when the
#: processor itself has no deadline any more; it is then asked again.
OPPORTUNISTIC_WAIT = 60.0

#: Seconds an opcode waits for its locks before its "waiting" status is written.
WAITING_SAVE_DELAY = 0.05

#: Result of opcodes ended by a cancel request (Ganeti's text).
CANCELED_RESULT = "Job canceled by request"
#: Result of opcodes ended by a kill (CancelJob with kill, SIGTERM).
KILLED_RESULT = "Job canceled by request (killed)"
#: Message of the error given to the opcodes after a failed one.
PRECEDING_FAILED = "Preceding opcode failed"

SaveFunction = Callable[[QueuedJob], "Awaitable[None] | None"]


class _Canceled(Exception):
    """The job was canceled before its current opcode started running."""


def _held(plan: lockplan.LevelPlan) -> Any:
    """What an LU holds of a level once C{plan} is taken (C{lu.acquired}'s entry)."""
    from ganeti.cmdlib.base import ALL_SET

    return ALL_SET if plan.held_all else list(plan.held)


class _Saver:
    """Runs C{save(job)} one at a time, coalescing requests made meanwhile."""

    log = Logger()

    def __init__(self, job: QueuedJob, save: SaveFunction, clock: IReactorTime | None = None) -> None:
        self._job = job
        self._save = save
        self._clock = clock
        self._waiters: list[Deferred] = []
        self._busy = False
        self._soon: Any = None

    def request_soon(self, delay: float = 0) -> None:
        """Save at the next turn of the reactor (or in C{delay} seconds), with
        whatever else changes until then (log lines come in bursts; each is
        not worth a write); a L{request} meanwhile takes this one's place."""
        if self._clock is None:
            self.request()
            return
        if self._soon is None or not self._soon.active():
            self._soon = self._clock.callLater(delay, self._save_soon)

    def _save_soon(self) -> None:
        self._soon = None
        self.request()

    def request(self) -> Deferred:
        """Fires (never fails) once a save that started after this call is done."""
        if self._soon is not None and self._soon.active():
            self._soon.cancel()  # this save takes what was waiting for the next turn
            self._soon = None
        waiter: Deferred = Deferred()
        self._waiters.append(waiter)
        if not self._busy:
            ensureDeferred(self._loop())
        return waiter

    async def _loop(self) -> None:
        self._busy = True
        try:
            while self._waiters:
                waiters, self._waiters = self._waiters, []
                try:
                    result = self._save(self._job)
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    self.log.failure("cannot save job {job}", job=self._job.id)
                for waiter in waiters:
                    waiter.callback(None)
        finally:
            self._busy = False


class Processor:
    """Runs the opcodes of one job (in the job's own process).

    @param job: the job; changed in place as it runs.
    @param wconfd: a L{ganeti.wconfd.client.WConfdClient}.
    @param owner: the job's lock owner (job id, lock file, pid).
    @param save: called with the job after every change; may return an
        awaitable, which is awaited.
    @param clock: an C{IReactorTime}: timeouts, sleeps and timestamps.
    @param lock_timeouts: timeouts of the lock attempts before the
        blocking one.
    @param registry: C{OP_ID -> LU class} (default: L{ganeti.cmdlib}'s).
    @param paths: the node root (LUs' node RPC client uses its certificate).
    @param rpc_port: the node daemons' port (default: Ganeti's).
    @param rpc_factory: makes the LUs' node RPC client (tests); default:
        one from C{paths}.
    @param submit_jobs: submits the follow-up jobs of an LU that returns a
        L{ganeti.jobs.lifecycle.ResultWithJobs} (the job process: over LUXI).
    @param net: the LUs' L{ganeti.asyncutil.Network} (tests give a fake
        one); default: one on C{clock}.
    """

    log = Logger()

    def __init__(
        self,
        job: QueuedJob,
        wconfd: Any,
        owner: Any,
        *,
        save: SaveFunction,
        clock: IReactorTime,
        lock_timeouts: Iterable[float] = DEFAULT_LOCK_TIMEOUTS,
        registry: dict[str, LUClass] | None = None,
        paths: Any = None,
        rpc_factory: Callable[[], Any] | None = None,
        submit_jobs: Callable[[list[list[dict[str, Any]]]], Awaitable[list[Any]]] | None = None,
        net: Any = None,
        rpc_port: int | None = None,
        private: dict[str, Any] | None = None,
    ) -> None:
        self.job = job
        self.net = net
        self.rpc_port = rpc_port
        self.submit_jobs = submit_jobs
        self.paths = paths
        self.rpc_factory = rpc_factory
        self.wconfd = wconfd
        self.owner = owner
        self.clock = clock
        self.lock_timeouts = tuple(lock_timeouts)
        #: the timeouts of the lock attempts, then C{None} (refuses bad ones here, before any job runs)
        self._attempts = lockplan.attempt_timeouts(self.lock_timeouts)
        self._registry = registry
        self._saver = _Saver(job, save, clock)
        #: the clear values of the job's private parameters, by opcode index (L{ganeti.jobs.private})
        self.private: dict[str, Any] = private or {}
        self._cancel_requested = False
        self._cancel_reason = CANCELED_RESULT
        self._killed = False
        #: the execution of the opcode now running (what L{kill} cancels)
        self._current: Deferred | None = None
        self._started = False
        self._may_hold_locks = False
        #: what request_cancel may cancel: a lock wait or a retry sleep
        self._interruptible: Deferred | None = None
        #: the lock request now waiting in WConfD, and its priority
        self._waiting_request: tuple[list[tuple[str, str]], int] | None = None

    # --- public -------------------------------------------------------------
    async def run(self) -> None:
        """Run every unfinished opcode; returns when the job is finalized."""
        if self._started:
            raise errors.ProgrammerError("Processor.run() called twice")
        self._started = True
        for index, qop in enumerate(self.job.ops):
            if qop.status in lifecycle.FINALIZED:
                continue
            if self._cancel_requested or qop.status == lifecycle.CANCELING:
                self._cancel_from(index)
                break
            if qop.status == lifecycle.RUNNING:
                self._fail(index, errors.OpExecError("The job process was restarted while this opcode ran"))
                break
            if not await self._run_op(index, qop):
                break
        lifecycle.finalize(self.job, self._timestamp())
        await self._save()

    def request_cancel(self) -> bool:
        """Cancel the job unless an opcode runs already; returns whether it will be."""
        if self.job.finalized or any(op.status == lifecycle.RUNNING for op in self.job.ops):
            return False
        self._cancel_requested = True
        lifecycle.request_cancel(self.job)
        self._saver.request()
        if self._interruptible is not None and not self._interruptible.called:
            self._interruptible.cancel()
        self.log.info("job {job}: cancel requested", job=self.job.id)
        return True

    def kill(self, reason: str = KILLED_RESULT) -> bool:
        """Stop the job now, even an opcode that runs; returns whether
        there was anything to stop.  The job ends C{canceled} with
        C{reason} (result of the canceled opcodes, and a log entry)."""
        if self.job.finalized or self._killed:
            return False
        self._killed = True
        self._cancel_requested = True
        self._cancel_reason = reason
        for index, op in enumerate(self.job.ops):
            if op.status not in lifecycle.FINALIZED:
                self.job.add_log(index, reason, when=self.clock.seconds())
                break
        lifecycle.request_cancel(self.job)
        self._saver.request()
        self.log.info("job {job}: killed: {reason}", job=self.job.id, reason=reason)
        for d in (self._interruptible, self._current):
            if d is not None and not d.called:
                d.cancel()
        return True

    def change_priority(self, priority: int) -> bool:
        """Set the priority of the opcodes not yet running; returns whether any changed."""
        if isinstance(priority, bool) or not isinstance(priority, int):
            return False
        if not lifecycle.PRIO_HIGHEST <= priority <= lifecycle.PRIO_LOWEST:
            return False
        changed = False
        for op in self.job.ops:
            if op.status in lifecycle.PENDING:
                op.priority = priority
                if priority in lifecycle.PRIO_SUBMIT_VALID:
                    op.input["priority"] = priority
                changed = True
        if not changed:
            return False
        self._saver.request()
        waiting = self._waiting_request
        if waiting is not None and priority < waiting[1]:
            self._waiting_request = (waiting[0], priority)
            d = ensureDeferred(self.wconfd.update_locks_waiting(self.owner, priority, waiting[0]))
            d.addErrback(lambda f: self.log.failure("job {job}: cannot raise the lock priority", f, job=self.job.id))
        return True

    # --- one opcode -------------------------------------------------------------
    async def _run_op(self, index: int, qop: QueuedOpCode) -> bool:
        count = len(self.job.ops)
        try:
            op = opcodes.validate(private.merged(qop.input, self.private.get(str(index))))
            if private.lost(op):
                raise errors.OpPrereqError(
                    "The private parameters (%s) of this job were lost: the master daemon restarted before it ran;"
                    " submit it again" % ", ".join(private.lost(op)), errors.ECODE_INVAL)
            lu_class = self._lu_class(op["OP_ID"])
        except errors.GenericError as e:
            now = self._timestamp()
            qop.start_timestamp = qop.start_timestamp or now
            self._fail(index, e)
            self.log.info("job {job} op {n}/{count}: invalid: {e}", job=self.job.id, n=index + 1, count=count, e=e)
            await self._save()
            return False
        lifecycle.wait(self.job, index, self._timestamp())
        self.log.info(
            "job {job} op {n}/{count}: {summary}",
            job=self.job.id,
            n=index + 1,
            count=count,
            summary=opcodes.summary(op),
        )
        # "waiting" is written only if the locks take a while: locks granted at
        # once go straight to "running" (one write, and one wake-up of LuxiD and
        # its clients, fewer)
        self._saver.request_soon(WAITING_SAVE_DELAY)
        ok = False
        current = ensureDeferred(self._execute(index, qop, op, lu_class))
        self._current = current
        try:
            result = await current
        except _Canceled:
            self._cancel_from(index)
        except Exception as e:
            if self._killed:  # whatever the interrupted LU made of it
                self._cancel_from(index)
            else:
                if not isinstance(e, errors.GenericError):
                    self.log.failure("job {job} op {n}: unexpected error", job=self.job.id, n=index + 1)
                self._fail(index, e)
        else:
            lifecycle.succeed(qop, result, self._timestamp())
            ok = True
        finally:
            self._current = None
        self.log.info(
            "job {job} op {n}/{count}: {status}", job=self.job.id, n=index + 1, count=count, status=qop.status
        )
        await self._save()
        await self._release()
        return ok

    async def _execute(self, index: int, qop: QueuedOpCode, op: dict[str, Any], lu_class: LUClass) -> Any:
        from ganeti.cmdlib import hooks
        from ganeti.cmdlib.base import OpContext

        feedback = partial(self._feedback, index)
        ctx = OpContext(
            self.wconfd, self.owner, self.clock, feedback=feedback, job_id=self.job.id,
            paths=self.paths, rpc_factory=self.rpc_factory, net=self.net,
            rpc_port=self.rpc_port,
        )
        try:
            lu = await self._lock(qop, op, lu_class, ctx)
            trace.hop(self.job.id, "op.locked")
            self._check_cancel()
            lifecycle.run(qop, self._timestamp())
            saved = self._save()  # (never fails) the running state saved while the config is read
            if self._may_hold_locks:  # read again under the locks (without any, the read of _lock is as good)
                lu.cfg = await self.wconfd.read_config()
                trace.hop(self.job.id, "op.config_read")
            await saved
            lu.check_prereq()

            async def run() -> Any:
                trace.hop(self.job.id, "op.exec_start")
                result = await lu.exec_(ctx.feedback)
                trace.hop(self.job.id, "op.exec_end")
                if isinstance(result, lifecycle.ResultWithJobs):
                    result = await followup.submit(self.submit_jobs, op, result, self.job.id)
                return result

            return await hooks.execute(lu, run)  # pre hooks, run() unless dry_run, post hooks
        finally:
            await ctx.close()

    def _lu_class(self, op_id: str) -> LUClass:
        if self._registry is None:
            from ganeti import cmdlib

            return cmdlib.lookup(op_id)
        cls = self._registry.get(op_id)
        if cls is None:
            raise errors.OpPrereqError("%s: opcode not implemented" % op_id, errors.ECODE_INVAL)
        return cls

    # --- locks ------------------------------------------------------------------
    async def _lock(
        self, qop: QueuedOpCode, op: dict[str, Any], lu_class: LUClass, ctx: OpContext
    ) -> LogicalUnit[OpCode]:
        """Build the LU (from the typed opcode of C{op}, the validated dict)
        and get its locks; a fresh LU for every attempt."""
        from ganeti.opcodes import typed

        for timeout in self._attempts:
            self._check_cancel()
            cfg = await self.wconfd.read_config()
            trace.hop(self.job.id, "op.config_read")
            lu = lu_class(typed.from_dict(copy.deepcopy(op)), ctx, cfg)
            lu.check_arguments()
            await self._resolve(lu)
            lu.expand_names()
            await lu.probe()
            if await self._lock_attempt(lu, qop, timeout):
                return lu
            await self._release()
            qop.priority = lockplan.escalate(qop.priority)
            self.log.info(
                "job {job}: no locks after {timeout}s, trying again at priority {prio}",
                job=self.job.id,
                timeout=timeout,
                prio=qop.priority,
            )
            await self._save()
        raise errors.ProgrammerError("unreachable")  # pragma: no cover

    async def _lock_attempt(self, lu: LogicalUnit[OpCode], qop: QueuedOpCode, timeout: float | None) -> bool:
        """Take every lock of C{lu} before C{timeout}; False if it ran out."""
        from ganeti.cmdlib.base import ALL_SET, LogicalUnit

        deadline = None if timeout is None else self.clock.seconds() + timeout
        refresh = type(lu).declare_locks is not LogicalUnit.declare_locks
        cfg_fresh = True
        # levels that only acquire, asked for together in one request (one wait, one round trip to WConfD)
        # when the LU computes no level from the locks held (no declare_locks of its own)
        carried: list[lockplan.LevelPlan] = []
        for level in LEVELS:
            self._check_cancel()
            if level == LEVEL_CLUSTER:
                plan = lockplan.plan_bgl(lu.uses_bgl(), bool(lu.REQ_BGL))
            else:
                adding, acquiring = level in lu.add_locks, level in lu.needed_locks
                if not adding and not acquiring:
                    continue
                if refresh and not cfg_fresh:
                    lu.cfg = await self.wconfd.read_config()
                    cfg_fresh = True
                lu.declare_locks(level)
                wanted = lu.needed_locks.get(level) if acquiring else None
                needs = lockplan.LevelNeeds(
                    adding=adding,
                    added=tuple(lu.add_locks.get(level) or ()),
                    acquiring=acquiring,
                    wanted=() if wanted is ALL_SET else tuple(wanted or ()),
                    all_members=wanted is ALL_SET,
                    shared=bool(lu.share_locks.get(level)),
                    opportunistic=bool(lu.opportunistic_locks.get(level)),
                )
                plan = lockplan.plan_level(level, needs, who=type(lu).__name__)
            if not plan.steps:
                continue
            if not refresh and all(step.kind == lockplan.ACQUIRE for step in plan.steps):
                carried.append(plan)
                continue
            if carried and not await self._acquire_levels(lu, qop, carried, deadline):
                return False
            carried = []
            for step in plan.steps:
                started = self.clock.seconds()
                if step.kind == lockplan.OPPORTUNISTIC:
                    members: Any = ALL_SET if plan.held_all else list(step.names)
                    got = await self._opportunistic(lu, level, members, step.mode, deadline)
                    taken = got is not None
                elif step.kind == lockplan.ADD:
                    taken = await self._add_locks(list(step.names), deadline)
                else:
                    taken = await self._wait_for([(name, step.mode) for name in step.names], qop, deadline)
                self._waited(qop, level, started)
                if not taken:
                    return False
            cfg_fresh = False
            if plan.opportunistic:
                lu.acquired[level] = got
            else:
                lu.acquired[level] = _held(plan)
        return not carried or await self._acquire_levels(lu, qop, carried, deadline)

    async def _acquire_levels(self, lu: LogicalUnit[OpCode], qop: QueuedOpCode, plans: list[lockplan.LevelPlan],
                              deadline: float | None) -> bool:
        """Take the locks of several levels, in one request (all or nothing, as WConfD grants every request);
        the wait counts for each of them.  False if the deadline passed first."""
        started = self.clock.seconds()
        request = [(name, step.mode) for plan in plans for step in plan.steps for name in step.names]
        taken = await self._wait_for(request, qop, deadline)
        for plan in plans:
            self._waited(qop, plan.level, started)
        if taken:
            for plan in plans:
                lu.acquired[plan.level] = _held(plan)
        return taken

    def _waited(self, qop: QueuedOpCode, level: str, started: float) -> None:
        """Add the time since C{started} to the opcode's wait for locks of
        C{level} (C{lock_wait}: seconds per level, kept in the job file and
        queried as C{oplockwait}, for RAPI's /metrics)."""
        waited = qop.extra.setdefault("lock_wait", {})
        waited[level] = round(waited.get(level, 0.0) + max(0.0, self.clock.seconds() - started), 6)

    async def _opportunistic(
        self, lu: LogicalUnit[OpCode], level: str, members: Any, mode: str, deadline: float | None
    ) -> list[str] | None:
        """Take what is free of C{members} (all of the level for ALL_SET).

        WConfD waits, pushed by lock changes, until at least the LU's count
        is free (L{OPPORTUNISTIC_WAIT} at a time when there is no deadline).
        Returns the members got, or C{None} when the deadline passed first.
        """
        from ganeti.cmdlib.base import ALL_SET, level_members

        if members is ALL_SET:
            members = sorted(level_members(lu.cfg, level))
        count = max(1, int(lu.opportunistic_locks_count.get(level, 1)))
        if not members:
            return []
        count = min(count, len(members))
        request = [("%s/%s" % (level, m), mode) for m in members]
        self._may_hold_locks = True
        while True:
            self._check_cancel()
            if deadline is None:
                timeout = OPPORTUNISTIC_WAIT
            else:
                timeout = deadline - self.clock.seconds()
                if timeout <= 0:
                    return None
            d = ensureDeferred(self.wconfd.guarded_opportunistic_lock_union(self.owner, count, request, timeout=timeout))
            self._interruptible = d
            try:
                got = await d
            except CancelledError:
                if self._cancel_requested:
                    raise _Canceled() from None
                raise
            finally:
                self._interruptible = None
            if got:
                prefix = level + "/"
                return sorted(name[len(prefix):] for name in got if name.startswith(prefix))
            if deadline is not None:
                return None

    async def _wait_for(self, request: list[tuple[str, str]], qop: QueuedOpCode, deadline: float | None) -> bool:
        """Get C{request} granted; False when the deadline passes first."""
        timeout = None
        if deadline is not None:
            timeout = deadline - self.clock.seconds()
            if timeout <= 0:
                return False
        self._may_hold_locks = True
        expired = [False]
        d = ensureDeferred(self.wconfd.acquire(self.owner, request, qop.priority, None))
        timer = None
        if timeout is not None and not d.called:

            def expire() -> None:
                expired[0] = True
                d.cancel()

            timer = self.clock.callLater(timeout, expire)
        self._interruptible = d
        self._waiting_request = (request, qop.priority)
        try:
            await d
            return True
        except (errors.LockError, CancelledError):
            # a cancelled wait ends as LockError (request withdrawn) or as
            # CancelledError (still being submitted; freed afterwards)
            if self._cancel_requested:
                raise _Canceled() from None
            if expired[0]:
                return False
            raise
        finally:
            if timer is not None and timer.active():
                timer.cancel()
            self._interruptible = None
            self._waiting_request = None

    async def _add_locks(self, names: list[str], deadline: float | None) -> bool:
        """Create C{names} and hold them; retry while others are in the way."""
        self._may_hold_locks = True
        delay = ADD_LOCKS_FIRST_DELAY
        while True:
            self._check_cancel()
            if not await self.wconfd.add_locks(self.owner, names):
                return True
            now = self.clock.seconds()
            if deadline is not None and now >= deadline:
                return False
            pause = delay if deadline is None else min(delay, deadline - now)
            sleep = deferLater(self.clock, pause, lambda: None)
            self._interruptible = sleep
            try:
                await sleep
            except CancelledError:
                raise _Canceled() from None
            finally:
                self._interruptible = None
            delay = min(delay * 2, ADD_LOCKS_MAX_DELAY)

    async def _release(self) -> None:
        if not self._may_hold_locks:
            return
        try:
            await self.wconfd.free_locks(self.owner)
            self._may_hold_locks = False
        except Exception:
            self.log.failure("job {job}: cannot release locks", job=self.job.id)

    # --- state ---------------------------------------------------------------
    async def _resolve(self, lu: LogicalUnit[OpCode]) -> None:
        """C{lu.resolve()} (name lookups, address probes); a cancel request
        stops the wait at once (the lookup's result is then ignored)."""
        d = ensureDeferred(lu.resolve())
        self._interruptible = d
        try:
            await d
        except CancelledError:
            raise _Canceled() from None
        finally:
            self._interruptible = None
        self._check_cancel()

    def _check_cancel(self) -> None:
        if self._cancel_requested:
            raise _Canceled()

    def _timestamp(self) -> model.Timestamp:
        return model.timestamp(self.clock.seconds())

    def _save(self) -> Deferred:
        # a job file never shows a final status without its end timestamp
        lifecycle.finalize(self.job, self._timestamp())
        return self._saver.request()

    def _feedback(self, index: int, message: Any, kind: str = lifecycle.ELOG_MESSAGE) -> Deferred:
        """Log C{message}; the job file gets it at the next turn of the
        reactor, together with other lines logged meanwhile.  The LU does
        not wait for the write (intermediate writes are not durable anyway,
        and a burst of lines costs one write instead of one each)."""
        self.job.add_log(index, message, kind, when=self.clock.seconds())
        self._saver.request_soon()
        return succeed(None)

    def _fail(self, index: int, exc: BaseException) -> None:
        """Opcode C{index} failed with C{exc}; every later one fails too."""
        later = errors.encode(errors.OpExecError(PRECEDING_FAILED))
        lifecycle.fail(self.job, _encode(exc), self._timestamp(), start=index, later=later)

    def _cancel_from(self, index: int) -> None:
        lifecycle.cancel(self.job, self._timestamp(), start=index, reason=self._cancel_reason)


def _encode(exc: BaseException) -> list[Any]:
    """Ganeti's C{[ClassName, [args]]}; foreign exceptions become OpExecError."""
    if isinstance(exc, errors.GenericError):
        return errors.encode(exc)
    return errors.encode(errors.OpExecError(str(exc) or type(exc).__name__))
