"""scripts/bench web: the web console in headless Chromium (DevTools protocol, ganeti.testing.browser).

1. The overview of a cluster of 100 nodes and 1,000 instances (real WConfD,
   LuxiD and ganeti-rapi; no NodeDs, so liveness is "unknown"): first
   contentful paint, the time until the 100 nodes are listed (the
   snapshot pushed by /ui/events), and the bytes the page transferred.
   Targets: paint <= 500 ms, page <= 300 KiB.
2. A real 3-node loopback cluster: a NodeD is killed; the time from LuxiD's
   record of the transition (liveness.log) to the open page showing it (a
   MutationObserver in the page stamps the change). Target: <= 1 s.

Prints a table, then one JSON line.  Needs chromium (scripts/install-chromium).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from typing import Any

from twisted.internet import defer, task, threads

from ganeti.config.bootstrap import grow, initial_config
from ganeti.rapi.testing import RapiStack
from ganeti.testing.browser import Browser, Page
from ganeti.testing.cluster import LoopbackCluster, loopback_config
from ganeti.testing.daemons import make_root, remove_root

USERS = "admin {CLEARTEXT}secret write\n"
ROUNDS = 5


def login(page: Page, url: str) -> None:
    page.navigate(url + "/ui/login")
    page.evaluate("document.getElementById('user').value = 'admin'; document.getElementById('password').value = "
                  "'secret'; document.querySelector('form').submit(); true")
    page.wait_for("location.pathname === '/ui/'", 120)


def overview(page: Page, url: str, nodes: int) -> dict[str, float]:
    """One load of the overview: paint, data and size."""
    page.navigate(url + "/ui/")
    page.wait_for("document.querySelectorAll('#nodes tbody tr').length === %d && (window.__listed ="
                  " window.__listed || performance.now())" % nodes, 120, 0.01)
    return page.evaluate("""(() => {
        const fcp = performance.getEntriesByName('first-contentful-paint')[0];
        const nav = performance.getEntriesByType('navigation')[0];
        const bytes = nav.transferSize + performance.getEntriesByType('resource')
            .reduce((sum, r) => sum + r.transferSize, 0);
        return {paint: fcp ? fcp.startTime : -1, listed: window.__listed, kib: bytes / 1024};
    })()""")


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


async def big_overview(reactor: Any, browser: Browser) -> dict[str, float]:
    paths = make_root("gntwb")
    config = grow(initial_config("bench.test", "node1.test", "127.0.1.1"), nodes=99, instances=1000)
    stack = RapiStack(paths, config, USERS)
    try:
        await stack.start(reactor)
        page = await threads.deferToThread(browser.new_page)
        await threads.deferToThread(login, page, stack.url)
        # every load fetches everything again: the size is a first visit's
        await threads.deferToThread(page.send, "Network.enable")
        await threads.deferToThread(page.send, "Network.setCacheDisabled", {"cacheDisabled": True})
        runs = []
        for _ in range(ROUNDS):
            runs.append(await threads.deferToThread(overview, page, stack.url, 100))
        return {"paint": median([r["paint"] for r in runs]), "listed": median([r["listed"] for r in runs]),
                "kib": max(r["kib"] for r in runs)}
    finally:
        stack.stop()
        remove_root(paths)


WATCH = """(() => {
    window.__unreachable = 0;
    new MutationObserver(() => {
        const cell = document.querySelector('#nodes tr[data-key="node3.test"] .liveness');
        if (!window.__unreachable && cell && cell.textContent.startsWith('unreachable')) {
            window.__unreachable = Date.now() / 1000;
        }
    }).observe(document.getElementById('view'), {childList: true, subtree: true, characterData: true});
    return true;
})()"""


async def liveness(reactor: Any, browser: Browser) -> float:
    root = make_root("gntwl")
    try:
        async with LoopbackCluster(reactor, root, loopback_config(3), rapi_users=USERS, prefix="gntwn") as cluster:
            page = await threads.deferToThread(browser.new_page)
            await threads.deferToThread(login, page, cluster.url)
            await threads.deferToThread(page.wait_for, "[...document.querySelectorAll('#nodes .liveness')]"
                                                       ".filter(e => e.textContent.startsWith('up')).length === 3", 120)
            await threads.deferToThread(page.evaluate, WATCH)
            cluster.nodeds[2].kill(signal.SIGKILL)
            seen = await threads.deferToThread(page.wait_for, "window.__unreachable", 120)
            with open(os.path.join(cluster.master.data_dir, "liveness.log")) as handle:
                records = [json.loads(line) for line in handle if line.strip()]
            marked = [r["time"] for r in records if r.get("node") == "node3.test" and r.get("state") == "unreachable"]
            return (float(seen) - marked[-1]) * 1000
    finally:
        remove_root(root)


async def main(reactor: Any) -> None:
    profile = tempfile.mkdtemp(prefix="bench-web-")
    browser = await threads.deferToThread(Browser.start, profile)
    try:
        big = await big_overview(reactor, browser)
        to_page = await liveness(reactor, browser)
    finally:
        await threads.deferToThread(browser.close)
        shutil.rmtree(profile, ignore_errors=True)
    print("%-58s %10s %10s" % ("web console (headless Chromium)", "value", "target"))
    print("%-58s %10.0f %10s" % ("overview, 100 nodes / 1,000 instances: first paint (ms)", big["paint"], "<= 500"))
    print("%-58s %10.0f %10s" % ("overview: 100 nodes listed, snapshot pushed (ms)", big["listed"], ""))
    print("%-58s %10.1f %10s" % ("overview: bytes transferred (KiB)", big["kib"], "<= 300"))
    print("%-58s %10.0f %10s" % ("node death: roster's record to the open page (ms)", to_page, "<= 1000"))
    print(json.dumps({"overview_paint_ms": round(big["paint"], 1), "overview_listed_ms": round(big["listed"], 1),
                      "page_kib": round(big["kib"], 1), "liveness_to_page_ms": round(to_page, 1)}, sort_keys=True))


if __name__ == "__main__":
    task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
