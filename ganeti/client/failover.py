"""gnt-cluster master-failover, master-ping, activate-master-ip, deactivate-master-ip.

C{master-failover} runs on the master candidate that is to become master
and follows Ganeti's steps (spec/ha.md section 1) with what Ganeti lacks:

 1. Ganeti's checks: not the master already, a master candidate; unless
    C{--no-voting}, a strict majority of nodes answers C{master_node_name}
    and the most voted master is the one this node believes in.
 2. Newest state first, from every candidate (the old master too, while
    it is still the master): a newer C{config.data}, a higher queue serial
    and every job file further along elsewhere are fetched
    (C{failover_status}, C{failover_read}).
 3. Fencing: the master epoch is raised to one above every epoch a node
    reports, on a majority of nodes (C{epoch_claim}, this one included; a
    node gives an epoch once): the old master's writes are refused from
    then on, and its daemons stop when they learn it.  Then the newest
    state again, from the other candidates (a majority must have answered,
    unless C{--no-voting}): what the old master acknowledged meanwhile is
    on a majority.
 4. The old master: C{node_deactivate_master_ip}, C{node_stop_master}
    (failures are warnings: it may be dead).
 5. The config names this node master (serial raised); jobs the old master
    was running end in error ("master failover"), queued jobs stay queued;
    config.data and ssconf go to the other nodes.
 6. C{node_start_master_daemons} here, then C{node_activate_master_ip}.

L{elected_failover} runs the same steps inside NodeD for a candidate
elected by the automatic failover (L{ganeti.noded.election}), under the
epoch it won, without the vote on the master's name (its voters are a
majority that lost the master).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any, Callable, Coroutine

import attrs

from ganeti import ha_params, ports, serializer
from ganeti.client import prompt
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Context
from ganeti.epoch import read_epoch
from ganeti.failover import (
    FAILOVER_REASON,
    FailoverRefused,
    NodeState,
    check_candidate,
    majority,
    master_vote,
    newest_state,
)
from ganeti.paths import Paths
from ganeti.rpc import procedures

NO_VOTING_TEXT = ("This will perform the failover even if most other nodes are down, or if this node is outdated."
                  " This is dangerous as it can lead to a non-consistent cluster. Check the gnt-cluster(8) man page"
                  " before proceeding. Continue?")
#: Seconds the old master gets to stop, and this node to start, its daemons.
DAEMONS_TIMEOUT = 90.0
#: Seconds a node gets to answer the quick calls (votes, states, the epoch):
#: a node that does not answer in time counts as down (it may be frozen).
QUICK_TIMEOUT = 5.0


def _react(main: Callable[[Any], Coroutine[Any, Any, int]]) -> int:
    """Run C{main(reactor)} on the global reactor; its exit code."""
    from twisted.internet import reactor
    from twisted.internet.defer import Deferred

    outcome: list[Any] = []
    d = Deferred.fromCoroutine(main(reactor))
    d.addBoth(outcome.append)
    d.addBoth(lambda _: reactor.stop())
    if not outcome:
        reactor.run(installSignalHandlers=False)  # type: ignore[call-arg]
    result = outcome[0]
    if hasattr(result, "raiseException"):
        result.raiseException()
    return int(result)


@attrs.frozen
class Cluster:
    """This node's view of the cluster (ssconf and node identity).

    @ivar rpc_port: the node daemons' port (C{--rpc-port})
    @ivar quick_timeout: seconds a node gets to answer the quick calls
    """

    paths: Paths
    me: str
    master: str
    candidates: list[str]
    addresses: dict[str, str]
    rpc_port: int = ports.NODED
    quick_timeout: float = QUICK_TIMEOUT


def view_of(paths: Paths, rpc_port: int = ports.NODED, quick_timeout: float = QUICK_TIMEOUT) -> Cluster:
    """This node's view of the cluster, from its ssconf and identity."""
    from ganeti import daemons, ssconf

    store = ssconf.SimpleStore(paths)
    ips = store.get_node_primary_ips()
    addresses = {name: ips[name] for name in store.get_node_list() if name in ips}
    return Cluster(paths, daemons.read_node_identity(paths)["name"], store.get_master_node(),
                   store.get_master_candidates(), addresses, rpc_port, quick_timeout)


def _view(ctx: Context, rpc_port: int = ports.NODED) -> Cluster:
    return view_of(Paths.from_option(ctx.root), rpc_port)


