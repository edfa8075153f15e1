"""The serial console of a real kvm guest in the web console, in Debian's headless Chromium.

A one-node loopback cluster with kvm enabled boots the test guest of
L{ganeti.testing.guest} (a Debian kernel and a busybox initramfs whose shell
reads the serial line).  A write user opens the instance's page, follows its
"Serial console" link and sees the guest's console output arrive in the
page's terminal (over the WebSocket of C{/ui/instances/NAME/console}); a
command typed into the page (text and the Enter key, as a keyboard sends them)
gets its answer back in the terminal.  A second guest with a VNC display (no
kernel: its BIOS writes on the screen) opens in noVNC, served by RAPI from
Debian's novnc package, and its screen is drawn.  Leaving the page closes the console.
A read-only user finds no console link, and a WebSocket opened from the page
by hand is refused before it opens.  Screenshots go to the test's temporary
directory (printed).

Skipped without Chromium (scripts/install-chromium) or qemu
(scripts/install-qemu); fails without the guest's files (scripts/install-guest);
the VNC part is left out (saying so) without noVNC (scripts/install-novnc).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti.rapi.ui.resource import NOVNC_DIR
from ganeti.testing import guest, guest_cluster
from ganeti.testing.browser import Browser, find_chromium
from ganeti.testing.cluster import LoopbackCluster, loopback_config, ok
from tests.integration.test_webui_browser import login

QEMU = shutil.which("qemu-system-x86_64")
NAME = "console1.test"
VNC = "vnc1.test"
USERS = "admin {CLEARTEXT}secret write\nviewer {CLEARTEXT}view read\n"

pytestmark = [
    pytest.mark.skipif(find_chromium() is None, reason="no chromium: scripts/install-chromium installs it"),
    pytest.mark.skipif(QEMU is None, reason="qemu-system-x86_64 is not installed (scripts/install-qemu)"),
]

TERMINAL = "(document.getElementById('terminal') || {textContent: ''}).textContent"


def open_console_refused(name: str) -> str:
    """A WebSocket to the console opened by the page's own script: [opened?, close code]."""
    return """new Promise((done) => {
        const ws = new WebSocket('wss://' + location.host + '/ui/instances/%s/console');
        let opened = false;
        ws.onopen = () => { opened = true; };
        ws.onclose = (e) => done([opened, e.code]);
    })""" % name


