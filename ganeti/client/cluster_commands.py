"""gnt-cluster command and copyfile, through NodeD instead of SSH.

Ganeti runs both over SSH as root.  Here the master's command line calls
each node's NodeD over the cluster's mutual TLS (C{node_run_command},
C{node_copy_file}; L{ganeti.noded.commands}), presenting the cluster
certificate, so it must run on the master as a user who can read it.
Each node records every use in its C{commands.log}.

The output is Ganeti's: for C{command}, per node (the master last) a line
of dashes, C{node: NAME}, the output, C{return code = N} (with C{-M} each
output line prefixed with C{NAME: } instead of the C{node:} line; with
C{--failure-only} nodes whose command exited 0 are left out); a node that
cannot be reached shows the error and return code 255 (what SSH gives).
C{copyfile} copies to every online node but the master and says on stderr
which copies failed.  Both exit 0 once they ran, as Ganeti's do.
"""

from __future__ import annotations

import argparse
import getpass
import hashlib
import os
import stat
from typing import Any

from ganeti import ports
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Context
from ganeti.paths import Paths
from ganeti.rpc import procedures, wire

#: Default seconds a command may run on a node (ours: Ganeti has no limit).
DEFAULT_TIMEOUT = 300.0
#: Output bytes kept per node.
DEFAULT_MAX_OUTPUT = 1024 * 1024
#: Largest file copied (NodeD's limit).
MAX_FILE_SIZE = 128 * 1024 * 1024
#: Seconds an RPC gets beyond the command's own timeout.
RPC_MARGIN = 30.0
#: The exit code shown for a node that could not be reached (SSH's).
UNREACHABLE = 255
DASHES = "-" * 48


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "uid %d" % os.getuid()


def online_nodes(ctx: Context, names: list[str], group: str | None, *, skip_master: bool = False,
                 secondary: bool = False) -> list[tuple[str, str]]:
    """Ganeti's C{GetOnlineNodes}: C{[(name, address)]} of the online nodes
    named (all by default), in C{group} if given, the master last (or left
    out); offline ones are skipped with a note on stderr.

    @raise ValueError: an unknown node or group
    """
    client = ctx.client()
    rows = client.query("node", ["name", "offline", "pip", "sip", "group"], None)["data"]
    nodes = {row[0][1]: (bool(row[1][1]), row[2][1], row[3][1], row[4][1]) for row in rows}
    if group is not None and group not in {info[3] for info in nodes.values()}:
        groups = {row[0][1] for row in client.query("group", ["name"], None)["data"]}
        if group not in groups:
            raise ValueError("Node group '%s' not known" % group)
    chosen: list[str] = []
    for name in names or sorted(nodes):
        found = name if name in nodes else next((n for n in sorted(nodes) if n.split(".")[0] == name), None)
        if found is None:
            raise ValueError("Node '%s' not known" % name)
        if found not in chosen:
            chosen.append(found)
    if group is not None:
        chosen = [name for name in chosen if nodes[name][3] == group]
    offline = [name for name in chosen if nodes[name][0]]
    if offline:
        ctx.err("Note: skipping offline node(s): %s" % ", ".join(offline))
    master = client.query_config_values(["master_node"])[0]
    online = [name for name in chosen if not nodes[name][0] and name != master]
    if master in chosen and master not in offline and not skip_master:
        online.append(master)
    return [(name, (nodes[name][2] if secondary else nodes[name][1]) or nodes[name][1] or name) for name in online]


def _react(main: Any) -> int:
    from ganeti.client.cluster_master import _react as react

    return react(main)


def _rpc(reactor: Any, ctx: Context, rpc_port: int) -> Any:
    from ganeti.rpc import RpcClient

    return RpcClient.from_paths(reactor, Paths.from_option(ctx.root), port=rpc_port, epoch=None)


# --- command -------------------------------------------------------------------------------


def run_command(ctx: Context, opts: argparse.Namespace) -> int:
    command = " ".join(opts.command)
    if not command.strip():
        ctx.usage_error("the command is empty")
    if not 0 < opts.timeout <= 3600:
        ctx.usage_error("--timeout must be between 0 and 3600 seconds")
    try:
        targets = online_nodes(ctx, opts.nodes, opts.nodegroup)
    except ValueError as e:
        ctx.err("Failure: prerequisites not met for this operation:\n%s" % e)
        return EXIT_FAILURE
    call = procedures.node_run_command.call(["/bin/sh", "-c", command], float(opts.timeout), DEFAULT_MAX_OUTPUT,
                                            _user()).within(opts.timeout + RPC_MARGIN)

    async def main(reactor: Any) -> int:
        rpc = _rpc(reactor, ctx, opts.rpc_port)
        try:
            for name, address in targets:
                result = await rpc.run_one(name, address, call)
                _show(ctx, opts, name, result)
        finally:
            await rpc.close()
        return EXIT_SUCCESS

    return _react(main)