def _rpc(reactor: Any, view: Cluster, epoch: int | None) -> Any:
    from ganeti.rpc import RpcClient

    return RpcClient.from_paths(reactor, view.paths, port=view.rpc_port, epoch=epoch)


def master_failover(ctx: Context, opts: argparse.Namespace) -> int:
    view = _view(ctx, opts.rpc_port)
    try:
        check_candidate(view.me, view.master, view.candidates)
    except FailoverRefused as e:
        ctx.err("Failure: prerequisites not met for this operation:\n%s" % e)
        return EXIT_FAILURE
    if opts.no_voting and not opts.yes_do_it and not prompt.ask_user(NO_VOTING_TEXT):
        return EXIT_FAILURE
    started = time.monotonic()
    code = _react(lambda reactor: _failover(reactor, ctx, view, opts.no_voting))
    if code == EXIT_SUCCESS:
        ctx.out("Master failover to %s done in %.1fs" % (view.me, time.monotonic() - started))
    return code


async def elected_failover(reactor: Any, ctx: Context, view: Cluster, epoch: int) -> int:
    """The failover of a candidate that won the automatic failover's election
    for C{epoch} (L{ganeti.noded.election}): the steps of C{master-failover},
    with voting, under the epoch won (the voters recorded it for this node)."""
    try:
        check_candidate(view.me, view.master, view.candidates)
    except FailoverRefused as e:
        ctx.err("Failure: prerequisites not met for this operation:\n%s" % e)
        return EXIT_FAILURE
    return await _failover(reactor, ctx, view, False, won_epoch=epoch)


async def _failover(reactor: Any, ctx: Context, view: Cluster, no_voting: bool, *,
                    won_epoch: int | None = None) -> int:
    plain = _rpc(reactor, view, None)
    try:
        try:
            # an elected candidate's voters are a majority that lost the master: no vote on its name
            states = await _vote(ctx, plain, view, no_voting or won_epoch is not None)
            # what only the old master may hold yet, fetched while it is still the master: once fenced,
            # its own (local) writes, a shutdown's or an orphaned job's, are no state to start from
            await _catch_up(ctx, plain, view, {n: s for n, s in states.items() if n in view.candidates})
        except FailoverRefused as e:
            ctx.err("Failure: prerequisites not met for this operation:\n%s" % e)
            return EXIT_FAILURE
    finally:
        await plain.close()
    epoch = max(state.epoch for state in states.values()) + 1
    if won_epoch is not None:
        if epoch - 1 > won_epoch:
            ctx.err("Failure: a node has seen master epoch %d, above the epoch %d this node was elected for"
                    % (epoch - 1, won_epoch))
            return EXIT_FAILURE
        epoch = won_epoch
    fenced = _rpc(reactor, view, epoch)
    try:
        # fencing: from here on the old master can make no change a majority holds,
        # so the newest state gathered next cannot be overtaken
        accepted = await _raise_epoch(ctx, fenced, view, no_voting, epoch)
        if accepted is None:
            return EXIT_FAILURE
        try:
            await _newest_state_first(ctx, fenced, view, no_voting, old_master_answered=view.master in states)
        except FailoverRefused as e:
            ctx.err("Failure: %s" % e)
            return EXIT_FAILURE
        return await _take_over(ctx, fenced, view, no_voting, accepted)
    finally:
        await fenced.close()


async def _states(ctx: Context, rpc: Any, nodes: dict[str, str], timeout: float) -> dict[str, NodeState]:
    answers = await rpc.run(nodes, procedures.failover_status.call().within(timeout))
    states = {}
    for name, result in answers.items():
        if result.success:
            try:
                states[name] = NodeState.from_payload(result.payload)
            except (TypeError, ValueError) as e:
                ctx.err("Warning: %s answered failover_status wrongly: %s" % (name, e))
    return states


async def _vote(ctx: Context, rpc: Any, view: Cluster, no_voting: bool) -> dict[str, NodeState]:
    """Ganeti's voting; the state of every node that answers."""
    if not no_voting:
        answers = await rpc.run(view.addresses, procedures.master_node_name.call().within(view.quick_timeout))
        master_vote({name: r.payload if r.success and isinstance(r.payload, str) else None
                     for name, r in answers.items()}, view.master)
    states = await _states(ctx, rpc, view.addresses, view.quick_timeout)
    if view.me not in states:
        raise FailoverRefused("this node's ganeti-noded does not answer")
    return states


