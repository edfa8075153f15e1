"""scripts/bench memory: the memory of a real cluster's daemons, per node role.

Brings up a real cluster with C{ganeti-local-cluster}'s steps, in a network
namespace of its own (C{unshare -n}: the standard ports on 127.0.1.N, out
of every other test's way), then reads every daemon's RSS, PSS and
anonymous memory from C{/proc/PID/smaps_rollup}:

 1. a one-node master made by C{gnt-cluster init} (NodeD, ConfD, WConfD,
    RAPI, LuxiD, MonD, and the warm launcher NodeD keeps on a master
    candidate), idle: LuxiD has retired its job fork server; then
    C{gnt-debug delay 0.001} four times (the first starts a fork server
    anew: C{first_job_after_idle_ms}, the fastest of the others
    C{next_jobs_ms}), and the master again after C{--jobs} jobs (with the
    fork server and the spare job process it keeps forked ahead);
 2. then a master candidate (node2) and a plain node (node3: the
    candidate pool size is 2) join with one-time tokens, and their
    daemons are measured, the master's again with them.

The master's PSS is read in step 1, while it is the only node: once other
nodes run on the same machine, their processes share its pages and its PSS
falls below what a real one-node master has.

Prints tables, then one JSON line: C{master_rss_mib}, C{master_pss_mib}
(idle), C{master_jobs_rss_mib}, C{master_jobs_pss_mib} (after the jobs),
C{candidate_rss_mib}, C{plain_node_rss_mib}, each process's
C{<role>_<daemon>_{rss,pss,anon}_mib}, Ganeti 3.0.2's figures on this kind
of machine (issue 27) and their ratios, and the runtime's layers
(L{memfloor.LAYERS}: C{python_rss_mib}, C{layer_*_rss_mib}).

Then RAPI's and NodeD's RSS before and after two floods of C{--flood}
TLS connections opened at once (C{rapi_flood_before_rss_mib},
C{rapi_flood_after_rss_mib}, C{noded_flood_*}).

    scripts/bench memory [--jobs N] [--settle SECONDS] [--flood N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

import orjson

from ganeti import daemons, localcluster, ports
from ganeti.luxi.client import LuxiClient
from ganeti.luxid.forkclient import recorded_pid
from ganeti.paths import Paths
from ganeti.testing import procs
from tests.bench import memfloor
from tests.bench.jobs import follow

#: Ganeti 3.0.2 on this kind of machine (issue 27): RSS of a one-node master's daemons, their PSS, a master
#: candidate's and a plain node's (NodeD and MonD)
GANETI = {"master_rss_mib": 173, "master_pss_mib": 127, "candidate_rss_mib": 89, "plain_node_rss_mib": 74}
#: set in the re-executed benchmark, inside its network namespace
INSIDE_ENV = "GANETI_BENCH_MEMORY_NETNS"
DOMAIN = "local"


def smaps_rollup(pid: int) -> tuple[float, float, float]:
    """C{(rss, pss, anon)} of one process, in MiB."""
    values = {"Rss:": 0, "Pss:": 0, "Anonymous:": 0}
    with open("/proc/%d/smaps_rollup" % pid) as handle:
        for line in handle:
            fields = line.split()
            if fields and fields[0] in values:
                values[fields[0]] = int(fields[1])
    return values["Rss:"] / 1024.0, values["Pss:"] / 1024.0, values["Anonymous:"] / 1024.0


def children(pid: int) -> list[int]:
    """The direct children of C{pid}."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def node_processes(paths: Paths) -> dict[str, int]:
    """The daemons a node runs now (by their pid files), LuxiD's fork server, its children (C{jobspare}: at
    idle, the one spare job process it keeps forked ahead; a job running now would be C{jobspare2}...) and
    NodeD's warm launcher: every process a node keeps resident."""
    found: dict[str, int] = {}
    for spec in daemons.DAEMONS:
        pid = daemons.running_pid(paths, spec)
        if pid is not None and pid > 0:
            found[spec.name[len("ganeti-"):]] = pid
    if "noded" in found:
        for child in children(found["noded"]):
            if "ganeti.warmstart" in procs.argv(child):
                found["warmstart"] = child
    forkserver = recorded_pid(paths)
    if forkserver is not None:
        found["forkserver"] = forkserver
    if "forkserver" in found:  # forked, not run: they have its command line
        for number, child in enumerate(sorted(children(found["forkserver"])), 1):
            found["jobspare" + (str(number) if number > 1 else "")] = child
    return found


def measure(paths: Paths) -> dict[str, tuple[float, float, float]]:
    return {name: smaps_rollup(pid) for name, pid in sorted(node_processes(paths).items())}


