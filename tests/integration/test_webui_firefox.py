"""The web console in Firefox: Debian's firefox-esr, headless, driven over WebDriver BiDi
(L{ganeti.testing.firefox}), against a 3-node loopback cluster's ganeti-rapi.

The Chromium test (test_webui_browser.py) covers every page; this one checks
that the same things work in Firefox: log in (the session cookie is
C{Secure}, C{HttpOnly}, not readable by the page's script), the three nodes up,
a killed NodeD turning unreachable on the open page without a reload (Firefox's
EventSource), an instance started from its page with a real click and the
in-page confirmation, its job's log arriving live, a read-only user without
action buttons whose forged write is refused, and a phone-sized screen.
Screenshots go to the test's temporary directory (printed).

Without Firefox (scripts/install-firefox installs Debian's firefox-esr) the test skips.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile

import pytest
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti.testing.cluster import LoopbackCluster, ok
from ganeti.testing.firefox import Firefox, find_firefox
from tests.integration.test_webui_browser import INSTANCE, USERS, cluster_config, login, node_liveness

pytestmark = pytest.mark.skipif(find_firefox() is None,
                                reason="no firefox: scripts/install-firefox installs Debian's firefox-esr")


@pytest_twisted.ensureDeferred
async def test_console_in_firefox(root):
    shots = tempfile.mkdtemp(prefix="webui-firefox-shots-")
    profile = tempfile.mkdtemp(prefix="webui-firefox-")
    print("screenshots in", shots)
    async with LoopbackCluster(reactor, root, cluster_config(), rapi_users=USERS, prefix="gntf") as cluster:
        url = cluster.url
        page = await threads.deferToThread(Firefox.start, profile)
        try:
            agent = await threads.deferToThread(page.evaluate, "navigator.userAgent")
            assert "Firefox/" in agent, agent
            await threads.deferToThread(login, page, url, "admin", "secret")
            await threads.deferToThread(
                page.wait_for, "[...document.querySelectorAll('#nodes .liveness')].every(e => "
                               "e.textContent.startsWith('up')) && document.getElementById('cluster')"
                               ".textContent.includes('cluster.test')", 60)
            cookies = await threads.deferToThread(page.send, "storage.getCookies", {})
            (cookie,) = [c for c in cookies["cookies"] if c["name"] == "ganeti_ui"]
            assert cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "strict", cookie
            assert await threads.deferToThread(page.evaluate, "document.cookie") == ""
            await threads.deferToThread(page.screenshot, os.path.join(shots, "1-overview.png"))

            # a NodeD dies: its node turns unreachable on the open page, no reload
            await threads.deferToThread(page.evaluate, "window.__stillHere = 1")
            cluster.nodeds[2].kill(signal.SIGKILL)
            await threads.deferToThread(page.wait_for, node_liveness("node3.test") + ".startsWith('unreachable')", 60)
            assert await threads.deferToThread(page.evaluate, "window.__stillHere") == 1
            await threads.deferToThread(page.screenshot, os.path.join(shots, "2-node-unreachable.png"))

            # start the instance from its page: a real click, the confirmation, the job's log live
            await threads.deferToThread(page.evaluate, "location.hash = '#/instance/%s'; true" % INSTANCE)
            await threads.deferToThread(page.wait_for, "document.querySelector('#view dd .state') !== null")
            await threads.deferToThread(page.click, "#actions button[data-action='Start']")
            await threads.deferToThread(page.wait_for, "!document.getElementById('confirm').classList.contains('hidden')")
            await threads.deferToThread(page.screenshot, os.path.join(shots, "3-confirm.png"))
            await threads.deferToThread(page.click, "#confirm-yes")
            await threads.deferToThread(page.wait_for, "location.hash.startsWith('#/job/')")
            await threads.deferToThread(page.wait_for, "document.getElementById('job-log').textContent"
                                                       ".includes('is success')", 120)
            await threads.deferToThread(page.screenshot, os.path.join(shots, "4-job.png"))
            assert ok(cluster.master, "gnt-instance", "list", "--no-headers", "-o", "status",
                      INSTANCE).strip() == "running"
            assert await threads.deferToThread(page.evaluate, "window.__stillHere") == 1

            # a read-only user: no action buttons, and a forged write is refused
            await threads.deferToThread(page.click, "#logout")
            await threads.deferToThread(page.wait_for, "location.pathname === '/ui/login'")
            await threads.deferToThread(login, page, url, "viewer", "view")
            await threads.deferToThread(page.evaluate, "location.hash = '#/instance/%s'; true" % INSTANCE)
            await threads.deferToThread(page.wait_for, "document.querySelector('#view dd .state') !== null")
            assert await threads.deferToThread(page.evaluate, "document.querySelectorAll('#view button').length") == 0
            jobs_before = ok(cluster.master, "gnt-job", "list", "--no-headers", "-o", "id").split()
            forged = await threads.deferToThread(page.evaluate, """(async () => {
                const s = await (await fetch('/ui/session')).json();
                const r = await fetch('/ui/api/2/instances/%s/shutdown', {method: 'PUT',
                    headers: {'X-CSRF-Token': s.csrf, 'Content-Type': 'application/json'}, body: '{}'});
                return r.status;
            })()""" % INSTANCE)
            assert forged == 403, forged
            assert ok(cluster.master, "gnt-job", "list", "--no-headers", "-o", "id").split() == jobs_before
            await threads.deferToThread(page.screenshot, os.path.join(shots, "5-read-only.png"))

            # a phone-sized screen: nothing wider than the screen
            await threads.deferToThread(page.set_viewport, 390, 844)
            await threads.deferToThread(page.evaluate, "location.hash = '#/'; true")
            await threads.deferToThread(page.wait_for, "document.querySelectorAll('#nodes tbody tr').length === 3")
            assert await threads.deferToThread(page.evaluate, "document.documentElement.scrollWidth") <= 390
            await threads.deferToThread(page.screenshot, os.path.join(shots, "6-phone.png"))
        finally:
            await threads.deferToThread(page.close)
            shutil.rmtree(profile, ignore_errors=True)
