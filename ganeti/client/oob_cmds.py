"""Power commands: C{gnt-node power}, C{health}, C{powercycle}, C{gnt-cluster epo}.

    gnt-node power on|off|cycle|status [--force] [--ignore-status] [--oob-timeout S]
                   [--power-delay S] [--auto-promote] [--no-headers] [--separator X] [NODE...]
    gnt-node health [--oob-timeout S] [--no-headers] [--separator X] [NODE...]
    gnt-node powercycle [-f] [--yes] NODE
    gnt-cluster epo [--on] [--groups | --all] [--force] [--oob-timeout S]
                    [--shutdown-timeout S] [--power-delay S] [NODE|GROUP...]

As Ganeti's: C{power off} and C{power cycle} need nodes and a
confirmation; C{power off} without C{--ignore-status} first marks each node
offline in the same job.  The table has a C{Node} and a C{Status} column
(C{invoked}, C{powered}, C{unpowered}, or C{(nodata)} / C{(unavail)} for a
node whose helper failed or that has none; exit 1 then).

C{epo} (emergency power off) collects the nodes (of the groups with
C{--groups}, every node with C{--all}); the master must be left out unless
C{--all}.  Off: it shuts down every instance of those nodes (not
remembered as stopped), then powers off the nodes that have an OOB helper
(C{OP_OOB_COMMAND power-off}, C{ignore_status}); nodes without one are only
reported.  On (C{--on}): powers those nodes on (Ganeti 3.0.2 sends
power-off here, a bug we do not copy), then waits for each node's NodeD
port to answer and starts the instances whose nodes are all back.
"""

from __future__ import annotations

import argparse
import time

