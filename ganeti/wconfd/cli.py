"""C{ganeti-wconfd-client}: talk to WConfD by hand, or seed a test root.

    ganeti-wconfd-client --root /tmp/n1 init-config --cluster-name c.test \\
        --node node1.test --primary-ip 127.0.1.1
    twistd -n --pidfile= ganeti-wconfd --root /tmp/n1 &
    ganeti-wconfd-client --root /tmp/n1 verify
    ganeti-wconfd-client --root /tmp/n1 locks
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ganeti import errors, serializer
from ganeti.paths import Paths
from ganeti.reactors import ITimeUNIXReactor

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ganeti-wconfd-client", description="Query or seed WConfD.")
    parser.add_argument("--root", help="root of the node's files (default: $GANETI_ROOT or /)")
    parser.add_argument("--socket", help="WConfD socket (default: under the root)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    init = sub.add_parser("init-config", help="write a one-node config.data (no daemon needed)")
    init.add_argument("--cluster-name", required=True)
    init.add_argument("--node", required=True, help="name of the master node")
    init.add_argument("--primary-ip", required=True, help="the master node's primary IP")
    init.add_argument("--force", action="store_true", help="overwrite an existing config.data")
    sub.add_parser("echo", help="check that WConfD answers").add_argument("text", nargs="?", default="ping")
    sub.add_parser("serial", help="print the config serial number")
    sub.add_parser("read-config", help="print config.data as WConfD holds it")
    show = sub.add_parser("show", help="print one entity")
    show.add_argument("kind", choices=["cluster", "node", "nodegroup", "instance", "network", "disk"])
    show.add_argument("key", nargs="?", default="", help="uuid or name")
    sub.add_parser("verify", help="verify the configuration (exit 1 on problems)")
    flush = sub.add_parser("flush", help="wait until config.data on disk is up to date")
    flush.add_argument("--distributed", action="store_true",
                       help="also wait until its distribution to the nodes (ssconf, candidates) ended")
    sub.add_parser("locks", help="list held locks, their owners and waiting requests")
    sub.add_parser("cleanup-locks", help="free the locks of dead owners now")
    return parser


def init_config(paths: Paths, args: argparse.Namespace) -> int:
    from ganeti.config.bootstrap import initial_config

    if os.path.exists(paths.config_data) and not args.force:
        print("%s exists; use --force to replace it" % paths.config_data, file=sys.stderr)
        return EXIT_FAILURE
    paths.ensure_dirs()
    config = initial_config(args.cluster_name, args.node, args.primary_ip)
    serializer.write_file(paths.config_data, config.to_json(), mode=0o640)
    print("wrote %s (cluster %s, master %s)" % (paths.config_data, args.cluster_name, args.node))
    return EXIT_OK


async def _run(reactor: ITimeUNIXReactor, paths: Paths, args: argparse.Namespace) -> int:
    from ganeti.wconfd.client import WConfdClient

    client = await WConfdClient.connect(reactor, args.socket or paths.wconfd_socket)
    try:
        command = args.command
        if command == "echo":
            print(await client.echo(args.text))
        elif command == "serial":
            print(await client.read_serial())
        elif command == "read-config":
            data, _serial = await client.read_config_bytes()
            sys.stdout.write(serializer.dumps(serializer.loads(data), indent=True).decode() + "\n")
        elif command == "show":
            if args.kind == "cluster":
                entity = (await client.read_cluster()).to_dict()
            else:
                entity = await client.read_entity(args.kind, args.key)
            sys.stdout.write(serializer.dumps(entity, indent=True).decode() + "\n")
        elif command == "verify":
            problems = await client.verify_config()
            for problem in problems:
                print(problem)
            if problems:
                return EXIT_FAILURE
            print("configuration is consistent")
        elif command == "flush":
            serial = await client.flush_config(distributed=args.distributed)
            print("config.data holds serial %d%s" % (serial, ", distributed" if args.distributed else ""))
        elif command == "locks":
            owners, pending = await client.list_locks_waiting_status()
            print("%-50s %-10s %s" % ("Name", "Mode", "Owner"))
            for lock, holders in owners:
                for owner, mode in holders or [[None, "-"]]:
                    print("%-50s %-10s %s" % (lock, mode, owner[0] if owner else "-"))
            for prio, owner, request in pending:
                print("pending (priority %s) for %s: %s" % (prio, owner[0], ", ".join("%s:%s" % tuple(r) for r in request)))
        elif command == "cleanup-locks":
            dead = await client.cleanup_locks()
            print("freed the locks of %d dead owner(s)" % len(dead))
        return EXIT_OK
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    paths = Paths.from_option(args.root)
    if args.command == "init-config":
        return init_config(paths, args)
    from twisted.internet import defer, task

    result: list[int] = []

    async def go(reactor: Any) -> None:
        try:
            result.append(await _run(reactor, paths, args))
        except errors.GenericError as e:
            print("Failure: %s" % e, file=sys.stderr)
            result.append(EXIT_FAILURE)
        except Exception as e:  # AMP remote errors: one clear line, no traceback
            print("Failure: %s" % (getattr(e, "description", None) or e), file=sys.stderr)
            result.append(EXIT_FAILURE)

    try:
        task.react(lambda reactor: defer.ensureDeferred(go(reactor)))
    except SystemExit:
        pass
    return result[0] if result else EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