@pytest_twisted.ensureDeferred
async def test_serial_console_of_a_kvm_guest_in_the_page(root):
    try:
        kernel = guest.kernel_image()
    except guest.GuestFilesMissing as e:
        pytest.fail(str(e))
    shots = tempfile.mkdtemp(prefix="webui-console-shots-")
    scratch = tempfile.mkdtemp(prefix="webui-console-")
    print("screenshots in", shots)
    cluster = LoopbackCluster(reactor, root, loopback_config(1), rapi_users=USERS, prefix="gntwc")
    roots = [root]
    browser = None
    try:
        await cluster.start()
        roots += list(cluster.roots)
        initrd = guest.build_initramfs(os.path.join(scratch, "initrd.cpio"))
        ok(root, "gnt-cluster", "modify", "--enabled-hypervisors", "kvm,fake", "-H", "kvm:kvm_path=%s" % QEMU)
        ok(root, "gnt-instance", "add", "-t", "diskless", "-n", "node1.test", "-o", "noop", "--no-nics",
           "-B", "memory=128M", "--no-name-check", "--no-ip-check", "-H",
           "kvm:kernel_path=%s,initrd_path=%s,serial_console=true,kernel_args=%s"
           % (kernel, initrd, guest.KERNEL_ARGS), NAME)

        os.mkdir(os.path.join(scratch, "profile"))
        browser = await threads.deferToThread(Browser.start, os.path.join(scratch, "profile"))
        page = await threads.deferToThread(browser.new_page)
        await threads.deferToThread(login, page, cluster.url, "admin", "secret", 1)

        # the instance's page links to its console; the console shows what the guest prints
        await threads.deferToThread(page.evaluate, "location.hash = '#/instance/%s'; true" % NAME)
        await threads.deferToThread(page.wait_for, "document.getElementById('open-console') !== null")
        await threads.deferToThread(page.click, "#open-console")
        await threads.deferToThread(page.wait_for, "location.hash === '#/console/%s'" % NAME)
        await threads.deferToThread(page.wait_for, "document.getElementById('console-status')"
                                                   ".textContent === 'connected'", 60)
        await threads.deferToThread(page.wait_for, TERMINAL + ".includes(%r)" % guest.READY_LINE, 150)
        await threads.deferToThread(page.screenshot, os.path.join(shots, "1-console.png"))

        # a command typed into the page: its answer comes back from the guest's shell
        await threads.deferToThread(page.evaluate, "document.getElementById('terminal-input').focus(); true")
        await threads.deferToThread(page.send, "Input.insertText", {"text": guest_cluster.COMMAND.decode().strip()})
        await threads.deferToThread(page.send, "Input.dispatchKeyEvent",
                                    {"type": "keyDown", "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13})
        await threads.deferToThread(page.send, "Input.dispatchKeyEvent",
                                    {"type": "keyUp", "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13})
        answered = "%s.split('\\n').some((l) => l.startsWith(%r))" % (TERMINAL, guest_cluster.ANSWER)
        await threads.deferToThread(page.wait_for, answered, 60)
        await threads.deferToThread(page.screenshot, os.path.join(shots, "2-console-answer.png"))

        # the VNC display of a second guest (no kernel: its BIOS says so on the screen) in noVNC, when
        # Debian's novnc package is there (RAPI serves its modules from /usr/share/novnc)
        if not os.path.isdir(NOVNC_DIR):
            print("no noVNC at %s (scripts/install-novnc): the VNC part is left out" % NOVNC_DIR)
        else:
            ok(root, "gnt-instance", "add", "-t", "diskless", "-n", "node1.test", "-o", "noop", "--no-nics",
               "-B", "memory=32M", "--no-name-check", "--no-ip-check", "-H",
               "kvm:vnc_bind_address=127.0.0.1,serial_console=false,kernel_path=", VNC)
            await threads.deferToThread(page.evaluate, "location.hash = '#/instance/%s'; true" % VNC)
            await threads.deferToThread(page.wait_for, "document.getElementById('open-vnc') !== null")
            assert await threads.deferToThread(page.evaluate, "document.getElementById('open-console') === null")
            await threads.deferToThread(page.click, "#open-vnc")
            await threads.deferToThread(page.wait_for, "document.getElementById('vnc-status')"
                                                       ".textContent === 'connected'", 60)
            # the guest's screen is drawn: some pixels of noVNC's canvas are lit
            lit = """(() => { const c = document.querySelector('#vnc-screen canvas'); if (!c || !c.width) return 0;
                const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
                for (let k = 0; k < d.length; k += 4) if (d[k] + d[k + 1] + d[k + 2] > 120) n++;
                return n; })()"""
            await threads.deferToThread(page.wait_for, lit + " > 50", 90)
            await threads.deferToThread(page.screenshot, os.path.join(shots, "3-vnc.png"))
            await threads.deferToThread(page.evaluate, "location.hash = '#/instances'; true")
            await threads.deferToThread(page.wait_for, "document.getElementById('vnc-screen') === null")

        # leaving the page closes the console; coming back opens a new one
        await threads.deferToThread(page.evaluate, "location.hash = '#/instances'; true")
        await threads.deferToThread(page.wait_for, "document.getElementById('terminal') === null")
        await threads.deferToThread(page.evaluate, "location.hash = '#/console/%s'; true" % NAME)
        await threads.deferToThread(page.wait_for, "document.getElementById('console-status')"
                                                   ".textContent === 'connected'", 60)

        # a read-only user: no console link, and a WebSocket opened by hand never opens
        await threads.deferToThread(page.click, "#logout")
        await threads.deferToThread(page.wait_for, "location.pathname === '/ui/login'")
        await threads.deferToThread(login, page, cluster.url, "viewer", "view", 1)
        await threads.deferToThread(page.evaluate, "location.hash = '#/instance/%s'; true" % NAME)
        await threads.deferToThread(page.wait_for, "document.querySelector('#view dd .state') !== null")
        assert await threads.deferToThread(page.evaluate, "document.getElementById('open-console') === null")
        opened, code = await threads.deferToThread(page.evaluate, open_console_refused(NAME))
        assert not opened and code == 1006, (opened, code)
        await threads.deferToThread(page.evaluate, "location.hash = '#/console/%s'; true" % NAME)
        await threads.deferToThread(page.wait_for, "document.getElementById('console-status')"
                                                   ".textContent === 'disconnected'", 30)
        assert guest.READY_LINE not in await threads.deferToThread(page.evaluate, TERMINAL)
        if os.path.isdir(NOVNC_DIR):
            opened, code = await threads.deferToThread(page.evaluate, open_console_refused(VNC).replace(
                "/console'", "/vnc'"))
            assert not opened and code == 1006, (opened, code)
        await threads.deferToThread(page.screenshot, os.path.join(shots, "4-console-read-only.png"))
    finally:
        if browser is not None:
            await threads.deferToThread(browser.close)
        guest_cluster.kill_qemus(roots)
        await cluster.stop()
        guest_cluster.kill_qemus(roots)
        shutil.rmtree(scratch, ignore_errors=True)