def _show(ctx: Context, opts: argparse.Namespace, name: str, result: Any) -> None:
    if result.failed:
        output, code = "Cannot run the command on %s: %s" % (name, result.fail_msg), UNREACHABLE
    else:
        answer = result.payload
        output, code = answer["output"], answer["exit_code"]
        if answer.get("timed_out"):
            output += "%s(killed after %g seconds)" % ("\n" if output and not output.endswith("\n") else "",
                                                      opts.timeout)
        if answer.get("truncated"):
            output += "%s(output cut after %d bytes)" % ("\n" if output and not output.endswith("\n") else "",
                                                        DEFAULT_MAX_OUTPUT)
    if opts.failure_only and code == 0:
        return
    ctx.out(DASHES)
    if opts.show_machine_names:
        for line in output.splitlines():
            ctx.out("%s: %s" % (name, line))
    else:
        ctx.out("node: %s" % name)
        ctx.out(output)
    ctx.out("return code = %s" % code)


# --- copyfile -------------------------------------------------------------------------------


def _destination(ctx: Context, filename: str) -> str:
    """The path on the nodes: C{filename} as seen from the cluster's root
    (the same path unless C{--root} is given and holds the file)."""
    root = Paths.from_option(ctx.root).root
    try:
        return wire.virtual_path(root, filename)
    except ValueError:
        return filename


def copy_file(ctx: Context, opts: argparse.Namespace) -> int:
    filename = os.path.abspath(opts.filename)
    try:
        st = os.stat(filename)
    except OSError:
        ctx.err("Failure: prerequisites not met for this operation:\nNo such filename '%s'" % filename)
        return EXIT_FAILURE
    if not stat.S_ISREG(st.st_mode):
        ctx.err("Failure: prerequisites not met for this operation:\n%s is not a regular file" % filename)
        return EXIT_FAILURE
    if st.st_size > MAX_FILE_SIZE:
        ctx.err("Failure: prerequisites not met for this operation:\n%s is larger than %d bytes"
                % (filename, MAX_FILE_SIZE))
        return EXIT_FAILURE
    try:
        with open(filename, "rb") as handle:
            data = handle.read()
        targets = online_nodes(ctx, opts.nodes, opts.nodegroup, skip_master=True,
                               secondary=opts.use_replication_network)
    except (OSError, ValueError) as e:
        ctx.err("Failure: prerequisites not met for this operation:\n%s" % e)
        return EXIT_FAILURE
    destination = _destination(ctx, filename)
    call = procedures.node_copy_file.call(destination, wire.compress(data), stat.S_IMODE(st.st_mode),
                                          hashlib.sha256(data).hexdigest(), _user())

    async def main(reactor: Any) -> int:
        rpc = _rpc(reactor, ctx, opts.rpc_port)
        try:
            for name, address in targets:
                result = await rpc.run_one(name, address, call)
                if result.failed:
                    ctx.err("Copy of file %s to node %s failed: %s" % (filename, name, result.fail_msg))
        finally:
            await rpc.close()
        return EXIT_SUCCESS

    return _react(main)


# --- options ----------------------------------------------------------------------------------


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--node", dest="nodes", action="append", default=[], metavar="NODE",
                        help="Node to run on (repeatable; default: every online node)")
    parser.add_argument("-g", "--node-group", dest="nodegroup", metavar="GROUP",
                        help="Only the nodes of this node group")
    parser.add_argument("--rpc-port", type=ports.port_number, default=ports.NODED, metavar="PORT",
                        help="Port of the cluster's node daemons (default %d)" % ports.NODED)


def setup_command(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    parser.add_argument("-M", "--show-machine-names", dest="show_machine_names", action="store_true",
                        help="Prefix each output line with the node's name")
    parser.add_argument("--failure-only", action="store_true",
                        help="Show only the nodes where the command failed (exit code not 0)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help="Kill the command on a node after this many seconds (default %d, at most 3600)"
                        % DEFAULT_TIMEOUT)
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND",
                        help="The command, run by /bin/sh -c as root on each node")


def setup_copyfile(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    parser.add_argument("--use-replication-network", action="store_true",
                        help="Reach the nodes at their secondary IPs")
    parser.add_argument("filename", metavar="FILE", help="The file, copied to the same path on the nodes")
