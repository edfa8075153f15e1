"""gnt-cluster master-failover, master-ping, activate-master-ip, deactivate-master-ip.

C{master-failover} runs on the master candidate that is to become master:
Ganeti's checks, then the take-over steps of L{ganeti.ha.takeover} (the
same ones NodeD's automatic failover runs), whose L{Progress} reports this
command prints: steps on stdout, warnings and failures on stderr.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable, Coroutine

from ganeti import ports, serializer
from ganeti.client import prompt
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Context
from ganeti.ha import takeover
from ganeti.ha.failover import FailoverRefused, check_candidate
from ganeti.paths import Paths
from ganeti.rpc import procedures

NO_VOTING_TEXT = ("This will perform the failover even if most other nodes are down, or if this node is outdated."
                  " This is dangerous as it can lead to a non-consistent cluster. Check the gnt-cluster(8) man page"
                  " before proceeding. Continue?")


class Printed:
    """The take-over's L{takeover.Progress}, printed: steps on stdout, the rest on stderr."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def step(self, text: str) -> None:
        self._ctx.out(text)

    def warn(self, text: str) -> None:
        self._ctx.err(text)

    def fail(self, text: str) -> None:
        self._ctx.err(text)


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


def _view(ctx: Context, rpc_port: int = ports.NODED) -> takeover.Cluster:
    return takeover.view_of(Paths.from_option(ctx.root), rpc_port)


def _rpc(reactor: Any, view: takeover.Cluster) -> Any:
    from ganeti.rpc import RpcClient

    return RpcClient.from_paths(reactor, view.paths, port=view.rpc_port, epoch=None)


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

    async def run(reactor: Any) -> int:
        done = await takeover.failover(reactor, Printed(ctx), view, opts.no_voting)
        return EXIT_SUCCESS if done else EXIT_FAILURE

    code = _react(run)
    if code == EXIT_SUCCESS:
        ctx.out("Master failover to %s done in %.1fs" % (view.me, time.monotonic() - started))
    return code


# --- master-ping, activate-master-ip, deactivate-master-ip ------------------------------


def master_ping(ctx: Context, opts: argparse.Namespace) -> int:
    """Exit 0 if this node's master daemon answers LUXI, else 1 (Ganeti's
    C{master-ping}: it asks this node, and waits for no other master)."""
    from ganeti.luxi.client import LuxiClient
    from ganeti.paths import Paths

    try:
        if ctx._client_factory is not None:  # tests
            ctx.client().query_config_values(["cluster_name"])
        else:
            with LuxiClient(Paths.from_option(ctx.root).luxi_socket) as client:
                client.query_config_values(["cluster_name"])
    except Exception as e:  # any failure to reach the master is the answer
        ctx.err("Master not reachable: %s" % e)
        return EXIT_FAILURE
    return EXIT_SUCCESS


def _master_ip(ctx: Context, procedure: procedures.Procedure[[Any, bool | None], None], rpc_port: int) -> int:
    from ganeti.objects import ConfigData

    view = _view(ctx, rpc_port)
    config = ConfigData.from_json(serializer.read_file(view.paths.config_data))
    params = takeover.master_params(config)

    async def call(reactor: Any) -> int:
        rpc = _rpc(reactor, view)
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
