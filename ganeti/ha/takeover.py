"""The take-over steps of a master failover (I/O; the decisions are L{ganeti.ha.failover}'s).

Both C{gnt-cluster master-failover} (L{ganeti.client.cluster_master}) and
NodeD's automatic failover (L{ganeti.ha.elector}, for a candidate elected
under an epoch) run the same steps on the node that is to become master,
following Ganeti's (spec/ha.md section 1) with what Ganeti lacks:

 1. Ganeti's checks: not the master already, a master candidate; unless
    C{no_voting}, a strict majority of nodes answers C{master_node_name}
    and the most voted master is the one this node believes in.
 2. Newest state first, from every candidate (the old master too, while
    it is still the master): a newer C{config.data} (by the epoch of the
    master that wrote it, then by serial: L{ganeti.ha.epoch}), newer HA
    parameters (C{ha.data}, ranked alike), a higher queue serial
    and every job file further along elsewhere are fetched
    (C{failover_status}, C{failover_read}).
 3. Fencing: the master epoch is raised to one above every epoch a node
    reports, on a majority of nodes (C{epoch_claim}, this one included; a
    node gives an epoch once): the old master's writes are refused from
    then on, and its daemons stop when they learn it.  Then the newest
    state again, from the other candidates (a majority must have answered,
    unless C{no_voting}): what the old master acknowledged meanwhile is
    on a majority.
 4. The old master: C{node_deactivate_master_ip}, C{node_stop_master}
    (failures are warnings: it may be dead).
 5. The config names this node master (serial raised); jobs the old master
    was running end in error ("master failover"), queued jobs stay queued;
    config.data and ssconf go to the other nodes.
 6. C{node_start_master_daemons} here, then C{node_activate_master_ip}.

A candidate elected by the automatic failover skips steps 1 and 2: its
voters recorded its epoch when they voted (the old master is fenced on
them already), so it claims the epoch at once (step 3) and reads the newest
state from a majority of the candidates after it.

The steps report through a L{Progress}: what was done (C{step}), what went
wrong without stopping them (C{warn}) and why they stopped (C{fail}); the
command line prints them, NodeD logs them.  L{failover} runs them for
C{master-failover}, L{elected_failover} for an elected candidate; both
return whether this node is now the master.
"""

from __future__ import annotations

import os
import time
from typing import Any, Protocol

import attrs
import orjson
from twisted.internet.defer import Deferred, gatherResults
from twisted.logger import Logger

from ganeti import ports, serializer
from ganeti.ha import params as ha_params
from ganeti.ha.epoch import read_epoch, write_config_epoch
from ganeti.ha.failover import (
    FAILOVER_REASON,
    FailoverRefused,
    NodeState,
    answered,
    check_candidate,
    fenced,
    majority,
    master_vote,
    newest_state,
)
from ganeti.paths import Paths
from ganeti.rpc import procedures

_log = Logger()


class _Timer:
    """Where a take-over's time goes: one log line per phase, seconds since the start and since the phase before."""

    def __init__(self) -> None:
        self.start = self.last = time.monotonic()
        _log.info("take-over timing: started at {wall:.3f}", wall=time.time())

    def __call__(self, phase: str) -> None:
        now = time.monotonic()
        _log.info("take-over timing: {phase} at {total:.2f}s (+{step:.2f}s)", phase=phase, total=now - self.start,
                  step=now - self.last)
        self.last = now

#: Seconds the old master gets to stop, and this node to start, its daemons.
DAEMONS_TIMEOUT = 90.0
#: Seconds a node gets to hand out the newer files it holds (C{failover_read}) and to take the new
#: config and ssconf: a node that stops answering (frozen, cut off) holds the take-over up no longer.
FETCH_TIMEOUT = 30.0
PUSH_TIMEOUT = 15.0
#: Seconds a node gets to answer the quick calls (votes, states, the epoch):
#: a node that does not answer in time counts as down (it may be frozen).
QUICK_TIMEOUT = 5.0
#: Seconds the take-over waits, once this node's daemons started, for the
#: old master to confirm its daemons stopped: they are fenced by then, so
#: their stop (a daemon's kill timeout, a slow machine) holds nothing up, and
#: the take-over does not wait for it (a late answer is logged).
STOP_GRACE = 0.0
#: Seconds the nodes still silent get, once a majority of candidates holds
#: the new config (and of nodes the new ssconf), before the take-over goes on
#: (WConfD pushes to the others once it runs).
PUSH_GRACE = 1.0


