"""scripts/bench cli: the wall time of the commands admins type.

A real one-node cluster (C{ganeti-local-cluster up}, fake hypervisor) with
20 diskless instances; then, each command run many times as a user runs it
(a new process every time, through the installed console script):

  - C{gnt-debug delay 0.001}: a job submitted, followed and reported;
  - C{gnt-instance list}: a query of the 20 instances, formatted;
  - C{gnt-<tool> --help} for every tool: the start-up cost alone.

The median of each is reported (for C{--help} the slowest tool's median),
with the instructions the client process executes for each (callgrind,
when valgrind is installed: unlike the wall time they do not depend on the
machine's load).
Prints a table, then one JSON line: C{cli_delay_ms}, C{cli_list_ms},
C{cli_help_ms}.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

import orjson

from ganeti.luxi.client import LuxiClient
from tests.bench.bench_instances import batch, cluster_down, create_op, failures

BIN = os.path.dirname(sys.executable)
TOOLS = ("gnt-backup", "gnt-cluster", "gnt-debug", "gnt-group", "gnt-instance", "gnt-job", "gnt-node",
         "gnt-os", "gnt-storage")
INSTANCES = 20
ROUNDS = 25


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def wall_ms(argv: list[str], env: dict[str, str], rounds: int = ROUNDS) -> float:
    """The median wall time of running C{argv} C{rounds} times; fails loudly on an error."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        samples.append((time.perf_counter() - start) * 1000)
        if done.returncode != 0:
            raise SystemExit("%s failed (%d): %s" % (" ".join(argv), done.returncode, done.stderr))
    return median(samples)


def instructions_m(argv: list[str], env: dict[str, str]) -> float | None:
    """Millions of instructions C{argv} executes (callgrind), or None without valgrind."""
    if not shutil.which("valgrind"):
        return None
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + argv,
                          env=env, capture_output=True, text=True)
    for line in done.stderr.splitlines():
        if "Collected :" in line:
            return round(int(line.rsplit(":", 1)[1]) / 1e6, 1)
    return None


def main() -> None:
    directory = tempfile.mkdtemp(prefix="gnt-bench-cli-")
    done = subprocess.run([os.path.join(BIN, "ganeti-local-cluster"), "up", "--dir", directory, "--nodes", "1",
                           "--name", "cli.bench.local", "--domain", "bench.local"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit("ganeti-local-cluster up failed:\n%s%s" % (done.stdout, done.stderr))
    root = os.path.join(directory, "node1")
    env = dict(os.environ, GANETI_ROOT=root)
    try:
        client = LuxiClient(os.path.join(root, "var/run/ganeti/socket/ganeti-master"))
        names = ["inst%02d.bench.local" % i for i in range(INSTANCES)]
        _, statuses, ids = batch(client, [[create_op(n)] for n in names])
        problems = failures(client, ids, statuses)
        client.close()
        if problems:
            raise SystemExit("instance creation failed: %s" % problems[:3])
        tool = lambda name: os.path.join(BIN, name)  # noqa: E731
        delay = wall_ms([tool("gnt-debug"), "delay", "0.001"], env)
        listing = wall_ms([tool("gnt-instance"), "list"], env)
        helps = {name: wall_ms([tool(name), "--help"], env, rounds=9) for name in TOOLS}
        instr = {what: instructions_m(argv, env) for what, argv in (
            ("delay", [tool("gnt-debug"), "delay", "0.001"]),
            ("list", [tool("gnt-instance"), "list"]),
            ("help", [tool("gnt-instance"), "--help"]),
            ("bare", [sys.executable, "-c", "pass"]),
        )}
        bare = wall_ms([sys.executable, "-c", "pass"], env)
    finally:
        if not os.environ.get("BENCH_KEEP"):
            cluster_down(directory)
            shutil.rmtree(directory, ignore_errors=True)
    slowest = max(helps, key=lambda name: helps[name])
    results = {
        "cli_delay_ms": round(delay, 1),
        "cli_list_ms": round(listing, 1),
        "cli_help_ms": round(helps[slowest], 1),
        "cli_help_slowest": slowest,
        "cli_delay_minstr": instr["delay"],
        "cli_list_minstr": instr["list"],
        "cli_help_minstr": instr["help"],
        "python_bare_minstr": instr["bare"],
        "python_bare_ms": round(bare, 1),
        "load_avg": round(os.getloadavg()[0], 2),
    }
    print("%-46s %10s %10s %14s" % ("command (median wall time)", "value", "target", "Ganeti 3.0.2"))
    print("%-46s %8.1f ms %10s %14s" % ("gnt-debug delay 0.001", delay, "<= 50 ms", "373 ms"))
    print("%-46s %8.1f ms %10s %14s" % ("gnt-instance list (%d instances)" % INSTANCES, listing, "<= 40 ms", "232 ms"))
    print("%-46s %8.1f ms %10s" % ("gnt-* --help, slowest (%s)" % slowest, helps[slowest], "<= 30 ms"))
    for name in TOOLS:
        print("%-46s %8.1f ms" % ("  %s --help" % name, helps[name]))
    for what, label in (("delay", "gnt-debug delay 0.001"), ("list", "gnt-instance list"),
                        ("help", "gnt-instance --help"), ("bare", "python -c pass")):
        if instr[what] is not None:
            print("%-46s %7.1f M" % ("  %s, instructions" % label, instr[what]))
    print("%-46s %8.1f ms" % ("python -c pass (the interpreter's floor)", bare))
    print("%-46s %10.2f" % ("load average while measuring", results["load_avg"]))
    print(orjson.dumps(results).decode())


if __name__ == "__main__":
    main()
