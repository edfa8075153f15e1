"""C{ganeti-local-cluster up|down|status}: a real multi-node cluster on one machine.

Each node gets its own root (C{DIR/node1}, C{DIR/node2}, ...) and loopback
address (127.0.1.1, 127.0.1.2, ...), with the standard ports; the cluster's master IP
is 127.0.1.254, an address of its own.  C{up} runs
C{gnt-cluster init} on node1, starts each other node's NodeD in unjoined
mode with a fresh one-time token, and joins it with C{gnt-node add
--join-token}: the certificates reach the node only through the
authenticated join.  Then the cluster runs like any other; the gnt-*
commands find it with C{--root DIR/node1} or C{GANETI_ROOT=DIR/node1}.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import subprocess
import sys
import time

from ganeti import daemons
from ganeti.paths import Paths

DEFAULT_DIR = "/tmp/ganeti-local-cluster"
#: The cluster's master IP: its own loopback address, beyond the nodes' 127.0.1.1 to 127.0.1.250 (Ganeti's
#: config check reports an address both the cluster and a node own).  With master netdev C{none} it is
#: only recorded, never configured.
MASTER_IP = "127.0.1.254"
BIN = os.path.dirname(sys.executable)


def node_root(directory: str, number: int) -> Paths:
    return Paths(os.path.join(os.path.abspath(directory), "node%d" % number))


def node_roots(directory: str) -> list[Paths]:
    if not os.path.isdir(directory):
        return []
    names = sorted((n for n in os.listdir(directory) if n.startswith("node") and n[4:].isdigit()), key=lambda n: int(n[4:]))
    return [Paths(os.path.join(os.path.abspath(directory), n)) for n in names]


def share_file_storage(directory: str, paths: Paths) -> None:
    """Make the node's sharedfile directory the cluster's one directory
    C{DIR/shared-file-storage}, so every node sees the same disks (a SAN)."""
    common = os.path.join(os.path.abspath(directory), "shared-file-storage")
    os.makedirs(common, exist_ok=True)
    link = paths.shared_file_storage_dir
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if not os.path.islink(link):
        if os.path.isdir(link):
            os.rmdir(link)  # only an empty one
        os.symlink(common, link)


def _tool(name: str, paths: Paths, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([os.path.join(BIN, name), "--root", paths.root, *args], capture_output=True, text=True)


def _wait_tcp(address: str, port: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not daemons.accepts_tcp(address, port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def up(directory: str, nodes: int, cluster_name: str, domain: str, candidate_pool_size: int | None = None) -> int:
    if node_roots(directory):
        print("%s already holds a cluster; run 'ganeti-local-cluster down --dir %s --purge' first" % (directory, directory))
        return 1
    if not 1 <= nodes <= 250:
        print("--nodes must be between 1 and 250")
        return 2
    if candidate_pool_size is not None and candidate_pool_size < 1:
        print("--candidate-pool-size must be at least 1")
        return 2
    master = node_root(directory, 1)
    # cluster-wide storage paths, each node keeps them under its own root
    pool = ["--candidate-pool-size", str(candidate_pool_size)] if candidate_pool_size is not None else []
    init = _tool(
        "gnt-cluster", master, "init", "--primary-ip", "127.0.1.1", "--master-ip", MASTER_IP,
        "--node-name", "node1.%s" % domain,
        "--file-storage-dir", "/srv/ganeti/file-storage",
        "--shared-file-storage-dir", "/srv/ganeti/shared-file-storage", *pool, cluster_name
    )
    print(init.stdout.rstrip())
    if init.returncode != 0:
        print(init.stderr.rstrip())
        return _stop_after_failure(directory)
    share_file_storage(directory, master)
    for number in range(2, nodes + 1):
        if join(directory, number, domain) != 0:
            return _stop_after_failure(directory)
    print()
    print("Cluster %s is up with %d node(s) under %s." % (cluster_name, nodes, os.path.abspath(directory)))
    print("Use it with:  export GANETI_ROOT=%s   (or --root %s on every command)" % (master.root, master.root))
    print("Stop it with: ganeti-local-cluster down --dir %s [--purge]" % directory)
    return 0


def _stop_after_failure(directory: str) -> int:
    """A failed C{up}: stop the daemons it started (a failed init may have started some: they would hold
    the ports and the files); the files stay for a look at the logs."""
    print("Stopping the daemons started so far; the files stay under %s (see the logs there)." % directory)
    down(directory, purge=False)
    return 1


def join(directory: str, number: int, domain: str) -> int:
    """Node C{number} (C{nodeN.DOMAIN} on 127.0.1.N) joins node1's cluster
    with a one-time token, then starts the daemons its role asks for."""
    master = node_root(directory, 1)
    paths = node_root(directory, number)
    name, address = "node%d.%s" % (number, domain), "127.0.1.%d" % number
    paths.ensure_dirs()
    share_file_storage(directory, paths)
    daemons.write_node_identity(paths, name, address)
    token = secrets.token_hex(16)
    argv, env = daemons.twistd_command(
        paths, daemons.BY_NAME["ganeti-noded"], ["--root", paths.root, "--bind", address, "--join-token", token]
    )
    started = subprocess.run(argv, cwd=paths.root, capture_output=True, text=True, env=env)
    if started.returncode != 0 or not _wait_tcp(address, 1811):
        print("%s: the node daemon did not start: %s" % (name, (started.stderr or started.stdout).strip()))
        return 1
    added = _tool("gnt-node", master, "add", "--primary-ip", address, "--join-token", token, name)
    if added.returncode != 0:
        print("%s: could not be added:\n%s" % (name, (added.stdout + added.stderr).strip()))
        return 1
    print("%s (%s) joined the cluster" % (name, address))
    deadline = time.monotonic() + 30  # WConfD pushes config.data to the new node, then ssconf
    while not (os.path.exists(paths.config_data) and os.path.exists(paths.ssconf("master_candidates"))) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    _wait_tcp(address, daemons.MOND.port)  # the joined noded starts MonD (as Ganeti's node setup)
    rest = daemons.start(paths, out=lambda line: None)  # the rest of its role's daemons (noded and mond run already)
    if rest != 0:
        print("%s: some daemons did not start; see %s" % (name, paths.log_dir))
    return 0


def down(directory: str, purge: bool) -> int:
    roots = node_roots(directory)
    for paths in reversed(roots):

        def out(line: str, root: str = paths.root) -> None:
            print("%s: %s" % (os.path.basename(root), line))

        try:
            daemons.stop(paths, out=out)
        except SystemExit:
            pass
    if purge and os.path.isdir(directory):
        shutil.rmtree(directory)
        print("removed %s" % directory)
    return 0


def status(directory: str) -> int:
    roots = node_roots(directory)
    if not roots:
        print("no cluster under %s" % directory)
        return 1
    worst = 0
    for paths in roots:
        print("%s (%s):" % (os.path.basename(paths.root), paths.root))
        try:
            worst |= daemons.status(paths, out=lambda line: print("  " + line))
        except SystemExit as e:
            print("  %s" % e)
            worst = 1
    return worst


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ganeti-local-cluster",
        description="Bring up, stop or show a real multi-node cluster on one machine: node N runs under"
        " DIR/nodeN on 127.0.1.N, joined to node1 with a one-time token.",
    )
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("--dir", default=DEFAULT_DIR, help="where the node roots live (default %(default)s)")
    parser.add_argument("--nodes", type=int, default=3, help="number of nodes for 'up' (default 3)")
    parser.add_argument("--name", default="cluster.local", help="cluster name (default %(default)s)")
    parser.add_argument("--domain", default="local", help="nodes are named nodeN.DOMAIN (default %(default)s)")
    parser.add_argument("--purge", action="store_true", help="with 'down': also remove the node roots")
    parser.add_argument("--candidate-pool-size", type=int, metavar="N",
                        help="with 'up': master candidates to keep (default: the cluster's, 10); the nodes past"
                        " the first N join as plain nodes")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.action == "up":
        return up(args.dir, args.nodes, args.name, args.domain, args.candidate_pool_size)
    if args.action == "down":
        return down(args.dir, args.purge)
    return status(args.dir)


if __name__ == "__main__":
    sys.exit(main())