class Progress(Protocol):
    """Where the take-over steps report (one line of text each, or a few)."""

    def step(self, text: str) -> None:
        """A step done (C{gnt-cluster master-failover} prints it on stdout)."""

    def warn(self, text: str) -> None:
        """Something went wrong; the steps go on (printed on stderr)."""

    def fail(self, text: str) -> None:
        """Why the steps stopped: this node is not the master (printed on stderr)."""


@attrs.frozen
class Cluster:
    """This node's view of the cluster (ssconf and node identity).

    @ivar rpc_port: the node daemons' port (C{--rpc-port})
    @ivar quick_timeout: seconds a node gets to answer the quick calls
    @ivar grace: seconds the nodes still silent get in a quick round once it has
        what it needs (C{None}: the RPC client's default); shorter in an
        elected failover, whose old master is known to be silent
    """

    paths: Paths
    me: str
    master: str
    candidates: list[str]
    addresses: dict[str, str]
    rpc_port: int = ports.NODED
    quick_timeout: float = QUICK_TIMEOUT
    grace: float | None = None


def view_of(paths: Paths, rpc_port: int = ports.NODED, quick_timeout: float = QUICK_TIMEOUT) -> Cluster:
    """This node's view of the cluster, from its ssconf and identity."""
    from ganeti import daemons, ssconf

    store = ssconf.SimpleStore(paths)
    ips = store.get_node_primary_ips()
    addresses = {name: ips[name] for name in store.get_node_list() if name in ips}
    return Cluster(paths, daemons.read_node_identity(paths)["name"], store.get_master_node(),
                   store.get_master_candidates(), addresses, rpc_port, quick_timeout)


def _rpc(reactor: Any, view: Cluster, epoch: int | None) -> Any:
    from ganeti.rpc import RpcClient

    return RpcClient.from_paths(reactor, view.paths, port=view.rpc_port, epoch=epoch)


async def elected_failover(reactor: Any, progress: Progress, view: Cluster, epoch: int) -> bool:
    """The failover of a candidate that won the automatic failover's election
    for C{epoch} (L{ganeti.ha.elector}): the steps of C{master-failover},
    with voting, under the epoch won (the voters recorded it for this node)."""
    try:
        check_candidate(view.me, view.master, view.candidates)
    except FailoverRefused as e:
        progress.fail("Failure: prerequisites not met for this operation:\n%s" % e)
        return False
    return await failover(reactor, progress, view, False, won_epoch=epoch)


async def failover(reactor: Any, progress: Progress, view: Cluster, no_voting: bool, *,
                   won_epoch: int | None = None) -> bool:
    """The steps of C{gnt-cluster master-failover [--no-voting]} (see the
    module docstring); C{won_epoch}: those of a candidate elected for it.

    @return: whether this node is now the master
    """
    timer = _Timer()
    if won_epoch is not None:
        return await _elected(reactor, progress, view, won_epoch, timer)
    plain = _rpc(reactor, view, None)
    try:
        try:
            states = await _vote(progress, plain, view, no_voting)
            timer("vote and states")
            # what only the old master may hold yet, fetched while it is still the master: once fenced,
            # its own (local) writes, a shutdown's or an orphaned job's, are no state to start from
            await _catch_up(progress, plain, view, {n: s for n, s in states.items() if n in view.candidates})
        except FailoverRefused as e:
            progress.fail("Failure: prerequisites not met for this operation:\n%s" % e)
            return False
    finally:
        await plain.close()
    epoch = max(state.epoch for state in states.values()) + 1
    fenced = _rpc(reactor, view, epoch)
    try:
        # fencing: from here on the old master can make no change a majority holds,
        # so the newest state gathered next cannot be overtaken
        timer("catch-up before the fencing")
        accepted = await _raise_epoch(progress, fenced, view, no_voting, epoch)
        if accepted is None:
            return False
        timer("epoch claim")
        try:
            await _newest_state_first(progress, fenced, view, no_voting, old_master_answered=view.master in states)
        except FailoverRefused as e:
            progress.fail("Failure: %s" % e)
            return False
        timer("newest state after the fencing")
        return await _take_over(progress, fenced, view, no_voting, accepted, epoch, reactor, timer)
    finally:
        await fenced.close()