async def _raise_epoch(ctx: Context, rpc: Any, view: Cluster, no_voting: bool, epoch: int) -> list[str] | None:
    """Claim C{epoch} for this node on every node that answers (each gives an
    epoch once: of two concurrent failovers at most one gets a majority);
    the nodes that took it (C{None}: not this one, or no majority without
    C{--no-voting})."""
    raised = await rpc.run(view.addresses, procedures.epoch_claim.call(epoch, view.me).within(view.quick_timeout))
    accepted = sorted(name for name, r in raised.items() if r.success)
    if view.me not in accepted or (not no_voting and not majority(len(accepted), len(raised))):
        ctx.err("Failure: could not raise the master epoch to %d on a majority of nodes (accepted: %s)"
                % (epoch, ", ".join(accepted) or "none"))
        return None
    ctx.out("Master epoch %d recorded on %d of %d nodes" % (epoch, len(accepted), len(raised)))
    return accepted


async def _newest_state_first(ctx: Context, rpc: Any, view: Cluster, no_voting: bool, *,
                              old_master_answered: bool) -> None:
    """After the fencing: the newest state of the other candidates (a
    majority, counting the old master if it answered before the fencing)."""
    candidates = {name: view.addresses[name] for name in view.candidates
                  if name in view.addresses and name != view.master}
    states = await _states(ctx, rpc, candidates, view.quick_timeout)
    if view.me not in states:
        raise FailoverRefused("this node's ganeti-noded does not answer")
    total = len(candidates) + (1 if view.master in view.candidates else 0)
    answered = len(states) + (1 if old_master_answered and view.master in view.candidates else 0)
    if not no_voting and not majority(answered, total):
        raise FailoverRefused("only %d of %d master candidates answered (%s); the newest config and job queue"
                              " cannot be known without a majority" % (answered, total, ", ".join(sorted(states))))
    await _catch_up(ctx, rpc, view, states)


async def _catch_up(ctx: Context, rpc: Any, view: Cluster, states: dict[str, NodeState]) -> None:
    """Fetch what a node of C{states} holds newer than this one."""
    plan = newest_state(view.me, states)
    if plan.config_from is not None:
        await _fetch(rpc, view, plan.config_from, ["config.data"])
        ctx.out("Fetched the newer config.data (serial %d) from %s"
                % (states[plan.config_from].config_serial, plan.config_from))
    if plan.serial_from is not None:
        await _fetch(rpc, view, plan.serial_from, ["serial"])
    for name, jobs in plan.jobs.items():
        await _fetch(rpc, view, name, jobs)
        ctx.out("Fetched %d newer job file(s) from %s" % (len(jobs), name))


async def _fetch(rpc: Any, view: Cluster, node: str, names: list[str]) -> None:
    from ganeti.rpc import wire

    result = await rpc.run_one(node, view.addresses[node], procedures.failover_read.call(names))
    if result.failed:
        raise FailoverRefused("cannot fetch the newer state from %s: %s" % (node, result.fail_msg))
    for name, value in result.payload.items():
        if name not in names or value is None:
            continue
        data = wire.decompress(value)
        if name == "config.data":
            serializer.write_file(view.paths.config_data, data, mode=0o640)
        else:
            os.makedirs(view.paths.queue_dir, exist_ok=True)
            serializer.write_file(os.path.join(view.paths.queue_dir, name), data, mode=0o640)


