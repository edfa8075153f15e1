"""One crash trial (L{run_trial}: the harness of L{ganeti.testing.chaos}, then
the checks of L{ganeti.testing.chaos_checks}), and C{scripts/chaos}: the long
version of the crash trials, and what C{scripts/bench chaos} shares with it.

    scripts/chaos [--trials N] [--time-limit SECONDS] [--fault NAME] [--seed S]

runs trials in turn over the faults (all, or the one named), on one 3-node
loopback cluster (a new one after a trial that left it broken), until N
trials ran or the time limit passed; prints each trial that broke a
promise as it ends, then a table per fault.  Exit status 1 if any trial
broke a promise.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from typing import Any, Callable

from twisted.internet import defer, task
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread

from ganeti.testing import chaos, chaos_checks
from ganeti.testing.chaos import FAULTS, TABLE_HEADER, ChaosCluster, TrialResult, summarize, table_row
from ganeti.testing.daemons import make_root, remove_root


async def run_trial(cluster: ChaosCluster, fault: str, rng: random.Random, *, seconds: float = 4.0,
                    rate: float = 8.0, drain_timeout: float = 120.0) -> TrialResult:
    """One trial: the stream for C{seconds}, C{fault} at a random moment
    in it, then the checks of L{ganeti.testing.chaos_checks}."""
    seed = rng.randrange(1 << 30)
    trial_rng = random.Random(seed)
    result = chaos.TrialResult(fault=fault, seed=seed)
    ledger = chaos.Ledger()
    stream = chaos.JobStream(trial_rng, "%x" % seed)
    stop, watcher_stop = threading.Event(), threading.Event()
    submitter = deferToThread(chaos.stream_jobs, cluster.master, stream, ledger, stop, rate)
    watcher = deferToThread(chaos.watch_jobs, cluster.master, ledger, watcher_stop)
    try:
        try:
            await deferLater(cluster.reactor, trial_rng.uniform(0.5, seconds * 0.6), lambda: None)
            result.recovery, result.killed_job = await chaos.inject(cluster, fault, ledger, trial_rng)
            if fault == "job" and result.killed_job is None:
                result.violations.append("no job process ran to be killed (the harness injected nothing)")
            await deferLater(cluster.reactor, 1.0, lambda: None)  # the stream goes on after the restart
        finally:
            stop.set()
            await submitter
        await chaos_checks.check_trial(cluster, ledger, result, drain_timeout)
    except chaos.RestartFailed as e:
        result.violations.append(str(e))
        result.acknowledged, result.broken = len(ledger.acknowledged), True
        return result
    except Exception as e:  # a check could not talk to the cluster: that is a finding too
        result.violations.append("the checks could not run: %s: %s" % (type(e).__name__, e))
        result.acknowledged, result.broken = len(ledger.acknowledged), True
        return result
    finally:
        watcher_stop.set()
        await watcher
    chaos_checks.check_ledger(ledger, result)
    return result


async def run_trials(reactor: Any, faults: list[str], trials: int, time_limit: float, seed: int,
                     report: Callable[[str], None] = print, seconds: float = 4.0) -> list[TrialResult]:
    """Up to C{trials} trials (round robin over C{faults}) within C{time_limit}
    seconds (a trial under way finishes); their results."""
    rng = random.Random(seed)
    deadline = time.monotonic() + time_limit
    results: list[TrialResult] = []
    cluster: ChaosCluster | None = None
    root = None
    try:
        while len(results) < trials and time.monotonic() < deadline:
            if cluster is None:
                root = make_root("gchr")
                cluster = await ChaosCluster(reactor, root, prefix="gchr").start()
            fault = faults[len(results) % len(faults)]
            began = time.monotonic()
            result = await run_trial(cluster, fault, rng, seconds=seconds)
            results.append(result)
            state = "ok" if not result.violations else "BROKEN"
            report("trial %d %s: %s in %.0fs" % (len(results), fault, state, time.monotonic() - began))
            if result.violations:
                report(result.describe())
            if result.broken:
                await cluster.stop()
                remove_root(root)  # type: ignore[arg-type]
                cluster = None
    finally:
        if cluster is not None:
            await cluster.stop()
            remove_root(root)  # type: ignore[arg-type]
    return results


def print_table(results: list[TrialResult], report: Callable[[str], None] = print) -> None:
    report(TABLE_HEADER)
    for summary in summarize(results).values():
        report(table_row(summary))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/chaos", description="Crash trials on a 3-node loopback cluster.")
    parser.add_argument("--trials", type=int, default=len(FAULTS) * 3, help="how many trials (default: 3 per fault)")
    parser.add_argument("--time-limit", type=float, default=1800.0, help="stop starting trials after SECONDS")
    parser.add_argument("--fault", choices=sorted(FAULTS), action="append",
                        help="only this fault (repeatable; default: every fault in turn)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock; printed)")
    parser.add_argument("--stream-seconds", type=float, default=4.0, help="how long each trial's job stream runs")
    args = parser.parse_args(argv)
    if args.trials < 1 or args.time_limit <= 0 or args.stream_seconds <= 0:
        parser.error("--trials, --time-limit and --stream-seconds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    seed = args.seed if args.seed is not None else int(time.time())
    print("seed %d" % seed, flush=True)
    results: list[TrialResult] = []

    async def run(reactor: Any) -> None:
        results.extend(await run_trials(reactor, args.fault or sorted(FAULTS), args.trials, args.time_limit, seed,
                                        report=lambda line: print(line, flush=True), seconds=args.stream_seconds))

    try:
        task.react(lambda reactor: defer.ensureDeferred(run(reactor)))
    except SystemExit as e:  # react() always exits; a failed run exits non-zero
        if e.code not in (0, None):
            raise
    print_table(results)
    return 1 if any(r.violations for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
