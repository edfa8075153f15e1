"""The tag commands of the gnt-* tools (C{list-tags}, C{add-tags}, C{remove-tags}).

L{tag_commands} makes the three commands for one kind of object; tags come
from the command line and from a C{--from} file (C{-}: standard input).
"""

from __future__ import annotations

import argparse
import sys

from ganeti import errors
from ganeti.client.command import EXIT_SUCCESS, Command, Context
from ganeti.client.jobs import opcode, submit_or_send
from ganeti.client.options import add_priority_option, add_submit_options, add_tag_source_option

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ganeti.client.command import CommandFunc

TAG_CLUSTER = "cluster"
TAG_NODEGROUP = "nodegroup"
TAG_NODE = "node"
TAG_INSTANCE = "instance"


def read_tags(ctx: Context, tags: list[str]) -> list[str]:
    """C{tags} plus those of the C{--from} file (C{-}: stdin), one per line."""
    source = getattr(ctx.opts, "tags_source", None)
    if source is None:
        return list(tags)
    if source == "-":
        lines = sys.stdin.read().splitlines()
    else:
        with open(source) as handle:
            lines = handle.read().splitlines()
    return list(tags) + [line.strip() for line in lines]


def list_tags(ctx: Context, kind: str, name: str) -> int:
    for tag in sorted(ctx.client().query_tags(kind, name)):
        ctx.out(tag)
    return EXIT_SUCCESS


def add_tags(ctx: Context, kind: str, name: str, tags: list[str]) -> int:
    tags = read_tags(ctx, tags)
    if not tags:
        raise errors.OpPrereqError("No tags to be added", errors.ECODE_INVAL)
    submit_or_send(ctx, opcode(ctx, "OP_TAGS_SET", kind=kind, name=name, tags=tags))
    return EXIT_SUCCESS


def remove_tags(ctx: Context, kind: str, name: str, tags: list[str]) -> int:
    tags = read_tags(ctx, tags)
    if not tags:
        raise errors.OpPrereqError("No tags to be removed", errors.ECODE_INVAL)
    submit_or_send(ctx, opcode(ctx, "OP_TAGS_DEL", kind=kind, name=name, tags=tags))
    return EXIT_SUCCESS


def tag_commands(kind: str, metavar: str, what: str) -> dict[str, Command]:
    """C{list-tags}, C{add-tags} and C{remove-tags} for one object of C{kind}.

    @param metavar: the name of the object argument (e.g. C{"NODE"})
    @param what: how help texts call the object (e.g. C{"node"})
    """

    def name(opts: argparse.Namespace) -> str:
        return str(opts.object_name)

    def show(ctx: Context, opts: argparse.Namespace) -> int:
        return list_tags(ctx, kind, name(opts))

    def change(add: bool) -> CommandFunc:
        def run_change(ctx: Context, opts: argparse.Namespace) -> int:
            if not opts.tags and opts.tags_source is None:
                ctx.usage_error("no tags given")
            return (add_tags if add else remove_tags)(ctx, kind, name(opts), opts.tags)

        return run_change

    def setup_show(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("object_name", metavar=metavar)

    def setup_change(parser: argparse.ArgumentParser) -> None:
        add_tag_source_option(parser)
        add_priority_option(parser)
        add_submit_options(parser)
        parser.add_argument("object_name", metavar=metavar)
        parser.add_argument("tags", nargs="*", metavar="TAG")

    return {
        "list-tags": Command(show, setup_show, "List the tags of the given %s" % what),
        "add-tags": Command(change(True), setup_change, "Add tags to the given %s" % what),
        "remove-tags": Command(change(False), setup_change, "Remove tags from the given %s" % what),
    }
