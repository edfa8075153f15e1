"""scripts/bench rapi: GET /2/info and GET /2/instances?bulk=1 through ganeti-rapi.

Real daemons (WConfD, LuxiD, ganeti-rapi under twistd) in a temporary root;
8 load processes, each with one keep-alive HTTPS connection (so the load
generator is not the bottleneck: no shared GIL).  Prints a table, then one
JSON line.  Ganeti 3.0.2: /2/info 50 ms, bulk instances (20) 100 ms.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from twisted.internet import defer, task

from ganeti.config.bootstrap import grow, initial_config
from ganeti.rapi.testing import RapiStack
from ganeti.testing.daemons import make_root, remove_root

CLIENTS = 8

WORKER = r'''
import http.client, json, ssl, sys, time
host, port, path, seconds, warmup = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
conn = http.client.HTTPSConnection(host, port, context=ctx)
def get():
    conn.request("GET", path, headers={"Accept": "application/json"})
    response = conn.getresponse()
    body = response.read()
    if response.status != 200:
        raise SystemExit("%s: %s %s" % (path, response.status, body[:200]))
    return body
start_at = float(sys.argv[6])
while time.time() < start_at:
    time.sleep(0.001)
end_warm = time.perf_counter() + warmup
while time.perf_counter() < end_warm:
    get()
samples = []
deadline = time.perf_counter() + seconds
while time.perf_counter() < deadline:
    t = time.perf_counter()
    get()
    samples.append((time.perf_counter() - t) * 1000)
print(json.dumps(samples))
'''


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def load(stack: RapiStack, path: str, seconds: float, warmup: float = 0.5) -> dict[str, float]:
    start_at = time.time() + 1.0
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, stack.host, str(stack.port), path, str(seconds),
                          str(warmup), str(start_at)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(CLIENTS)
    ]
    samples: list[float] = []
    for proc in procs:
        out, err = proc.communicate(timeout=seconds + warmup + 120)
        if proc.returncode != 0:
            raise RuntimeError("load worker failed: %s" % err.decode()[-2000:])
        samples.extend(json.loads(out))
    return {
        "requests": len(samples),
        "rps": len(samples) / seconds,
        "p50_ms": percentile(samples, 50),
        "p99_ms": percentile(samples, 99),
    }


async def with_stack(reactor: Any, instances: int, body: Any) -> Any:
    paths = make_root("gntr")
    config = grow(initial_config("bench.test", "node1.test", "127.0.1.1"), nodes=4, instances=instances)
    stack = RapiStack(paths, config, "")
    try:
        await stack.start(reactor)
        return body(stack)
    finally:
        stack.stop()
        remove_root(paths)


async def main(reactor: Any) -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    results: dict[str, dict[str, float]] = {}

    def small(stack: RapiStack) -> None:
        results["info"] = load(stack, "/2/info", seconds)
        results["instances_bulk_20"] = load(stack, "/2/instances?bulk=1", seconds)

    def large(stack: RapiStack) -> None:
        results["instances_bulk_1000"] = load(stack, "/2/instances?bulk=1", seconds)

    await with_stack(reactor, 20, small)
    await with_stack(reactor, 1000, large)

    print("%-32s %10s %10s %10s %10s" % ("GET (8 keep-alive HTTPS clients)", "requests", "req/s", "p50 ms", "p99 ms"))
    labels = {"info": "/2/info", "instances_bulk_20": "/2/instances?bulk=1 (20)",
              "instances_bulk_1000": "/2/instances?bulk=1 (1000)"}
    for key, label in labels.items():
        r = results[key]
        print("%-32s %10d %10.0f %10.2f %10.2f" % (label, r["requests"], r["rps"], r["p50_ms"], r["p99_ms"]))
    summary: dict[str, float] = {}
    for key, r in results.items():
        summary["%s_p50_ms" % key] = round(r["p50_ms"], 3)
        summary["%s_p99_ms" % key] = round(r["p99_ms"], 3)
        summary["%s_rps" % key] = round(r["rps"], 1)
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