async def _elected(reactor: Any, progress: Progress, view: Cluster, epoch: int, timer: Any) -> bool:
    """The steps of a candidate elected for C{epoch}.  Its voters, a strict
    majority of the nodes that lost the master, recorded the epoch for it
    when they voted: the old master is fenced on them already, so there is
    neither a vote on its name nor a state to fetch from it before the
    fencing.  The epoch is claimed on every node that answers (the voters
    again, the others for the first time: the same majority check as a
    manual failover's), then the newest state is read from a majority of
    the candidates, and the take-over goes on."""
    fenced = _rpc(reactor, view, epoch)
    try:
        accepted = await _raise_epoch(progress, fenced, view, False, epoch)
        if accepted is None:
            return False
        timer("epoch claim")
        try:
            # the old master may be asked now: a majority of the candidates holds the epoch, so it acknowledges
            # nothing more, and a majority answering now holds all it did (its NodeD answers if it is only stuck)
            states = await _newest_state_first(progress, fenced, view, False, old_master_answered=False,
                                               old_master_now=True)
        except FailoverRefused as e:
            progress.fail("Failure: %s" % e)
            return False
        seen = max(state.epoch for state in states.values())
        if seen > epoch:
            progress.fail("Failure: a node has seen master epoch %d, above the epoch %d this node was elected for"
                          % (seen, epoch))
            return False
        timer("newest state after the fencing")
        return await _take_over(progress, fenced, view, False, accepted, epoch, reactor, timer)
    finally:
        await fenced.close()


async def _states(progress: Progress, rpc: Any, nodes: dict[str, str], timeout: float,
                  enough: Any, grace: float | None = None) -> dict[str, NodeState]:
    answers = await rpc.run(nodes, procedures.failover_status.call().within(timeout), enough=enough, grace=grace)
    states = {}
    for name, result in answers.items():
        if result.success:
            try:
                states[name] = NodeState.from_payload(result.payload)
            except (TypeError, ValueError) as e:
                progress.warn("Warning: %s answered failover_status wrongly: %s" % (name, e))
    return states


async def _vote(progress: Progress, rpc: Any, view: Cluster, no_voting: bool) -> dict[str, NodeState]:
    """Ganeti's voting; the state of every node that answers.

    Both rounds only read, so they are asked at once (one round trip, and one
    grace for a silent node, instead of two); the vote still decides before
    anything is written."""
    enough = answered(len(view.addresses), [view.me])
    voted = None if no_voting else Deferred.fromCoroutine(rpc.run(
        view.addresses, procedures.master_node_name.call().within(view.quick_timeout), enough=enough,
        grace=view.grace))
    asked = Deferred.fromCoroutine(_states(progress, rpc, view.addresses, view.quick_timeout, enough, view.grace))
    if voted is not None:
        try:
            answers = await voted
            master_vote({name: r.payload if r.success and isinstance(r.payload, str) else None
                         for name, r in answers.items()}, view.master)
        except BaseException:
            asked.addErrback(lambda _failure: None)  # the refusal is the outcome; the states are not needed
            raise
    states = await asked
    if view.me not in states:
        raise FailoverRefused("this node's ganeti-noded does not answer")
    return states


async def _raise_epoch(progress: Progress, rpc: Any, view: Cluster, no_voting: bool, epoch: int) -> list[str] | None:
    """Claim C{epoch} for this node on every node that answers (each gives an
    epoch once: of two concurrent failovers at most one gets a majority);
    the nodes that took it (C{None}: not this one, or no majority without
    C{--no-voting})."""
    raised = await rpc.run(view.addresses, procedures.epoch_claim.call(epoch, view.me).within(view.quick_timeout),
                           enough=fenced(len(view.addresses), view.candidates, view.me), grace=view.grace)
    accepted = sorted(name for name, r in raised.items() if r.success)
    if view.me not in accepted or (not no_voting and not majority(len(accepted), len(raised))):
        progress.fail("Failure: could not raise the master epoch to %d on a majority of nodes (accepted: %s)"
                % (epoch, ", ".join(accepted) or "none"))
        return None
    progress.step("Master epoch %d recorded on %d of %d nodes" % (epoch, len(accepted), len(raised)))
    return accepted


