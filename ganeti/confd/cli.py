"""C{gnt-confd-query}: ask the cluster's confd daemons one question.

    gnt-confd-query [--root DIR] [--peer IP]... [--port N] [--timeout S] [--all] [-v] TYPE [QUERY]

TYPE is a request name (C{CLUSTER_MASTER}, C{node_role_byname}, ...) or its
number; QUERY is parsed as JSON when it is JSON (C{'{"3": [0, 1]}'}), else
taken as a string.  Prints the answer as JSON.  Exit status: 0 answered,
1 error status, 2 no answer or bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ganeti.confd import wire
from ganeti.reactors import ITimeUDPReactor

EXIT_OK, EXIT_ERROR, EXIT_NO_ANSWER = 0, 1, 2


def parse_type(text: str) -> int:
    if text.isdigit():
        return int(text)
    name = text.upper().replace("-", "_")
    if name not in wire.REQUEST_TYPES:
        raise argparse.ArgumentTypeError("unknown request type %r (known: %s)" % (text, ", ".join(wire.REQUEST_TYPES)))
    return wire.REQUEST_TYPES[name]


def parse_query(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gnt-confd-query", description="Query the cluster's confd daemons over UDP.")
    parser.add_argument("--root", default=None, help="node root (default: $GANETI_ROOT or /)")
    parser.add_argument("--peer", action="append", default=[], help="confd address (repeatable; default: ssconf master candidates)")
    parser.add_argument("--port", type=int, default=wire.PORT, help="confd UDP port (default 1814)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait (default 5)")
    parser.add_argument("--all", action="store_true", help="wait for every peer, not a majority")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every peer's reply")
    parser.add_argument("type", type=parse_type, help="request type name or number")
    parser.add_argument("query", nargs="?", default=None, help="query argument (JSON or a plain string)")
    return parser


async def run(reactor: ITimeUDPReactor, args: argparse.Namespace, out: Any = None) -> int:
    from ganeti.confd.client import ConfdClient, ConfdTimeout
    from ganeti.confd.service import read_key
    from ganeti.paths import Paths
    from ganeti.ssconf import SimpleStore

    out = out or sys.stdout
    paths = Paths.from_option(args.root)
    peers = args.peer or SimpleStore(paths).get_master_candidates_ips()
    client = ConfdClient(reactor, read_key(paths.hmac_key), peers, port=args.port, timeout=args.timeout)
    try:
        result = await client.query(args.type, parse_query(args.query), wait="all" if args.all else "majority")
    except ConfdTimeout as e:
        print("gnt-confd-query: %s" % e, file=sys.stderr)
        return EXIT_NO_ANSWER
    finally:
        client.close()
    if args.verbose:
        for reply in result.replies:
            print("# %s: status %d serial %d answer %s" % (reply.peer, reply.status, reply.serial, json.dumps(reply.answer)), file=out)
        print("# chosen: %s, serial %d, %d/%d replied%s%s" % (
            result.peer, result.serial, len(result.replies), result.sent,
            ", timed out" if result.timed_out else "", "" if result.consistent else ", INCONSISTENT"), file=out)
    print(json.dumps(result.answer), file=out)
    return EXIT_OK if result.ok else EXIT_ERROR


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if argv is None:  # the process's own command line: into the node's commands.log
        from ganeti.logfile import record_command
        from ganeti.paths import Paths

        record_command(Paths.from_option(args.root).log_dir, "gnt-confd-query", sys.argv[1:])
    from twisted.internet import defer, task

    from ganeti import errors

    def go(reactor: Any) -> Any:
        return defer.ensureDeferred(_guarded(reactor, args))

    async def _guarded(reactor: Any, args: argparse.Namespace) -> None:
        try:
            code = await run(reactor, args)
        except (errors.GenericError, OSError, ValueError) as e:
            print("gnt-confd-query: %s" % e, file=sys.stderr)
            code = EXIT_NO_ANSWER
        if code:
            raise SystemExit(code)

    task.react(go)
