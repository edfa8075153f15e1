"""The web console in a real browser: Debian's headless Chromium, driven over the
DevTools protocol (L{ganeti.testing.browser}), against a 3-node loopback cluster's
ganeti-rapi.

A write user logs in and sees the three nodes up; a NodeD is killed and its
node turns unreachable on the open page without a reload (the page's own
marker survives); the user starts an instance from its page and watches the
job's log arrive live; a read-only user finds no action buttons and a POST
forged from the page (with or without the CSRF token) is refused and submits
nothing; on a phone-sized screen nothing is wider than the screen.  Screenshots of every page are written to the test's temporary
directory (printed), for a person to look at.

Without Chromium (scripts/install-chromium installs Debian's) the test skips.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile

import attrs
import pytest
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti.daemons import free_port
from ganeti.objects import NIC, ConfigData, Instance, new_uuid
from ganeti.testing.browser import Browser, Page, find_chromium
from ganeti.testing.cluster import LoopbackCluster, loopback_config, node_addresses, ok
from ganeti.testing.mond import ConfdDaemon, MondDaemon

INSTANCE = "web1.test"
USERS = "admin {CLEARTEXT}secret write\nviewer {CLEARTEXT}view read\n"
STAMP = {"serial_no": 1, "ctime": 1.0, "mtime": 1.0}

pytestmark = pytest.mark.skipif(find_chromium() is None,
                                reason="no chromium: scripts/install-chromium installs Debian's package")


def cluster_config() -> ConfigData:
    """Three nodes; a diskless instance of the fake hypervisor, stopped, on node1."""
    cfg = loopback_config(3)
    node1 = next(u for u, n in cfg.nodes.items() if n.name == "node1.test")
    uuid = new_uuid()
    instance = Instance(name=INSTANCE, uuid=uuid, primary_node=node1, os="noop", hypervisor="fake",
                        admin_state="down", admin_state_source="admin", disk_template="diskless",
                        disks_active=False, beparams={"maxmem": 128, "vcpus": 1},
                        nics=[NIC(mac="aa:00:00:00:01:01", uuid=new_uuid())], disks=[],
                        **STAMP)
    return attrs.evolve(cfg, instances={uuid: instance})


def login(page: Page, url: str, user: str, password: str, nodes: int = 3) -> None:
    page.navigate(url + "/ui/")
    page.wait_for("location.pathname === '/ui/login' && !!document.getElementById('user')")
    page.evaluate("document.getElementById('user').value = %r; document.getElementById('password').value = %r;"
                  " document.querySelector('form').submit(); true" % (user, password))
    page.wait_for("location.pathname === '/ui/' && document.querySelectorAll('#nodes tbody tr').length === %d" % nodes)


def node_liveness(node: str) -> str:
    return ("(() => { const r = document.querySelector('#nodes tr[data-key=\"%s\"] .liveness');"
            " return r ? r.textContent : ''; })()" % node)


@pytest_twisted.ensureDeferred
async def test_console_in_a_browser(root):
    shots = tempfile.mkdtemp(prefix="webui-shots-")
    profile = tempfile.mkdtemp(prefix="webui-chromium-")
    print("screenshots in", shots)
    addresses = list(node_addresses(3).items())
    mond_port = free_port(addresses[0][1])
    async with LoopbackCluster(reactor, root, cluster_config(), rapi_users=USERS, prefix="gntw",
                               rapi_args=("--mond-port", str(mond_port))) as cluster:
        url = cluster.url
        # every node's MonD (and the confd they learn their settings from), on the port RAPI was told
        confd = ConfdDaemon(cluster.master, addresses[0][1], free_port(addresses[0][1], udp=True))
        monds = [MondDaemon(paths, name, address, mond_port, confd.port, "--config-interval", "0.5")
                 for paths, (name, address) in zip(cluster.roots, addresses)]
        for daemon in (confd, *monds):
            daemon.start()
            await daemon.ready(reactor)
        browser = await threads.deferToThread(Browser.start, profile)
        try:
            page = await threads.deferToThread(browser.new_page)

            # log in; the overview lists the three nodes, all up (pushed by /ui/events)
            await threads.deferToThread(login, page, url, "admin", "secret")
            await threads.deferToThread(
                page.wait_for, "[...document.querySelectorAll('#nodes .liveness')].every(e => "
                               "e.textContent.startsWith('up')) && document.getElementById('cluster')"
                               ".textContent.includes('cluster.test')", 60)
            cookies = await threads.deferToThread(page.send, "Network.getCookies", {"urls": [url + "/ui/"]})
            (cookie,) = [c for c in cookies["cookies"] if c["name"] == "ganeti_ui"]
            assert cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "Strict", cookie
            assert await threads.deferToThread(page.evaluate, "document.cookie") == ""  # not readable by scripts
            await threads.deferToThread(page.screenshot, os.path.join(shots, "1-overview.png"))

            # charts of MonD's metrics: node1's page draws the samples RAPI pushes, a new one arrives live
            await threads.deferToThread(page.evaluate, "window.__chartsHere = 1; location.hash = '#/node/node1.test';"
                                                       " true")
            points = ("Number((document.getElementById('chart-mem') || {getAttribute: () => 0})"
                      ".getAttribute('data-points'))")
            await threads.deferToThread(page.wait_for, points + " >= 2", 60)
            seen = await threads.deferToThread(page.evaluate, points)
            await threads.deferToThread(page.wait_for, "%s > %d" % (points, seen), 60)
            assert await threads.deferToThread(page.evaluate, "window.__chartsHere") == 1  # no reload
            used = await threads.deferToThread(page.evaluate, "document.querySelector('#chart-mem')"
                                                              ".parentNode.querySelector('.chart-value').textContent")
            assert used.endswith("%") and 0 < float(used[:-1]) < 100, used
            assert await threads.deferToThread(page.evaluate, "document.querySelectorAll("
                                                              "'#chart-mem polyline').length") >= 1
            await threads.deferToThread(page.screenshot, os.path.join(shots, "1-node-charts.png"))
            await threads.deferToThread(page.evaluate, "location.hash = '#/'; true")
            await threads.deferToThread(page.wait_for, "document.querySelectorAll('#nodes .spark-cell').length >= 1",
                                        60)

            # a NodeD dies: its node turns unreachable on the open page, no reload
            await threads.deferToThread(page.evaluate, "window.__stillHere = 1")
            cluster.nodeds[2].kill(signal.SIGKILL)
            await threads.deferToThread(page.wait_for, node_liveness("node3.test") + ".startsWith('unreachable')", 60)
            assert await threads.deferToThread(page.evaluate, "window.__stillHere") == 1
            assert "node3.test is unreachable" in await threads.deferToThread(
                page.evaluate, "document.getElementById('alerts').textContent")
            await threads.deferToThread(page.screenshot, os.path.join(shots, "2-node-unreachable.png"))

            # gnt-cluster verify from the overview: its findings (the dead node) become alerts, pushed on its end
            await threads.deferToThread(page.wait_for, "document.getElementById('verify-now') !== null")
            await threads.deferToThread(page.click, "#verify-now")
            await threads.deferToThread(
                page.wait_for, "(document.getElementById('verify-result') || {}).textContent === 'running'", 30)
            await threads.deferToThread(
                page.wait_for, "(document.getElementById('verify-result') || {textContent: ''}).textContent"
                               ".includes('error(s)') && document.getElementById('verify-alerts').textContent"
                               ".includes('node3.test')", 180)
            assert await threads.deferToThread(page.evaluate, "window.__stillHere") == 1
            await threads.deferToThread(page.screenshot, os.path.join(shots, "2-verify.png"))

            # start the instance from its page: confirm, then its job's log arrives live
            await threads.deferToThread(page.evaluate, "location.hash = '#/instance/%s'; true" % INSTANCE)
            await threads.deferToThread(page.wait_for, "document.querySelector('#view dd .state') !== null")
            await threads.deferToThread(page.screenshot, os.path.join(shots, "3-instance.png"))
            await threads.deferToThread(page.click, "#actions button[data-action='Start']")
            await threads.deferToThread(page.wait_for, "!document.getElementById('confirm').classList.contains('hidden')")
            await threads.deferToThread(page.click, "#confirm-yes")
            await threads.deferToThread(page.wait_for, "location.hash.startsWith('#/job/')")
            # the log pane shows what the job's event stream pushed: its status changes and log entries
            await threads.deferToThread(page.wait_for, "document.getElementById('job-log').textContent"
                                                       ".includes('is success')", 120)
            await threads.deferToThread(
                page.wait_for, "document.getElementById('job-status').textContent === 'success'", 120)
            await threads.deferToThread(page.screenshot, os.path.join(shots, "4-job-start.png"))
            assert ok(cluster.master, "gnt-instance", "list", "--no-headers", "-o", "status",
                      INSTANCE).strip() == "running"
            assert await threads.deferToThread(page.evaluate, "window.__stillHere") == 1

            # migrate it to node2 (node3 is unreachable: not offered), its status followed live on its page
            await threads.deferToThread(page.evaluate, "location.hash = '#/instance/%s'; true" % INSTANCE)
            await threads.deferToThread(page.wait_for, "document.getElementById('instance-status')"
                                                       ".textContent === 'running'")
            await threads.deferToThread(page.click, "#actions button[data-action='Migrate']")
            offered = await threads.deferToThread(
                page.evaluate, "[...document.querySelectorAll('#confirm-target option')].map(o => o.value)")
            assert offered == ["node2.test", ""], offered
            await threads.deferToThread(page.click, "#confirm-yes")
            await threads.deferToThread(page.wait_for, "location.hash.startsWith('#/job/')")
            await threads.deferToThread(
                page.wait_for, "document.getElementById('job-status').textContent === 'success'", 120)
            await threads.deferToThread(page.screenshot, os.path.join(shots, "4-job-migrate.png"))
            log = await threads.deferToThread(page.evaluate, "document.getElementById('job-log').textContent")
            assert "is success" in log and "migrating instance to node2.test" in log, log
            assert await threads.deferToThread(page.evaluate, "document.getElementById('actions')"
                                                              ".classList.contains('hidden')")  # no cancel now
            assert ok(cluster.master, "gnt-instance", "list", "--no-headers", "-o", "pnode",
                      INSTANCE).strip() == "node2.test"

            for view, ready, name in (
                ("#/instances", "document.querySelectorAll('#instances tbody tr').length === 1", "5-instances"),
                ("#/jobs", "document.querySelectorAll('#jobs tbody tr').length >= 1", "6-jobs"),
                ("#/nodes", "document.querySelectorAll('#nodes tbody tr').length === 3", "7-nodes"),
                ("#/node/node3.test", "document.getElementById('liveness-history') !== null", "8-node"),
            ):
                await threads.deferToThread(page.evaluate, "location.hash = %r; true" % view)
                await threads.deferToThread(page.wait_for, ready)
                await threads.deferToThread(page.screenshot, os.path.join(shots, name + ".png"))
            assert "unreachable" in await threads.deferToThread(
                page.evaluate, "document.getElementById('liveness-history').textContent")

            # the instance list filters as one types
            await threads.deferToThread(page.evaluate, "location.hash = '#/instances'; true")
            # (the migration's new primary node arrives with the next push: wait for it, then filter)
            await threads.deferToThread(page.wait_for, "[...document.querySelectorAll('#instances tbody td')]"
                                                       ".some(e => e.textContent === 'node2.test')", 30)
            for text, rows in (("web", 1), ("node2", 1), ("nothing-like-it", 0)):
                await threads.deferToThread(page.evaluate, "(() => { const f = document.getElementById("
                                                           "'instance-filter'); f.value = %r;"
                                                           " f.dispatchEvent(new Event('input')); return true; })()"
                                                           % text)
                assert await threads.deferToThread(
                    page.evaluate, "document.querySelectorAll('#instances tbody tr').length") == rows, text

            # a read-only user: no action buttons, and a forged write is refused
            await threads.deferToThread(page.click, "#logout")
            await threads.deferToThread(page.wait_for, "location.pathname === '/ui/login'")
            await threads.deferToThread(login, page, url, "viewer", "view")
            await threads.deferToThread(page.wait_for, "document.getElementById('verify-alerts') !== null")  # it sees
            assert await threads.deferToThread(page.evaluate, "document.getElementById('verify-now') === null")
            await threads.deferToThread(page.evaluate, "location.hash = '#/instance/%s'; true" % INSTANCE)
            await threads.deferToThread(page.wait_for, "document.querySelector('#view dd .state') !== null")
            assert await threads.deferToThread(page.evaluate, "document.querySelectorAll('#view button').length") == 0
            await threads.deferToThread(page.screenshot, os.path.join(shots, "9-read-only.png"))
            jobs_before = ok(cluster.master, "gnt-job", "list", "--no-headers", "-o", "id").split()
            forged = await threads.deferToThread(page.evaluate, """(async () => {
                const s = await (await fetch('/ui/session')).json();
                const withToken = await fetch('/ui/api/2/instances/%s/shutdown', {method: 'PUT',
                    headers: {'X-CSRF-Token': s.csrf, 'Content-Type': 'application/json'}, body: '{}'});
                const without = await fetch('/ui/api/2/instances/%s/shutdown', {method: 'PUT', body: '{}'});
                const verify = await fetch('/ui/verify', {method: 'POST', headers: {'X-CSRF-Token': s.csrf}});
                return [withToken.status, without.status, verify.status];
            })()""" % (INSTANCE, INSTANCE))
            assert forged == [403, 403, 403], forged
            assert ok(cluster.master, "gnt-job", "list", "--no-headers", "-o", "id").split() == jobs_before

            # a phone-sized screen: nothing wider than the screen (wide tables scroll in their own box)
            await threads.deferToThread(page.send, "Emulation.setDeviceMetricsOverride",
                                        {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
            await threads.deferToThread(page.evaluate, "location.hash = '#/'; true")
            await threads.deferToThread(page.wait_for, "document.querySelectorAll('#nodes tbody tr').length === 3")
            assert await threads.deferToThread(page.evaluate, "document.documentElement.scrollWidth") <= 390
            await threads.deferToThread(page.screenshot, os.path.join(shots, "10-phone.png"))
        finally:
            await threads.deferToThread(browser.close)
            for daemon in (*monds, confd):
                daemon.stop()
            shutil.rmtree(profile, ignore_errors=True)
            for name in os.listdir(cluster.master.log_dir):  # for a person looking into a failure
                if "rapi" in name or "luxi" in name:
                    shutil.copy(os.path.join(cluster.master.log_dir, name), shots)
