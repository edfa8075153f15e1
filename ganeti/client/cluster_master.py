"""gnt-cluster master-failover, master-ping, activate-master-ip, deactivate-master-ip.

C{master-failover} runs on the master candidate that is to become master:
Ganeti's checks, then the take-over steps of L{ganeti.ha.takeover} (the
same ones NodeD's automatic failover runs), whose L{Progress} reports this
command prints: steps on stdout, warnings and failures on stderr.  This
node's NodeD runs them (node RPC C{master_failover}, asked over TLS with the
cluster certificate by the standard library): the command then pays neither
for Twisted's and the take-over's imports nor for a node RPC client of its
own, which at a high load took longer than the steps themselves.  When this
node's NodeD does not answer, the command runs the steps itself.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any, Callable, Coroutine

from ganeti import ports
from ganeti.client import prompt
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Context
from ganeti.paths import Paths

if TYPE_CHECKING:
    from ganeti.ha import takeover
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
    from ganeti.ha import takeover

    return takeover.view_of(Paths.from_option(ctx.root), rpc_port)


def _rpc(reactor: Any, view: takeover.Cluster) -> Any:
    from ganeti.rpc import RpcClient

    return RpcClient.from_paths(reactor, view.paths, port=view.rpc_port, epoch=None)


class NodedUnreachable(Exception):
    """This node's NodeD could not be asked (not running, no identity or certificate)."""


#: seconds this node's NodeD has to run the steps (the daemons' start and stop are bounded by 90 s each)
NODED_TIMEOUT = 300.0


def ask_noded(paths: Paths, rpc_port: int, no_voting: bool, timeout: float = NODED_TIMEOUT) -> list[list[str]]:
    """Have this node's NodeD run the take-over steps (node RPC C{master_failover});
    what they reported, C{[kind, text]} each, C{["done", "yes" or "no"]} last.

    @raise NodedUnreachable: no connection could be made (nothing was asked)
    @raise OSError: the connection broke once the request was sent; C{ValueError}: a malformed answer
    """
    import json

    from ganeti.luxi import locate

    # the identity file names where this node's NodeD listens: neither ssconf (its parser imports the config
    # objects) nor ganeti.daemons (Twisted) is imported on the way to the request
    identity = locate.own_identity(paths)
    me, address = identity.get("name"), identity.get("address", "")
    if not me or not address:
        raise NodedUnreachable("this node's name or address is not known here")
    try:
        sock = locate.open_tls(paths, address, rpc_port, timeout=10.0)
    except OSError as e:
        raise NodedUnreachable("%s:%d: %s" % (address, rpc_port, e)) from None
    try:
        sock.settimeout(timeout)
        body = json.dumps([no_voting]).encode()
        sock.sendall(b"POST /master_failover HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (address.encode(), len(body), body))
        _status, data = locate.read_http_response(sock)
        answer = json.loads(data)
    finally:
        sock.close()
    if not (isinstance(answer, list) and len(answer) == 2 and isinstance(answer[0], bool)):
        raise ValueError("this node's NodeD answered %.200r" % (answer,))
    success, payload = answer
    if not success:
        return [["fail", "Failure: %s" % payload], ["done", "no"]]
    if not (isinstance(payload, list) and all(isinstance(i, list) and len(i) == 2 for i in payload)):
        raise ValueError("this node's NodeD answered %.200r" % (payload,))
    return [[str(kind), str(text)] for kind, text in payload]


def _in_process(ctx: Context, opts: argparse.Namespace) -> int:
    """The take-over steps run by this command (this node's NodeD does not answer)."""
    from ganeti.ha import takeover
    from ganeti.ha.failover import FailoverRefused, check_candidate

    view = _view(ctx, opts.rpc_port)
    try:
        check_candidate(view.me, view.master, view.candidates)
    except FailoverRefused as e:
        ctx.err("Failure: prerequisites not met for this operation:\n%s" % e)
        return EXIT_FAILURE

    async def run(reactor: Any) -> int:
        done = await takeover.failover(reactor, Printed(ctx), view, opts.no_voting)
        return EXIT_SUCCESS if done else EXIT_FAILURE

    return _react(run)


def master_failover(ctx: Context, opts: argparse.Namespace) -> int:
    if opts.no_voting and not opts.yes_do_it and not prompt.ask_user(NO_VOTING_TEXT):
        return EXIT_FAILURE
    started = time.monotonic()
    paths = Paths.from_option(ctx.root)
    try:
        said = ask_noded(paths, opts.rpc_port, opts.no_voting)
    except NodedUnreachable:
        code = _in_process(ctx, opts)
    except (OSError, ValueError) as e:
        ctx.err("Failure: this node's ganeti-noded did not answer the failover's outcome (%s); check with"
                " 'gnt-cluster getmaster' and 'gnt-cluster verify'" % e)
        return EXIT_FAILURE
    else:
        progress = Printed(ctx)
        code = EXIT_FAILURE
        for kind, text in said:
            if kind == "done":
                code = EXIT_SUCCESS if text == "yes" else EXIT_FAILURE
            elif kind == "step":
                progress.step(text)
            else:
                progress.warn(text)
    if code == EXIT_SUCCESS:
        ctx.out("Master failover to %s done in %.1fs" % (locate_name(paths), time.monotonic() - started))
    return code


def locate_name(paths: Paths) -> str:
    from ganeti.luxi import locate

    return locate.own_name(paths) or "this node"


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
    from ganeti import serializer
    from ganeti.ha import takeover
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
    from ganeti.rpc import procedures

    return _master_ip(ctx, procedures.node_activate_master_ip, opts.rpc_port)


def deactivate_master_ip(ctx: Context, opts: argparse.Namespace) -> int:
    if not opts.confirm and not prompt.ask_user("This will disable the master IP. All the master daemons will still"
                                             " be running, but RAPI and commands not on the master will fail."
                                             " Continue?"):
        return EXIT_FAILURE
    from ganeti.rpc import procedures

    return _master_ip(ctx, procedures.node_deactivate_master_ip, opts.rpc_port)