from ganeti import oob, ports
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Context
from ganeti.client.formatting import format_table
from ganeti.client.jobs import JobExecutor, opcode, submit_opcodes, submit_or_send
from ganeti.client.options import (
    add_dry_run_option,
    add_force_option,
    add_priority_option,
    add_submit_options,
    make_simple_filter,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

POWER_COMMANDS = ("on", "off", "cycle", "status")
#: commands that need nodes and a confirmation
_ASK = (oob.POWER_OFF, oob.POWER_CYCLE)
#: seconds between two rounds of NodeD port probes (Ganeti's C{_EPO_PING_INTERVAL})
EPO_PING_INTERVAL = 30.0
#: seconds one probe may take
EPO_PING_TIMEOUT = 1.0
#: seconds to wait for the nodes to come back (Ganeti's C{_EPO_REACHABLE_TIMEOUT})
EPO_REACHABLE_TIMEOUT = 15 * 60.0


def _confirm(names: list[str], operation: str) -> bool:
    from ganeti.client.gnt_instance import confirm

    return confirm(names, "nodes", operation)


def _table(ctx: Context, opts: argparse.Namespace, rows: list[list[str]]) -> None:
    titles = None if opts.no_headers else ["Node", "Status"]
    for line in format_table(rows, titles, [False, False], opts.separator):
        ctx.out(line)


def power(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{PowerNode}."""
    command = "power-%s" % opts.power_command
    nodes = list(opts.nodes)
    if command in _ASK:
        if not nodes:
            ctx.err("Please provide at least one node for this command")
            return EXIT_FAILURE
        if not opts.force and not _confirm(nodes, "power %s" % opts.power_command):
            return EXIT_FAILURE
    ops = []
    if not opts.ignore_status and command == oob.POWER_OFF:
        for node in nodes:
            ops.append(opcode(ctx, "OP_NODE_SET_PARAMS", node_name=node, offline=True,
                              auto_promote=opts.auto_promote))
    ops.append(opcode(ctx, "OP_OOB_COMMAND", node_names=nodes, command=command, ignore_status=opts.ignore_status,
                      timeout=opts.oob_timeout, power_delay=opts.power_delay))
    result = submit_or_send(ctx, *ops)[-1]
    errs, rows = 0, []
    for (_, name), (status, payload) in result:
        if status != oob.RS_NORMAL:
            errs += 1
            rows.append([name, oob.result_text(status)])
        elif command == oob.POWER_STATUS:
            rows.append([name, "powered" if payload[oob.POWERED] else "unpowered"])
        else:
            rows.append([name, "invoked"])
    _table(ctx, opts, rows)
    return EXIT_FAILURE if errs else EXIT_SUCCESS


def health(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{Health}: one row per item, the node named on its first."""
    (result,) = submit_opcodes(ctx, [opcode(ctx, "OP_OOB_COMMAND", node_names=list(opts.nodes),
                                            command=oob.HEALTH, timeout=opts.oob_timeout)])
    errs, rows = 0, []
    for (_, name), (status, payload) in result:
        if status != oob.RS_NORMAL:
            errs += 1
            rows.append([name, oob.result_text(status)])
            continue
        items = payload or []
        for index, (item, state) in enumerate(items):
            rows.append([name if index == 0 else "", "%s=%s" % (item, state)])
        if not items:
            rows.append([name, ""])
    _table(ctx, opts, rows)
    return EXIT_FAILURE if errs else EXIT_SUCCESS


def _add_oob_timeout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--oob-timeout", dest="oob_timeout", type=int, default=oob.TIMEOUT, metavar="SECONDS",
                        help="Maximum time to wait for out-of-band helper")


def _add_power_delay(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--power-delay", dest="power_delay", type=float, default=oob.POWER_DELAY,
                        metavar="SECONDS", help="Time in seconds to wait between power-ons")


def _add_table(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-headers", action="store_true", help="Don't display column headers")
    parser.add_argument("--separator", default=None, help="Separator between output fields (defaults to one space)")


def setup_power(parser: argparse.ArgumentParser) -> None:
    add_submit_options(parser)
    parser.add_argument("--auto-promote", action="store_true",
                        help="Lock all nodes and auto-promote as needed to MC status")
    add_priority_option(parser)
    parser.add_argument("--ignore-status", action="store_true",
                        help="Ignore the Node(s) offline status (potentially DANGEROUS)")
    add_force_option(parser)
    _add_table(parser)
    _add_oob_timeout(parser)
    _add_power_delay(parser)
    parser.add_argument("power_command", choices=POWER_COMMANDS, metavar="on|off|cycle|status")
    parser.add_argument("nodes", nargs="*", metavar="NODE")


def setup_health(parser: argparse.ArgumentParser) -> None:
    _add_table(parser)
    add_priority_option(parser)
    _add_oob_timeout(parser)
    parser.add_argument("nodes", nargs="*", metavar="NODE", help="nodes to check (default: all)")


def powercycle(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{PowercycleNode}: asks first unless C{--yes}; the node's answer on stderr."""
    from ganeti.client import prompt
    from ganeti.client.command import EXIT_CONFIRMATION

    if not opts.confirm and not prompt.ask_user("Are you sure you want to hard powercycle node %s?" % opts.node):
        return EXIT_CONFIRMATION
    (result,) = submit_or_send(ctx, opcode(ctx, "OP_NODE_POWERCYCLE", node_name=opts.node, force=opts.force))
    if result:
        ctx.err(str(result))
    return EXIT_SUCCESS


def setup_powercycle(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser, help="Also powercycle the master node")
    parser.add_argument("--yes", dest="confirm", action="store_true", help="Do not ask for confirmation")
    add_dry_run_option(parser)
    add_priority_option(parser)
    add_submit_options(parser)
    parser.add_argument("node", metavar="NODE")


# --- gnt-cluster epo -----------------------------------------------------------------


def _rows(response: Any) -> list[list[Any]]:
    return [[value if status == 0 else None for status, value in row] for row in response["data"]]


def _oob_power(ctx: Context, opts: argparse.Namespace, nodes: list[str], on: bool) -> bool:
    command = oob.POWER_ON if on else oob.POWER_OFF
    (result,) = submit_opcodes(ctx, [opcode(ctx, "OP_OOB_COMMAND", node_names=nodes, command=command,
                                            ignore_status=True, timeout=opts.oob_timeout,
                                            power_delay=opts.power_delay)])
    errs = 0
    for (_, name), (status, _payload) in result:
        if status != oob.RS_NORMAL:
            errs += 1
            ctx.err("There was a problem changing power for %s, please investigate" % name)
    return errs == 0


def _instance_start(ctx: Context, opts: argparse.Namespace, names: list[str], start: bool) -> bool:
    if start:
        make = lambda name: opcode(ctx, "OP_INSTANCE_STARTUP", instance_name=name)  # noqa: E731
        submit, success, failed = "startup", "started", "starting"
    else:
        make = lambda name: opcode(ctx, "OP_INSTANCE_SHUTDOWN", instance_name=name,  # noqa: E731
                                   timeout=opts.shutdown_timeout, no_remember=True)
        submit, success, failed = "shutdown", "stopped", "stopping"
    jex = JobExecutor(ctx)
    for name in names:
        ctx.out("Submit %s of instance %s" % (submit, name))
        jex.queue_job(name, make(name))
    results = jex.get_results()
    bad = sum(1 for ok, _ in results if not ok)
    if bad:
        ctx.err("There were errors while %s instances:\n%d error(s) out of %d instance(s)"
                % (failed, bad, len(results)))
        return False
    ctx.out("All instances have been %s successfully" % success)
    return True


def _reachable(address: str, port: int, timeout: float = EPO_PING_TIMEOUT) -> bool:
    import socket  # here: gnt-node imports this module, and socket's import costs each of its commands 3-5 ms

    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_nodes(ctx: Context, addresses: dict[str, str], port: int, action: Callable[[set[str]], bool],
                   interval: float = EPO_PING_INTERVAL, limit: float = EPO_REACHABLE_TIMEOUT,
                   probe: Callable[[str, int], bool] = _reachable, clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> bool:
    """Ganeti's C{_RunWhenNodesReachable}: call C{action(nodes up)} at once
    and after each node that answers again, until all did (the conjunction of
    C{action}'s answers) or C{limit} seconds passed (False)."""
    down, up, success = set(addresses), set[str](), True
    deadline = clock() + limit
    while True:
        if not action(up):
            success = False
        if not down:
            return success
        round_start = clock()
        if round_start > deadline:
            ctx.err("Time exceeded while waiting for nodes to become reachable again:\n  - %s"
                    % "  - ".join(sorted(down)))
            return False
        for node in sorted(down):
            if probe(addresses[node], port):
                ctx.out("Node %s became available" % node)
                up.add(node)
                down.discard(node)
                break
        else:
            sleep(max(0.0, min(round_start + interval, deadline + 0.001) - clock()))


def epo(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{Epo}."""
    if opts.groups and opts.show_all:
        ctx.err("Only one of --groups or --all are allowed")
        return EXIT_FAILURE
    if opts.args and opts.show_all:
        ctx.err("Arguments in combination with --all are not allowed")
        return EXIT_FAILURE
    client = ctx.client()
    if opts.groups:
        groups = _rows(client.query("group", ["name", "node_list"], make_simple_filter("name", opts.args)))
        missing = sorted(set(opts.args) - {row[0] for row in groups})
        if missing:
            ctx.err("Unknown node group(s): %s" % ", ".join(missing))
            return EXIT_FAILURE
        wanted: list[str] | None = [node for row in groups for node in (row[1] or [])]
    else:
        wanted = list(opts.args) or None
    fields = ["name", "master", "pinst_list", "sinst_list", "powered", "offline", "pip"]
    rows = _rows(client.query("node", fields, make_simple_filter("name", wanted) if wanted is not None else None))
    if wanted:
        missing = sorted(set(wanted) - {row[0] for row in rows})
        if missing:
            ctx.err("Unknown node(s): %s" % ", ".join(missing))
            return EXIT_FAILURE
    all_nodes = [row[0] for row in rows]
    node_list: list[str] = []
    inst_map: dict[str, set[str]] = {}
    for node, master, pinsts, sinsts, powered, offline, _pip in rows:
        if not offline:
            for inst in (pinsts or []) + (sinsts or []):
                if inst in inst_map:
                    if not master:
                        inst_map[inst].add(node)
                elif master:
                    inst_map[inst] = set()
                else:
                    inst_map[inst] = {node}
        if master and opts.on:
            continue
        if master and not opts.show_all:
            ctx.err("%s is the master node, please do a master-failover to another node not affected by the EPO"
                    " or use --all if you intend to shutdown the whole cluster" % node)
            return EXIT_FAILURE
        if powered is None:
            ctx.out("Node %s does not support out-of-band handling, it can not be handled in a fully automated"
                    " manner" % node)
        elif powered == opts.on:
            ctx.out("Node %s is already in desired power state, skipping" % node)
        elif not offline or powered:
            node_list.append(node)
    if not (opts.force or _confirm(all_nodes, "epo")):
        return EXIT_FAILURE
    if opts.on:
        if node_list and not _oob_power(ctx, opts, node_list, True):
            ctx.err("Not all nodes seem to get back up, investigate and start manually if needed")
        pending = dict(inst_map)

        def start_ready(up: set[str]) -> bool:
            ready = [inst for inst, nodes in pending.items() if not (nodes - up)]
            for inst in ready:
                del pending[inst]
            return _instance_start(ctx, opts, ready, True) if ready else True

        ctx.out("Waiting until all nodes are available again")
        addresses = {row[0]: row[6] or row[0] for row in rows}
        if not wait_for_nodes(ctx, addresses, opts.rpc_port, start_ready):
            ctx.err("Please investigate and start stopped instances manually")
            return EXIT_FAILURE
        return EXIT_SUCCESS
    if not _instance_start(ctx, opts, list(inst_map), False):
        ctx.err("Please investigate and stop instances manually before continuing")
        return EXIT_FAILURE
    if not node_list:
        return EXIT_SUCCESS
    return EXIT_SUCCESS if _oob_power(ctx, opts, node_list, False) else EXIT_FAILURE


def setup_epo(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser)
    parser.add_argument("--on", action="store_true", help="Recover from an EPO")
    parser.add_argument("--groups", action="store_true", help="Arguments are node groups instead of nodes")
    parser.add_argument("--all", dest="show_all", action="store_true",
                        help="Act on every node of the cluster, the master included")
    _add_oob_timeout(parser)
    parser.add_argument("--shutdown-timeout", dest="shutdown_timeout", type=int, default=120, metavar="SECONDS",
                        help="Maximum time to wait for instance shutdown")
    _add_power_delay(parser)
    parser.add_argument("--rpc-port", type=ports.port_number, default=ports.NODED, metavar="PORT",
                        help="Port of the cluster's node daemons, probed by --on (default %d)" % ports.NODED)
    parser.add_argument("args", nargs="*", metavar="NODE|GROUP")
