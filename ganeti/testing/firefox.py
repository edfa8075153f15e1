"""A headless Firefox driven over WebDriver BiDi, for tests of the web console.

Debian's C{firefox-esr} is started with C{--remote-debugging-port}: it then
speaks WebDriver BiDi (JSON commands over a WebSocket at C{/session}), no
geckodriver needed (Debian does not package it).  The WebSocket framing is
C{wsproto}'s, over a plain blocking socket.  The calls block; tests run them
in a thread (C{deferToThread}).  The page API is the one of
L{ganeti.testing.browser.Page}, so the same test helpers drive both browsers:

    firefox = Firefox.start(profile_dir)
    firefox.navigate("https://127.0.0.1:5080/ui/")
    firefox.wait_for("document.querySelectorAll('#nodes tbody tr').length === 3")
    firefox.screenshot("/tmp/x/overview.png")
    firefox.close()

Certificates are not checked (C{acceptInsecureCerts}: the test cluster's RAPI
certificate is self-signed).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import socket
import subprocess
import time
from typing import Any

from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Ping, RejectConnection, Request, TextMessage

from ganeti.daemons import free_port
from ganeti.testing.browser import BrowserError, PageWaits

#: Debian's package installs it under this name (scripts/install-firefox)
EXECUTABLES = ("firefox-esr", "firefox")


def find_firefox() -> str | None:
    for name in EXECUTABLES:
        found = shutil.which(name)
        if found:
            return found
    return None


def from_remote(value: Any) -> Any:
    """A BiDi C{RemoteValue} as a Python value (what C{returnByValue} gives with CDP)."""
    if not isinstance(value, dict):
        return value
    kind = value.get("type")
    if kind in ("undefined", "null"):
        return None
    if kind in ("string", "boolean"):
        return value.get("value")
    if kind == "number":
        number = value.get("value")
        if isinstance(number, str):  # NaN, -0, Infinity
            return float(number.replace("Infinity", "inf")) if number != "-0" else 0
        return number
    if kind in ("array", "set"):
        return [from_remote(v) for v in value.get("value", [])]
    if kind in ("object", "map"):
        return {(k if isinstance(k, str) else str(from_remote(k))): from_remote(v) for k, v in value.get("value", [])}
    return value.get("value", "<%s>" % kind)


class Firefox(PageWaits):
    """One Firefox with one page (its first browsing context)."""

    def __init__(self, process: subprocess.Popen[bytes], sock: socket.socket, conn: WSConnection) -> None:
        self.process = process
        self.sock = sock
        self.conn = conn
        self._ids = itertools.count(1)
        self._text = ""
        self.context = ""

    @classmethod
    def start(cls, profile: str, executable: str | None = None, width: int = 1280, height: int = 900,
              timeout: float = 90.0) -> Firefox:
        exe = executable or find_firefox()
        if exe is None:
            raise BrowserError("no firefox found (scripts/install-firefox installs Debian's firefox-esr)")
        port = free_port("127.0.0.1")
        os.makedirs(profile, exist_ok=True)
        with open(os.path.join(profile, "user.js"), "w") as handle:  # quiet: no updates, telemetry, first run
            for pref, value in (("app.update.enabled", "false"), ("browser.shell.checkDefaultBrowser", "false"),
                                ("datareporting.policy.dataSubmissionEnabled", "false"),
                                ("toolkit.telemetry.reportingpolicy.firstRun", "false"),
                                ("browser.aboutwelcome.enabled", "false"), ("network.captive-portal-service.enabled",
                                                                           "false")):
                handle.write("user_pref(%s, %s);\n" % (json.dumps(pref), value))
        args = [exe, "--headless", "--no-remote", "--profile", profile, "--remote-debugging-port", str(port),
                "--width", str(width), "--height", str(height), "about:blank"]
        env = {**os.environ, "MOZ_CRASHREPORTER_DISABLE": "1", "MOZ_HEADLESS": "1"}
        process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env,
                                   stderr=open(os.path.join(profile, "firefox.log"), "wb"))
        deadline = time.monotonic() + timeout
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    process.kill()
                    process.wait()
                    with open(os.path.join(profile, "firefox.log"), errors="replace") as log:
                        raise BrowserError("firefox did not start its WebDriver BiDi server: %s"
                                           % log.read()[-2000:]) from None
                time.sleep(0.1)
        sock.settimeout(None)
        conn = WSConnection(ConnectionType.CLIENT)
        sock.sendall(conn.send(Request(host="127.0.0.1:%d" % port, target="/session")))
        firefox = cls(process, sock, conn)
        try:
            first = firefox._next_event(deadline)
            if not isinstance(first, AcceptConnection):
                raise BrowserError("firefox refused the WebDriver BiDi connection: %r" % (first,))
            firefox.send("session.new", {"capabilities": {"alwaysMatch": {"acceptInsecureCerts": True}}})
            tree = firefox.send("browsingContext.getTree", {})
            firefox.context = tree["contexts"][0]["context"]
        except BaseException:
            firefox.close()
            raise
        return firefox

    # --- the protocol ----------------------------------------------------------------
    def _next_event(self, deadline: float) -> Any:
        while True:
            for event in self.conn.events():
                if isinstance(event, Ping):
                    self.sock.sendall(self.conn.send(event.response()))
                    continue
                return event
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("firefox did not answer in time")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(262144)
            except TimeoutError:
                raise BrowserError("firefox did not answer in time") from None
            if not data:
                raise BrowserError("firefox closed the WebDriver BiDi connection")
            self.conn.receive_data(data)

    def send(self, method: str, params: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        """One command; its result (L{BrowserError} for an error answer)."""
        command_id = next(self._ids)
        self.sock.sendall(self.conn.send(TextMessage(json.dumps({"id": command_id, "method": method,
                                                                 "params": params}))))
        deadline = time.monotonic() + timeout
        while True:
            event = self._next_event(deadline)
            if isinstance(event, (CloseConnection, RejectConnection)):
                raise BrowserError("firefox closed the WebDriver BiDi connection")
            if not isinstance(event, TextMessage):
                continue
            self._text += event.data
            if not event.message_finished:
                continue
            message, self._text = json.loads(self._text), ""
            if message.get("id") != command_id:
                continue                      # an event (none is subscribed to) or a late answer
            if message.get("type") == "error":
                raise BrowserError("%s: %s: %s" % (method, message.get("error"), message.get("message")))
            result: dict[str, Any] = message.get("result", {})
            return result

    # --- the page (L{ganeti.testing.browser.Page}'s API) ---------------------------
    def navigate(self, url: str) -> None:
        self.send("browsingContext.navigate", {"context": self.context, "url": url, "wait": "complete"})

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited when it is a promise)."""
        answer = self.send("script.evaluate", {"expression": expression, "target": {"context": self.context},
                                               "awaitPromise": True, "resultOwnership": "none"})
        if answer.get("type") == "exception":
            details = answer.get("exceptionDetails", {})
            raise BrowserError("%s: %s" % (expression[:80], details.get("text")))
        return from_remote(answer.get("result"))

    def describe(self) -> str:
        try:
            return str(self.evaluate("location.href + ' ' + document.body.innerText.slice(0, 600)"))
        except BrowserError as e:
            return "(unreadable: %s)" % e

    def click(self, selector: str) -> None:
        """A real click (pointer down and up) in the middle of the element."""
        box = self.evaluate("(() => { const e = document.querySelector(%s); e.scrollIntoView({block: 'center'});"
                            " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2];"
                            " })()" % json.dumps(selector))
        x, y = (int(v) for v in box)
        self.send("input.performActions", {"context": self.context, "actions": [{
            "type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
            "actions": [{"type": "pointerMove", "x": x, "y": y}, {"type": "pointerDown", "button": 0},
                        {"type": "pointerUp", "button": 0}]}]})

    def set_viewport(self, width: int, height: int) -> None:
        self.send("browsingContext.setViewport", {"context": self.context,
                                                  "viewport": {"width": width, "height": height}})

    def screenshot(self, path: str) -> None:
        answer = self.send("browsingContext.captureScreenshot", {"context": self.context})
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(answer["data"]))

    def close(self) -> None:
        try:
            self.send("browser.close", {}, timeout=10)
        except (BrowserError, OSError):
            pass
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
