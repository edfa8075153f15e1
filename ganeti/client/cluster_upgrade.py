"""gnt-cluster upgrade --to VERSION | --resume.

Ganeti's command switches every node to another installed version (its
versioned directories and symlinks), upgrading or downgrading config.data
on the way.  This implementation has one installed version per node: an
admin installs the new package on every node and restarts its daemons
(C{ganeti-daemons restart}); C{upgrade --to VERSION} then finishes the
change as Ganeti's does around the switch, and refuses what Ganeti refuses:

  1. exactly one of C{--to} and C{--resume}; an upgrade in progress (the
     intent file C{var/lib/ganeti/intent-to-upgrade}, Ganeti's name and
     format) to another version must be resumed first;
  2. the version must parse, be within Ganeti's upgrade range (no major
     change but 2.16 <-> 3.0, one minor version down at most), and not be
     below the configuration's version (C{config.data} cannot be written
     in an older format here: Ganeti's C{cfgupgrade --downgrade} is not);
  3. "Verifying VERSION present on all nodes": every online node's NodeD
     must report it (C{node_verify}'s version check), else Ganeti's
     "Ganeti version V not installed on nodes ..." and nothing changes;
  4. drain the queue and wait for running jobs, pause the watcher for an
     hour, redistribute the configuration, undrain, remove the intent
     file, unpause the watcher and verify the cluster (its exit status is
     the command's).

C{--resume} runs the steps again for the version in the intent file
(nothing to do without one).  Each step says what it does, as Ganeti's.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from typing import Any

from ganeti import GANETI_RELEASE, ports
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Context
from ganeti.paths import Paths

INTENT_FILE = "intent-to-upgrade"
#: seconds the queue may take to empty after draining, and the poll interval
DRAIN_TIMEOUT, DRAIN_POLL = 3600.0, 1.0
#: the first version Ganeti upgrades automatically from or to
FIRST_UPGRADE_VERSION = (2, 10, 0)
_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """C{2.16} or C{3.0.2} as a tuple (Ganeti's C{ParseVersion}); C{None} if it is not one."""
    match = _VERSION.match(text or "")
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def config_version_tuple(number: int) -> tuple[int, int, int]:
    """config.data's C{version} (Ganeti's C{BuildVersion}: major * 1000000 + minor * 10000 + revision)."""
    return number // 1000000, number // 10000 % 100, number % 10000


def refusal(target: tuple[int, int, int], current: tuple[int, int, int], config: tuple[int, int, int]) -> str | None:
    """Why the cluster cannot go to C{target} (Ganeti's C{UpgradeRange}, and
    the configuration's own version); C{None}: it can."""
    if target < FIRST_UPGRADE_VERSION or current < FIRST_UPGRADE_VERSION:
        return "automatic upgrades only supported from 2.10 onwards"
    if target[0] != current[0] and {current[:2], target[:2]} != {(2, 16), (3, 0)}:
        return "major version up- or downgrades are only supported between 2.16 and 3.0"
    if target[1] < current[1] - 1 and target[0] == current[0]:
        return "can only downgrade one minor version at a time"
    if target[:2] < config[:2]:
        return ("the configuration is at version %d.%d; this implementation cannot write an older configuration"
                " format (no cfgupgrade --downgrade), so a downgrade below it is refused" % config[:2])
    return None


def _intent_path(paths: Paths) -> str:
    return os.path.join(paths.data_dir, INTENT_FILE)


def read_intent(paths: Paths) -> tuple[str, str] | None:
    """(old version, target) of the upgrade in progress; Ganeti's format:
    the versions and the pid, comma-separated."""
    try:
        with open(_intent_path(paths)) as handle:
            parts = handle.read().strip().split(",")
    except FileNotFoundError:
        return None
    return (parts[0], parts[1]) if len(parts) == 3 else None


def _write_intent(paths: Paths, target: str) -> None:
    with open(_intent_path(paths), "w") as handle:
        handle.write("%s,%s,%d" % (GANETI_RELEASE, target, os.getpid()))


def _remove_intent(paths: Paths) -> None:
    try:
        os.unlink(_intent_path(paths))
    except FileNotFoundError:
        pass


def node_versions(ctx: Context, rpc_port: int) -> dict[str, str | None]:
    """The software version each online node's NodeD reports (C{None}: no answer)."""
    from ganeti.client.cluster_commands import _react, _rpc, online_nodes
    from ganeti.rpc import procedures

    targets = online_nodes(ctx, [], None)
    (cluster_name,) = ctx.client().query_config_values(["cluster_name"])
    call = procedures.node_verify.call({"version": None}, cluster_name)
    found: dict[str, str | None] = {}

    async def main(reactor: Any) -> int:
        rpc = _rpc(reactor, ctx, rpc_port)
        try:
            for name, address in targets:
                result = await rpc.run_one(name, address, call)
                version = (result.payload or {}).get("version") if not result.failed else None
                found[name] = str(version[1]) if isinstance(version, list) and len(version) == 2 else None
        finally:
            await rpc.close()
        return 0

    _react(main)
    return found


def _wait_for_jobs(ctx: Context) -> bool:
    """Whether the running and queued jobs all ended within L{DRAIN_TIMEOUT}."""
    client = ctx.client()
    deadline = time.monotonic() + DRAIN_TIMEOUT
    while True:
        rows = client.query("job", ["status"], ["|", ["=", "status", "queued"], ["=", "status", "waiting"],
                                                ["=", "status", "running"], ["=", "status", "canceling"]])["data"]
        if not rows:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(DRAIN_POLL)


def upgrade(ctx: Context, opts: argparse.Namespace) -> int:
    if opts.resume == (opts.to is not None):
        ctx.err("Precisely one of the options --to and --resume has to be given")
        return EXIT_FAILURE
    paths = Paths.from_option(ctx.root)
    intent = read_intent(paths)
    if not opts.resume and intent is not None:
        if intent[1] != opts.to:
            ctx.err("An upgrade from %s to %s is in progress; use --resume to finish it first" % intent)
            return EXIT_FAILURE
        ctx.err("An upgrade is already in progress. Target version matches, resuming.")
        opts.resume, opts.to = True, None
    if opts.resume:
        if intent is None:
            ctx.out("No upgrade in progress; nothing to resume.")
            return EXIT_SUCCESS
        target_text = intent[1]
    else:
        target_text = opts.to
    target = parse_version(target_text)
    if target is None:
        ctx.err("Could not parse version string %s" % target_text)
        return EXIT_FAILURE
    from ganeti import serializer

    config = serializer.read_json(paths.config_data)
    why = refusal(target, parse_version(GANETI_RELEASE) or (0, 0, 0), config_version_tuple(int(config["version"])))
    if why is not None:
        ctx.err("Cannot upgrade to %s: %s" % (target_text, why))
        return EXIT_FAILURE
    if not opts.resume:
        _write_intent(paths, target_text)
    ctx.out("Verifying %s present on all nodes" % target_text)
    versions = node_versions(ctx, opts.rpc_port)
    missing = sorted(name for name, version in versions.items() if version != target_text)
    if missing:
        ctx.err("Ganeti version %s not installed on nodes %s" % (target_text, ", ".join(missing)))
        for name in missing:
            ctx.err("  %s: %s" % (name, versions[name] or "no answer"))
        _remove_intent(paths)
        return EXIT_FAILURE
    return _finish(ctx, paths)


def _finish(ctx: Context, paths: Paths) -> int:
    """The steps Ganeti runs around its version switch (which has no
    counterpart here: every node already runs the version)."""
    from ganeti.client.jobs import JobReporter, opcode, poll_job

    client = ctx.client()
    ctx.out("Draining queue")
    client.set_drain_flag(True)
    if not _wait_for_jobs(ctx):
        ctx.err("Failed to completely empty the queue.")
        client.set_drain_flag(False)
        _remove_intent(paths)
        return EXIT_FAILURE
    ctx.out("Pausing the watcher for one hour.")
    client.set_watcher_pause(time.time() + 3600)
    ctx.out("Redistributing the configuration.")
    poll_job(client, client.submit_job_to_drained_queue([opcode(ctx, "OP_CLUSTER_REDIST_CONF")]), JobReporter(ctx))
    ctx.out("Undraining the queue.")
    client.set_drain_flag(False)
    _remove_intent(paths)
    ctx.out("Unpausing the watcher.")
    client.set_watcher_pause(None)
    ctx.out("Verifying cluster.")
    return _verify(ctx)


def _verify(ctx: Context) -> int:
    """C{gnt-cluster verify}: OP_CLUSTER_VERIFY and the jobs it submits, followed; 1 when one failed or found an error."""
    from ganeti.client.jobs import follow_up_jobs, opcode, submit_opcodes

    (result,) = submit_opcodes(ctx, [opcode(ctx, "OP_CLUSTER_VERIFY")])
    results = follow_up_jobs(ctx, result)
    bad_jobs = sum(1 for ok, _ in results if not ok)
    if bad_jobs:
        ctx.out("%s job(s) failed while verifying the cluster." % bad_jobs)
    return EXIT_SUCCESS if not bad_jobs and all(value and value[0] for ok, value in results) else EXIT_FAILURE


def setup_upgrade(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--to", metavar="VERSION", help="Upgrade (or downgrade) to this version")
    parser.add_argument("--resume", action="store_true", help="Resume an interrupted upgrade")
    parser.add_argument("--rpc-port", type=ports.port_number, default=ports.NODED, metavar="PORT",
                        help="Port of the cluster's node daemons (default %d)" % ports.NODED)