async def _take_over(ctx: Context, rpc: Any, view: Cluster, no_voting: bool, accepted: list[str]) -> int:
    from ganeti import ssconf
    from ganeti.objects import ConfigData
    from ganeti.rpc import wire

    config = ConfigData.from_json(serializer.read_file(view.paths.config_data))
    by_name = {node.name: node for node in config.nodes.values()}
    params = _master_params(config)
    warnings = []
    if view.master not in accepted:
        warnings.append("The old master %s did not answer: its daemons could not be stopped; they stop"
                        " themselves when they learn of the new master epoch" % view.master)
    else:
        done = await rpc.run_one(view.master, view.addresses[view.master],
                                 procedures.node_deactivate_master_ip.call(params, False).within(view.quick_timeout))
        if done.failed:
            warnings.append("Could not disable the master IP: %s" % done.fail_msg)
        done = await rpc.run_one(view.master, view.addresses[view.master],
                                 procedures.node_stop_master.call().within(DAEMONS_TIMEOUT))
        if done.failed:
            warnings.append("Could not disable the master role on the old master %s, please disable manually: %s"
                            % (view.master, done.fail_msg))
    me = by_name[view.me]
    cluster = attrs.evolve(config.cluster, master_node=me.uuid, mtime=time.time())
    config = attrs.evolve(config, cluster=cluster, serial_no=config.serial_no + 1)
    data = config.to_json()
    _settle_local_state(view.paths, data)
    ha_params.record_failover(view.paths, read_epoch(view.paths), view.me, view.master)  # for gnt-cluster info
    values = ssconf.compute(config)
    ssconf.write_files(view.paths, values)
    # the nodes that just answered; WConfD retries the others once it runs
    others = {name: address for name, address in view.addresses.items() if name != view.me and name in accepted}
    candidates = {name: others[name] for name in view.candidates if name in others}
    details = wire.file_details(wire.virtual_path(view.paths.root, view.paths.config_data), data, mode=0o640)
    pushed = await rpc.run(candidates, procedures.upload_file.call(details))
    written = await rpc.run(others, procedures.write_ssconf_files.call(values))
    for name, result in [*pushed.items(), *written.items()]:
        if result.failed:
            warnings.append("%s did not take the new configuration yet: %s" % (name, result.fail_msg))
    started = await rpc.run_one(view.me, view.addresses[view.me],
                                procedures.node_start_master_daemons.call(no_voting).within(DAEMONS_TIMEOUT))
    for warning in warnings:
        ctx.err(warning)
    if started.failed:
        ctx.err("Could not start the master daemons on %s: %s" % (view.me, started.fail_msg))
        return EXIT_FAILURE
    done = await rpc.run_one(view.me, view.addresses[view.me], procedures.node_activate_master_ip.call(params, False))
    if done.failed:
        ctx.err("The master IP did not come up: %s" % done.fail_msg)
        return EXIT_FAILURE
    return EXIT_SUCCESS


def _master_params(config: Any) -> dict[str, Any]:
    cluster = config.cluster
    return {"uuid": cluster.master_node, "ip": cluster.master_ip, "netmask": cluster.master_netmask,
            "netdev": cluster.master_netdev, "ip_family": getattr(cluster, "primary_ip_family", 2)}


def _settle_local_state(paths: Paths, data: bytes) -> None:
    """Write the new config; forget what a past mastership of this node
    left (config journal, locks); fail the jobs the old master ran."""
    from ganeti.jobs import model, replicas

    for stale in (paths.config_journal, paths.config_journal + ".old", paths.locks_data, paths.locks_journal):
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
            job = model.QueuedJob.from_dict(serializer.read_json(path))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if job.finalized or (job.status == model.QUEUED and not job.livelock):
            continue
        if job.status != model.QUEUED:  # it ran on the old master
            job.fail(FAILOVER_REASON)
        job.livelock = job.process_id = None  # a queued one was spawned but never confirmed: it runs here
        serializer.write_file(path, job.to_json(), mode=0o640)


# --- master-ping, activate-master-ip, deactivate-master-ip ------------------------------


def master_ping(ctx: Context, opts: argparse.Namespace) -> int:
    """Exit 0 if the master answers LUXI, else 1 (Ganeti's C{master-ping})."""
    try:
        ctx.client().query_config_values(["cluster_name"])
    except Exception as e:  # any failure to reach the master is the answer
        ctx.err("Master not reachable: %s" % e)
        return EXIT_FAILURE
    return EXIT_SUCCESS


def _master_ip(ctx: Context, procedure: procedures.Procedure[[Any, bool | None], None], rpc_port: int) -> int:
    from ganeti.objects import ConfigData

    view = _view(ctx, rpc_port)
    config = ConfigData.from_json(serializer.read_file(view.paths.config_data))
    params = _master_params(config)

    async def call(reactor: Any) -> int:
        rpc = _rpc(reactor, view, None)
        try:
            result = await rpc.run_one(view.master, view.addresses[view.master], procedure.call(params, False))
        finally:
            await rpc.close()
        if result.failed:
            ctx.err("Failure: %s: %s" % (procedure.name, result.fail_msg))
            return EXIT_FAILURE
        return EXIT_SUCCESS

    return _react(call)


def activate_master_ip(ctx: Context, opts: argparse.Namespace) -> int:
    return _master_ip(ctx, procedures.node_activate_master_ip, opts.rpc_port)


def deactivate_master_ip(ctx: Context, opts: argparse.Namespace) -> int:
    if not opts.confirm and not prompt.ask_user("This will disable the master IP. All the master daemons will still"
                                             " be running, but RAPI and commands not on the master will fail."
                                             " Continue?"):
        return EXIT_FAILURE
    return _master_ip(ctx, procedures.node_deactivate_master_ip, opts.rpc_port)