def tool(name: str, paths: Paths, *args: str) -> str:
    done = subprocess.run([os.path.join(localcluster.BIN, name), "--root", paths.root, *args],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit("%s %s failed:\n%s" % (name, " ".join(args), done.stdout + done.stderr))
    return done.stdout


def timed_delay(paths: Paths) -> float:
    """Milliseconds of one C{gnt-debug delay 0.001} (the command as an admin runs it)."""
    started = time.perf_counter()
    tool("gnt-debug", paths, "delay", "0.001")
    return (time.perf_counter() - started) * 1000


def run_jobs(paths: Paths, count: int) -> None:
    client = LuxiClient(paths.luxi_socket)
    try:
        for n in range(count):
            op = {"OP_ID": "OP_TEST_DELAY", "duration": 0.001}
            if n % 4 == 1:  # some jobs reach NodeD through RPC, some read the config
                op["on_nodes"] = ["node1.%s" % DOMAIN]
            job_id = client.submit_job([op] if n % 4 != 2 else [{"OP_ID": "OP_CLUSTER_VERIFY_CONFIG"}])
            status = follow(client, job_id)
            if status != "success":
                raise SystemExit("job %s ended %s" % (job_id, status))
        for _ in range(max(1, count // 10)):
            client.query("node", ["name", "mfree", "dfree"], None)
    finally:
        client.close()


def flood(address: str, port: int, context: ssl.SSLContext, request: bytes, count: int) -> int:
    """C{count} TLS connections at once (100 per source address), each sending C{request};
    read what comes back, then close them all.  How many connected."""
    held = []
    for n in range(count):
        try:
            sock = socket.create_connection((address, port), timeout=30, source_address=("127.0.2.%d" % (1 + n // 100), 0))
            held.append(context.wrap_socket(sock))
            held[-1].sendall(request)
        except OSError:
            pass
    for sock in held:
        try:
            sock.recv(65536)
        except OSError:
            pass
        sock.close()
    return len(held)


def flood_figures(paths: Paths, count: int, settle: float) -> list[tuple[str, float, float]]:
    """RAPI's and NodeD's RSS before and after C{count} connections (twice)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    noded_context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    noded_context.check_hostname, noded_context.verify_mode = False, ssl.CERT_NONE
    noded_context.load_cert_chain(paths.server_pem)  # NodeD requires the cluster certificate
    address = daemons.read_node_identity(paths)["address"]
    found = node_processes(paths)
    rows = []
    for name, port, ctx, request in (
            ("rapi", daemons.port_of(daemons.BY_NAME["ganeti-rapi"]), context, b"GET /2/info HTTP/1.1\r\n\r\n"),
            ("noded", ports.NODED, noded_context,
             b"POST /version HTTP/1.1\r\nContent-Length: 2\r\n\r\n[]")):
        before = smaps_rollup(found[name])[0]
        for _ in range(2):
            flood(address, port, ctx, request, count)
        time.sleep(settle)
        rows.append((name, before, smaps_rollup(found[name])[0]))
    return rows


#: what the rows that are not a daemon's name are
ROWS = {"forkserver": "LuxiD's job fork server", "jobspare": "the fork server's spare job process",
        "warmstart": "NodeD's warm launcher"}


def table(title: str, figures: dict[str, tuple[float, float, float]]) -> list[str]:
    legend = ["%s: %s" % (name, what) for name, what in ROWS.items() if name in figures]
    lines = ["", title + (" (%s)" % "; ".join(legend) if legend else ""),
             "%-12s %8s %8s %8s" % ("MiB", "RSS", "PSS", "anon")]
    for name, values in figures.items():
        lines.append("%-12s %8.1f %8.1f %8.1f" % (name, *values))
    total = [sum(values[i] for values in figures.values()) for i in range(3)]
    lines.append("%-12s %8.1f %8.1f %8.1f" % ("total", *total))
    return lines


def total(figures: dict[str, tuple[float, float, float]], index: int, skip: tuple[str, ...] = ()) -> float:
    return round(sum(values[index] for name, values in figures.items() if name not in skip), 1)


def run(jobs: int, settle: float, flood_count: int) -> str:
    directory = tempfile.mkdtemp(prefix="gntbm", dir="/tmp")
    master = localcluster.node_root(directory, 1)
    lines: list[str] = []
    result: dict[str, float] = {}

    def record(role: str, figures: dict[str, tuple[float, float, float]]) -> None:
        for name, values in figures.items():
            for key, value in zip(("rss", "pss", "anon"), values):
                result["%s_%s_%s_mib" % (role, name, key)] = round(value, 1)

    try:
        if localcluster.up(directory, 1, "cluster.%s" % DOMAIN, DOMAIN, candidate_pool_size=2) != 0:
            raise SystemExit("ganeti-local-cluster could not bring the master up")
        from ganeti.luxid.forkclient import IDLE

        time.sleep(max(settle, IDLE + 3))  # idle: LuxiD retires its fork server after IDLE s without a job
        idle = measure(master)
        record("master", idle)
        lines += table("one-node master, idle after gnt-cluster init (fork server retired after %g s)" % IDLE, idle)
        delays = [timed_delay(master) for _ in range(4)]  # the first starts a fork server anew
        result.update(first_job_after_idle_ms=round(delays[0], 1), next_jobs_ms=round(min(delays[1:]), 1))
        lines += ["", "gnt-debug delay 0.001: first after idle %.0f ms, the next three %s ms"
                  % (delays[0], " / ".join("%.0f" % d for d in delays[1:]))]
        run_jobs(master, jobs)
        time.sleep(settle)
        after = measure(master)
        record("master_jobs", after)
        lines += table("one-node master, %g s after %d jobs (the spare job process still waiting)" % (settle, jobs),
                       after)
        floods = flood_figures(master, flood_count, settle)
        lines += ["", "after 2 x %d TLS connections at once" % flood_count, "%-12s %8s %8s" % ("RSS MiB", "before", "after")]
        for name, before, after_flood in floods:
            lines.append("%-12s %8.1f %8.1f" % (name, before, after_flood))
            result["%s_flood_before_rss_mib" % name] = round(before, 1)
            result["%s_flood_after_rss_mib" % name] = round(after_flood, 1)
        for number in (2, 3):
            if localcluster.join(directory, number, DOMAIN) != 0:
                raise SystemExit("node%d could not join" % number)
        roles = tool("gnt-node", master, "list", "--no-headers", "-o", "name,role").split()
        if roles[3] != "C" or roles[5] != "R":
            raise SystemExit("expected node2 a candidate and node3 a plain node: %s" % roles)
        time.sleep(settle)
        candidate = measure(localcluster.node_root(directory, 2))
        plain = measure(localcluster.node_root(directory, 3))
        record("candidate", candidate)
        record("plain", plain)
        lines += table("master candidate (node2), in a 3-node cluster", candidate)
        lines += table("plain node (node3), in a 3-node cluster (PSS shared with the other nodes)", plain)
        result.update(
            master_rss_mib=total(idle, 0), master_pss_mib=total(idle, 1), master_anon_mib=total(idle, 2),
            master_jobs_rss_mib=total(after, 0), master_jobs_pss_mib=total(after, 1),
            master_no_warmstart_rss_mib=total(idle, 0, ("warmstart",)),
            master_no_warmstart_pss_mib=total(idle, 1, ("warmstart",)),
            candidate_rss_mib=total(candidate, 0), candidate_no_warmstart_rss_mib=total(candidate, 0, ("warmstart",)),
            plain_node_rss_mib=total(plain, 0),
        )
    finally:
        localcluster.down(directory, purge=False)
        shutil.rmtree(directory, ignore_errors=True)
    runtime = memfloor.layers()
    lines.append("")
    lines.append("%-34s %8s %8s %6s" % ("", "ours", "Ganeti", "ratio"))
    for key, theirs in GANETI.items():
        ratio = result[key] / theirs
        result["ganeti_" + key] = theirs
        result["ratio_" + key[:-4]] = round(ratio, 2)
        lines.append("%-34s %8.1f %8d %6.2f" % (key, result[key], theirs, ratio))
    lines.append("the runtime alone (RSS): an interpreter %.1f MiB; with twistd's runner and the reactor %.1f;"
                 % (runtime["python"], runtime["twistd"]))
    lines.append("  with the standard library's ssl %.1f; with twisted.web's server %.1f"
                 " (twistd with pyOpenSSL and cryptography instead: %.1f)"
                 % (runtime["tls"], runtime["web"], runtime["pyopenssl"]))
    result.update(python_rss_mib=round(runtime["python"], 1))
    for name in ("twistd", "tls", "web", "pyopenssl"):
        result["layer_%s_rss_mib" % name] = round(runtime[name], 1)
    lines.append(orjson.dumps(result).decode())
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench memory")
    parser.add_argument("--jobs", type=int, default=40, help="jobs run before the second measure (default 40)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds idle before measuring (default 5)")
    parser.add_argument("--flood", type=int, default=1100,
                        help="TLS connections opened at once against the master's RAPI and NodeD (default 1100)")
    options = parser.parse_args()
    if not os.environ.get(INSIDE_ENV):  # the standard ports, in a network namespace of our own
        if shutil.which("unshare") is None or os.geteuid() != 0:
            raise SystemExit("scripts/bench memory needs root and unshare(1): it runs a real cluster on the"
                             " standard ports in a network namespace of its own")
        env = dict(os.environ, **{INSIDE_ENV: "1"})
        inner = "ip link set lo up && exec \"$@\""
        return subprocess.call(["unshare", "--net", "sh", "-c", inner, "sh", sys.executable, "-m",
                                "tests.bench.bench_memory", *sys.argv[1:]], env=env)
    print(run(options.jobs, options.settle, options.flood))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
