"""gnt-node's LVM and DRBD commands (Ganeti's names, options and output).

    gnt-node volumes [-o FIELDS] [--no-headers] [--separator S] [--units U] [NODE...]
    gnt-node modify-storage [--allocatable yes|no] NODE STORAGE_TYPE NAME
    gnt-node repair-storage [--ignore-consistency] NODE STORAGE_TYPE NAME
    gnt-node list-drbd [--no-headers] [--separator S] NODE

These machines have neither LVM nor DRBD: C{volumes} lists no volume and
C{list-drbd} no minor (confd's C{NODE_DRBD} answer), C{modify-storage} and
C{repair-storage} get Ganeti's refusals from their opcodes
(L{ganeti.cmdlib.lvm_drbd}); nothing changes.
"""

from __future__ import annotations

import argparse

from ganeti import errors
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Context
from ganeti.client.jobs import opcode, submit_opcodes, submit_or_send
from ganeti.client.options import (
    add_dry_run_option,
    add_list_options,
    add_priority_option,
    add_submit_options,
    parse_fields,
    yes_no,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VOLUME_FIELDS = ["node", "phys", "vg", "name", "size", "instance"]
_VOLUME_TITLES = {"node": "Node", "phys": "PhysDev", "vg": "VG", "name": "Name", "size": "Size",
                  "instance": "Instance"}
DRBD_FIELDS = ["node", "minor", "instance", "disk", "role", "peer"]
_DRBD_TITLES = {"node": "Node", "minor": "Minor", "instance": "Instance", "disk": "Disk", "role": "Role",
                "peer": "PeerNode"}
#: the storage types Ganeti's commands take (modify: lvm-pv; repair: lvm-vg)
MODIFIABLE_TYPES = ("lvm-pv",)
REPAIRABLE_TYPES = ("lvm-vg",)


def _table(ctx: Context, rows: list[list[Any]], fields: list[str], titles: dict[str, str], numeric: list[str],
           opts: argparse.Namespace, units: bool = False) -> None:
    from ganeti.client.formatting import format_table
    from ganeti.units import format_unit

    unit = getattr(opts, "units", None) or ("m" if opts.separator is not None else "h")
    shown = [[format_unit(value, unit) if units and field in numeric and isinstance(value, int) else str(value)
              for field, value in zip(fields, row)] for row in rows]
    header = None if opts.no_headers else [titles.get(f, f) for f in fields]
    for line in format_table(shown, header, [f in numeric for f in fields], opts.separator):
        ctx.out(line)


def volumes(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{ListVolumes}: OP_NODE_QUERYVOLS, a table."""
    fields = parse_fields(opts.output, VOLUME_FIELDS)
    (rows,) = submit_opcodes(ctx, [opcode(ctx, "OP_NODE_QUERYVOLS", nodes=list(opts.nodes), output_fields=fields)])
    _table(ctx, rows or [], fields, _VOLUME_TITLES, ["size"], opts, units=True)
    return EXIT_SUCCESS


def modify_storage(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{ModifyStorage}: OP_NODE_MODIFY_STORAGE with the changes given."""
    changes: dict[str, Any] = {}
    if opts.allocatable is not None:
        changes["allocatable"] = opts.allocatable
    if not changes:
        ctx.err("No changes to perform, exiting.")
        return EXIT_SUCCESS
    submit_or_send(ctx, opcode(ctx, "OP_NODE_MODIFY_STORAGE", node_name=opts.node, storage_type=opts.storage_type,
                               name=opts.name, changes=changes))
    return EXIT_SUCCESS


def repair_storage(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{RepairStorage}: OP_REPAIR_NODE_STORAGE."""
    submit_or_send(ctx, opcode(ctx, "OP_REPAIR_NODE_STORAGE", node_name=opts.node, storage_type=opts.storage_type,
                               name=opts.name, ignore_consistency=opts.ignore_consistency))
    return EXIT_SUCCESS


def list_drbd(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{ListDrbd}: confd's C{NODE_DRBD} answer for the node, a table."""
    from twisted.internet import defer, task

    from ganeti.confd import wire
    from ganeti.confd.client import ConfdClient, ConfdTimeout
    from ganeti.confd.service import read_key
    from ganeti.paths import Paths
    from ganeti.ssconf import SimpleStore

    paths = Paths.from_option(ctx.root)
    out: list[Any] = []

    async def ask(reactor: Any) -> None:
        peers = SimpleStore(paths).get_master_candidates_ips()
        client = ConfdClient(reactor, read_key(paths.hmac_key), peers)
        try:
            out.append(await client.query(wire.REQ_NODE_DRBD, opts.node))
        except ConfdTimeout:
            out.append(None)
        finally:
            client.close()

    try:
        task.react(lambda reactor: defer.ensureDeferred(ask(reactor)))
    except SystemExit:
        pass
    if not out or out[0] is None:
        ctx.err("Did not receive all expected confd replies")
        return EXIT_FAILURE
    result = out[0]
    if not result.ok:
        ctx.err("Query gave non-ok status '%s': %s" % (result.status, result.answer))
        return EXIT_FAILURE
    if not isinstance(result.answer, list):
        raise errors.OpExecError("Invalid response from server: %r" % (result.answer,))
    _table(ctx, sorted(result.answer), DRBD_FIELDS, _DRBD_TITLES, ["minor"], opts)
    return EXIT_SUCCESS


def setup_volumes(parser: argparse.ArgumentParser) -> None:
    add_list_options(parser, VOLUME_FIELDS, units=True)
    add_priority_option(parser)
    parser.add_argument("nodes", nargs="*", metavar="NODE", help="nodes to list (default: all)")


def setup_modify_storage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allocatable", type=yes_no, metavar="yes|no",
                        help="Set the allocatable flag on a volume")
    add_dry_run_option(parser)
    add_priority_option(parser)
    add_submit_options(parser)
    parser.add_argument("node", metavar="NODE")
    parser.add_argument("storage_type", metavar="STORAGE_TYPE", choices=MODIFIABLE_TYPES)
    parser.add_argument("name", metavar="NAME")


def setup_repair_storage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ignore-consistency", action="store_true",
                        help="Ignore the consistency of the disks on the secondary")
    add_dry_run_option(parser)
    add_priority_option(parser)
    add_submit_options(parser)
    parser.add_argument("node", metavar="NODE")
    parser.add_argument("storage_type", metavar="STORAGE_TYPE", choices=REPAIRABLE_TYPES)
    parser.add_argument("name", metavar="NAME")


def setup_list_drbd(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-headers", action="store_true", help="Don't display column headers")
    parser.add_argument("--separator", default=None, metavar="SEP", help="Separator between output fields")
    parser.add_argument("node", metavar="NODE")