async def _newest_state_first(progress: Progress, rpc: Any, view: Cluster, no_voting: bool, *,
                              old_master_answered: bool, old_master_now: bool = False) -> dict[str, NodeState]:
    """After the fencing: the newest state of the other candidates (a
    majority, counting the old master if it answered before the fencing);
    C{old_master_now}: the old master is asked too, and counts if it answers
    (an elected candidate's: it reads no state before the fencing, and a
    majority of the candidates answering after it holds everything the old
    master acknowledged)."""
    candidates = {name: view.addresses[name] for name in view.candidates
                  if name in view.addresses and (name != view.master or old_master_now)}
    total = len(candidates) + (1 if view.master in view.candidates and not old_master_now else 0)
    also = 1 if old_master_answered and view.master in view.candidates else 0
    # enough once a majority of the candidates answered now, the old master's answer from before the fencing
    # not counted: it may have acknowledged more since, with a candidate that is only slow to answer
    states = await _states(progress, rpc, candidates, view.quick_timeout, answered(total, [view.me]), view.grace)
    if view.me not in states:
        raise FailoverRefused("this node's ganeti-noded does not answer")
    count = len(states) + also
    if not no_voting and not majority(count, total):
        raise FailoverRefused("only %d of %d master candidates answered (%s); the newest config and job queue"
                              " cannot be known without a majority" % (count, total, ", ".join(sorted(states))))
    await _catch_up(progress, rpc, view, states)
    return states


async def _catch_up(progress: Progress, rpc: Any, view: Cluster, states: dict[str, NodeState]) -> None:
    """Fetch what a node of C{states} holds newer than this one."""
    plan = newest_state(view.me, states)
    if plan.config_from is not None:
        await _fetch(rpc, view, plan.config_from, ["config.data"])
        progress.step("Fetched the newer config.data (serial %d) from %s"
                % (states[plan.config_from].config_serial, plan.config_from))
    if plan.ha_from is not None:
        await _fetch(rpc, view, plan.ha_from, [ha_params.FILE_NAME])
        progress.step("Fetched the newer HA parameters (serial %d, epoch %d) from %s"
                      % (states[plan.ha_from].ha[1], states[plan.ha_from].ha[0], plan.ha_from))
    if plan.serial_from is not None:
        await _fetch(rpc, view, plan.serial_from, ["serial"])
    for name, jobs in plan.jobs.items():
        await _fetch(rpc, view, name, jobs)
        progress.step("Fetched %d newer job file(s) from %s" % (len(jobs), name))


async def _fetch(rpc: Any, view: Cluster, node: str, names: list[str]) -> None:
    from ganeti.rpc import wire

    result = await rpc.run_one(node, view.addresses[node], procedures.failover_read.call(names).within(FETCH_TIMEOUT))
    if result.failed:
        raise FailoverRefused("cannot fetch the newer state from %s: %s" % (node, result.fail_msg))
    for name, value in result.payload.items():
        if name not in names or value is None:
            continue
        data = wire.decompress(value)
        if name == "config.data":
            serializer.write_file(view.paths.config_data, data, mode=0o640)
        elif name == ha_params.FILE_NAME:
            try:
                ha_params.accept(view.paths, ha_params.HaParams.from_dict(serializer.loads(data)))
            except ValueError:  # replaced by a damaged copy since it answered: ours stays
                continue
        else:
            os.makedirs(view.paths.queue_dir, exist_ok=True)
            serializer.write_file(os.path.join(view.paths.queue_dir, name), data, mode=0o640)


def _at_most(clock: Any, d: Deferred[Any], seconds: float) -> Deferred[Any]:
    """What C{d} fires with, or C{None} if it has not fired within
    C{seconds} (0: by the next turn of the reactor); C{d} goes on (the
    callbacks added to it later get its late result)."""
    if d.called:
        return d
    result: Deferred[Any] = Deferred()
    timer = clock.callLater(seconds, result.callback, None)

    def fired(value: Any) -> Any:
        if timer.active():
            timer.cancel()
            result.callback(value)
        return value  # for the callbacks added later (the late answer's log)

    d.addBoth(fired)
    return result


