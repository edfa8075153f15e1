"""The node metrics behind the web console's charts: MonD's reports, sampled by RAPI.

While a page is open, the event poller (L{ganeti.rapi.ui.events.EventHub})
asks every online node's MonD (C{http://<primary IP>:<mond port>/1/report/all},
plain HTTP as MonD serves it) every L{INTERVAL} seconds, all nodes at once, each
within L{TIMEOUT}; from the reports it keeps one sample per node:

  - C{cpu}: MonD's C{cpu-avg-load} (the busy share of all CPUs, averaged over
    MonD's window, Ganeti's 10 minutes), in percent;
  - C{mem}: the memory in use (total less available) of C{node-resources}, in percent,
    with C{mem_used} and C{mem_total} in MiB.

A value MonD does not have (a collector off or failing, MonD down) is C{None}.
The last L{KEEP} samples of each node are kept while pages are open, so a page
that opens gets the recent past in its snapshot, then each new sample as a
C{metrics} event.  The page draws them itself (C{static/app.js}, inline SVG).
"""

from __future__ import annotations

import collections
from typing import Any, Awaitable, Callable

import orjson
from twisted.internet.defer import DeferredList, ensureDeferred

from ganeti import ports

#: seconds between two samples
INTERVAL = 5.0
#: seconds one MonD has to answer
TIMEOUT = 3.0
#: samples kept per node (10 minutes at INTERVAL)
KEEP = 120


def sample(reports: Any, now: float) -> dict[str, Any]:
    """One node's sample from MonD's C{/1/report/all} (pure; bad parts give C{None})."""
    found = {r.get("name"): r.get("data") for r in reports if isinstance(r, dict)} if isinstance(reports, list) else {}
    cpu = mem = used = total = None
    load = found.get("cpu-avg-load")
    if isinstance(load, dict) and isinstance(load.get("cpus"), list) and load["cpus"]:
        values = [v for v in load["cpus"] if isinstance(v, (int, float))]
        if values:
            cpu = round(100.0 * sum(values) / len(values), 1)
    resources = found.get("node-resources")
    memory = resources.get("memory") if isinstance(resources, dict) else None
    if isinstance(memory, dict) and isinstance(memory.get("total"), int) and memory["total"] > 0:
        available = memory.get("available")
        if isinstance(available, int):                  # bytes
            mem = round(100.0 * (memory["total"] - available) / memory["total"], 1)
            total = memory["total"] >> 20
            used = (memory["total"] - available) >> 20
    return {"t": round(now, 3), "cpu": cpu, "mem": mem, "mem_used": used, "mem_total": total}


async def fetch_report(address: str, port: int, clock: Any) -> Any:
    """MonD's C{/1/report/all} of the node at C{address} (its JSON)."""
    import treq

    host = "[%s]" % address if ":" in address else address
    response = await treq.get("http://%s:%d/1/report/all" % (host, port), timeout=TIMEOUT, reactor=clock)
    body = await response.content()
    if response.code != 200:
        raise ValueError("MonD answered %d" % response.code)
    return orjson.loads(body)


class NodeMetrics:
    """Samples every online node's MonD and keeps the recent ones.

    @param fetch: C{fetch(address) -> the report} (L{fetch_report} by default)
    """

    def __init__(self, clock: Any, port: int = ports.MOND,
                 fetch: Callable[[str], Awaitable[Any]] | None = None, keep: int = KEEP) -> None:
        self.clock = clock
        self.port = port
        self.fetch = fetch if fetch is not None else (lambda address: fetch_report(address, port, clock))
        self.keep = keep
        self.history: dict[str, collections.deque[dict[str, Any]]] = {}
        self.due = 0.0

    def is_due(self) -> bool:
        return bool(self.clock.seconds() >= self.due)

    def clear(self) -> None:
        self.history.clear()
        self.due = 0.0

    def recent(self) -> dict[str, list[dict[str, Any]]]:
        return {name: list(samples) for name, samples in self.history.items()}

    async def poll(self, nodes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """One sample of each online node with a primary IP; the new samples (node -> sample)."""
        self.due = self.clock.seconds() + INTERVAL
        wanted = sorted((name, row["pip"]) for name, row in nodes.items() if row.get("pip") and not row.get("offline"))
        results = await DeferredList([ensureDeferred(self._one(address)) for _, address in wanted],
                                     consumeErrors=True)
        now = self.clock.seconds()
        new = {}
        for (name, _), (ok, reports) in zip(wanted, results):
            new[name] = sample(reports if ok else None, now)
            self.history.setdefault(name, collections.deque(maxlen=self.keep)).append(new[name])
        for gone in set(self.history) - set(nodes):
            del self.history[gone]
        return new

    async def _one(self, address: str) -> Any:
        return await self.fetch(address)
