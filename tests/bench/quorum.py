"""The "majority on" mode of the WConfD and jobs benchmarks.

C{--candidates N}: the master (node1) and C{N} more nodes, all master
candidates, each with its own ganeti-noded on loopback (real TLS, a
L{LoopbackCluster}); WConfD then acknowledges a config change only once a
majority of the candidates hold it, and LuxiD shows a job's final status
only once its final job file is on a majority.  Nodes a benchmark adds to
make the config big (L{grow}) are offline: nothing is sent to them, so the
figures are those of the majority path alone.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Awaitable, Callable

import attrs

from ganeti.jobs import replicas
from ganeti.objects import ConfigData
from ganeti.paths import Paths
from ganeti.testing.cluster import LoopbackCluster, loopback_config, node_addresses, serial_of
from ganeti.testing.daemons import make_root, remove_root


def parse_candidates(argv: list[str], prog: str) -> int:
    """The C{--candidates N} option of a benchmark (0: the single-node mode only)."""
    parser = argparse.ArgumentParser(prog=prog, description="Also measure with N master candidates besides the "
                                     "master (config changes and final job statuses wait for a majority).")
    parser.add_argument("--candidates", type=int, default=0, metavar="N",
                        help="master candidates besides the master (default 0: only the single-node mode)")
    args = parser.parse_args(argv)
    if args.candidates < 0:
        parser.error("--candidates must be 0 or more")
    return int(args.candidates)


def candidate_config(candidates: int, grow: Callable[[ConfigData], ConfigData] | None = None) -> ConfigData:
    """The config of the master and C{candidates} candidates (node1..),
    grown by C{grow} (whose new nodes are made offline)."""
    names = list(node_addresses(1 + candidates))
    config = loopback_config(1 + candidates, candidate_pool_size=10, candidates=names[1:])
    if grow is None:
        return config
    grown = grow(config)
    nodes = {uuid: node if uuid in config.nodes else attrs.evolve(node, offline=True, master_candidate=False)
             for uuid, node in grown.nodes.items()}
    return attrs.evolve(grown, nodes=nodes)


def config_reached(config: ConfigData) -> Callable[[Paths], bool]:
    """Whether a candidate holds a config newer than C{config}."""
    return lambda paths: (serial_of(paths) or 0) > config.serial_no


def job_reached(job_id: int) -> Callable[[Paths], bool]:
    """Whether a candidate holds job C{job_id} in a final status."""

    def check(paths: Paths) -> bool:
        for name in ("job-%d" % job_id, "archive/%d/job-%d" % (job_id // 10000, job_id)):
            try:
                with open(os.path.join(paths.queue_dir, name), "rb") as handle:
                    return replicas.job_status(handle.read()) in ("success", "error", "canceled")
            except FileNotFoundError:
                continue
        return False

    return check


async def with_cluster(reactor: Any, config: ConfigData, candidates: int, body: Callable[[Any], Awaitable[Any]],
                       reached: Callable[[Paths], bool], *, luxid: bool = False) -> Any:
    """Run C{body(master paths)} with the cluster's daemons up (WConfD, and
    LuxiD if asked); then check that the mode really ran: C{reached} is true
    of every candidate's root."""
    root = make_root("gntq")
    cluster = LoopbackCluster(reactor, root, config, nodes=1 + candidates, luxid=luxid, prefix="gntq")
    try:
        await cluster.start()
        # steady state: WConfD's first push (the whole config.data, which each candidate parses once) is
        # its start-up, not part of the figures (the single-node mode leaves out the daemon's start too)
        await cluster.until(lambda: all(serial_of(r) is not None for r in cluster.roots[1:]), timeout=120)
        result = await body(cluster.master)
        await cluster.until(lambda: all(reached(r) for r in cluster.roots[1:]), timeout=60)
        return result
    finally:
        await cluster.stop()
        remove_root(root)