async def _take_over(progress: Progress, rpc: Any, view: Cluster, no_voting: bool, accepted: list[str],
                     epoch: int, clock: Any, timer: Any = lambda _phase: None) -> bool:
    from ganeti import ssconf
    from ganeti.objects import ConfigData
    from ganeti.rpc import wire

    config = ConfigData.from_json(serializer.read_file(view.paths.config_data))
    by_name = {node.name: node for node in config.nodes.values()}
    params = master_params(config)
    warnings = []
    stopping: Any = None
    deactivated: Any = None
    if view.master not in accepted:
        warnings.append("The old master %s did not answer: its daemons could not be stopped; they stop"
                        " themselves when they learn of the new master epoch" % view.master)
    else:
        # the old master's IP goes, then its daemons stop, while this node writes and pushes the new config
        # and starts its own daemons: fenced (a majority holds the new epoch), they can make no change a
        # majority holds, and waiting for them would add their shutdown (or a stuck daemon's kill timeout)
        # to the failover; the IP is awaited (bounded) before this node's comes up
        deactivated = Deferred.fromCoroutine(rpc.run_one(
            view.master, view.addresses[view.master],
            procedures.node_deactivate_master_ip.call(params, False).within(view.quick_timeout)))
        stopping = Deferred()

        def then_stop(done: Any) -> Any:
            Deferred.fromCoroutine(rpc.run_one(view.master, view.addresses[view.master],
                                               procedures.node_stop_master.call().within(DAEMONS_TIMEOUT))
                                   ).chainDeferred(stopping)
            return done

        deactivated.addCallback(then_stop)
    me = by_name[view.me]
    when = time.time()
    cluster = attrs.evolve(config.cluster, master_node=me.uuid, mtime=when)
    config = attrs.evolve(config, cluster=cluster, serial_no=config.serial_no + 1, mtime=when)  # (serial, mtime): new
    data = config.to_json()
    _settle_local_state(view.paths, data, lambda line: progress.warn("Warning: %s" % line))
    write_config_epoch(view.paths, epoch)  # this config is the new master's, written under its epoch
    ha_params.record_failover(view.paths, read_epoch(view.paths), view.me, view.master)  # for gnt-cluster info
    values = ssconf.compute(config)
    ssconf.write_files(view.paths, values)
    # the nodes that just answered; WConfD retries the others once it runs
    others = {name: address for name, address in view.addresses.items() if name != view.me and name in accepted}
    candidates = {name: others[name] for name in view.candidates if name in others}
    details = wire.file_details(wire.virtual_path(view.paths.root, view.paths.config_data), data, mode=0o640)
    # a majority of the candidates (this one included) holding the new config is enough to go on
    mine = 1 if view.me in view.candidates else 0
    pushed, written = await gatherResults([
        Deferred.fromCoroutine(rpc.run(candidates, procedures.upload_file.call(details).within(PUSH_TIMEOUT),
                                       enough=answered(len(view.candidates), also=mine), grace=PUSH_GRACE)),
        Deferred.fromCoroutine(rpc.run(others, procedures.write_ssconf_files.call(values).within(PUSH_TIMEOUT),
                                       enough=answered(len(view.addresses), also=1), grace=PUSH_GRACE))])
    for name, result in [*pushed.items(), *written.items()]:
        if result.failed:
            warnings.append("%s did not take the new configuration yet: %s" % (name, result.fail_msg))
    timer("config and ssconf pushed")
    started = await rpc.run_one(view.me, view.addresses[view.me],
                                procedures.node_start_master_daemons.call(no_voting).within(DAEMONS_TIMEOUT))
    timer("master daemons started")
    if stopping is not None:
        # fenced, the old master's daemons can change nothing: its answer is waited for only briefly
        done = await _at_most(clock, stopping, STOP_GRACE)
        if done is None:
            progress.step("The old master %s is stopping its master daemons (fenced, they can change nothing;"
                          " check there with 'ganeti-daemons status')" % view.master)
            stopping.addBoth(_late_stop, view.master)
        elif done.failed:
            warnings.append("Could not disable the master role on the old master %s, please disable manually: %s"
                            % (view.master, done.fail_msg))
    if deactivated is not None:
        done = await deactivated
        if done.failed:
            warnings.insert(0, "Could not disable the master IP: %s" % done.fail_msg)
    for warning in warnings:
        progress.warn(warning)
    if started.failed:
        progress.fail("Could not start the master daemons on %s: %s" % (view.me, started.fail_msg))
        return False
    done = await rpc.run_one(view.me, view.addresses[view.me], procedures.node_activate_master_ip.call(params, False))
    timer("master IP")
    if done.failed:
        progress.fail("The master IP did not come up: %s" % done.fail_msg)
        return False
    return True


def _late_stop(done: Any, master: str) -> None:
    """The old master's answer to C{node_stop_master}, come after the take-over ended: logged."""
    if getattr(done, "failed", True):
        _log.warn("take-over: the old master {master} could not stop its master daemons: {why}", master=master,
                  why=getattr(done, "fail_msg", done))
    else:
        _log.info("take-over: the old master {master} stopped its master daemons", master=master)


def master_params(config: Any) -> dict[str, Any]:
    """The C{master_params} of the master IP RPCs, from the config."""
    cluster = config.cluster
    return {"uuid": cluster.master_node, "ip": cluster.master_ip, "netmask": cluster.master_netmask,
            "netdev": cluster.master_netdev, "ip_family": getattr(cluster, "primary_ip_family", 2)}


def _may_need_settling(data: Any) -> bool:
    """Whether a job file's content may be of a job that is not finished,
    or queued with a process (read from its opcodes' statuses: building the
    job is what takes the time with thousands of files)."""
    from ganeti.jobs import lifecycle, model

    if not isinstance(data, dict) or not isinstance(data.get("ops"), list):
        return True  # the full parse decides (and skips what is no job)
    statuses = [op.get("status", model.QUEUED) if isinstance(op, dict) else None for op in data["ops"]]
    known = [status for status in statuses if isinstance(status, str)]
    if len(known) != len(statuses):
        return True
    status = lifecycle.job_status(known)
    return status not in model.FINALIZED and (status != model.QUEUED or bool(data.get("livelock")))


def _settle_local_state(paths: Paths, data: bytes, out: Any = None) -> None:
    """Write the new config; forget what a past mastership of this node
    left (config journal, locks, WConfD's recorded answers, job processes
    still running); fail the jobs the old master ran.

    A job process of a past mastership here (cut off by a partition or a
    pause before the old master's C{node_stop_master} reached it) would
    otherwise reconnect to this node's new WConfD, resend the config change
    it was waiting for, and be answered from the recorded answers of that
    past mastership although its change is not in the config taken over:
    a success without its effect.  The processes are killed and the answers
    dropped (they answer requests of owners this WConfD never had)."""
    from ganeti.jobs import model, orphans, replicas

    orphans.kill_orphans(paths, out or (lambda _line: None))
    for stale in (paths.config_journal, paths.config_journal + ".old", paths.locks_data, paths.locks_journal,
                  paths.wconfd_requests):
        try:
            os.unlink(stale)
        except FileNotFoundError:
            pass
    serializer.write_file(paths.config_data, data, mode=0o640)
    if not os.path.isdir(paths.queue_dir):
        return
    for name in sorted(os.listdir(paths.queue_dir)):
        if replicas.job_id_of(name) is None:
            continue
        path = os.path.join(paths.queue_dir, name)
        try:
            content = orjson.loads(serializer.read_file(path))
            if not _may_need_settling(content):  # most of a queue: finished jobs, judged without building them
                continue
            job = model.QueuedJob.from_dict(content)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if job.finalized or (job.status == model.QUEUED and not job.livelock):
            continue
        if job.status != model.QUEUED:  # it ran on the old master
            job.fail(FAILOVER_REASON)
        job.livelock = job.process_id = None  # a queued one was spawned but never confirmed: it runs here
        serializer.write_file(path, job.to_json(), mode=0o640)


__all__ = ["Cluster", "Progress", "elected_failover", "failover", "master_params", "view_of"]
