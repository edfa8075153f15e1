"""A headless Chromium driven over the DevTools protocol, for tests and benchmarks of the web console.

Chromium is started with C{--remote-debugging-pipe}: the protocol's JSON
messages, each ended by a NUL byte, go over two pipes (Chromium reads fd 3
and writes fd 4), so no WebSocket client and no debugging port are needed.
The calls block; tests run them in a thread (C{deferToThread}).

    browser = Browser.start(profile_dir)
    page = browser.new_page()
    page.navigate("https://127.0.0.1:5080/ui/")
    page.wait_for("document.querySelectorAll('#nodes tbody tr').length === 3")
    page.screenshot("/tmp/x/overview.png")
    browser.close()
"""

from __future__ import annotations

import base64
import fcntl
import itertools
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from typing import Any

#: Debian's package installs it under this name (scripts/install-chromium)
EXECUTABLES = ("chromium", "chromium-browser", "google-chrome")


class BrowserError(Exception):
    """The browser answered an error, or did not answer in time."""


def find_chromium() -> str | None:
    for name in EXECUTABLES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _high(fd: int) -> int:
    """C{fd} moved above 10, so that the child's C{dup2} onto 3 and 4 cannot clobber it."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high


class Browser:
    """One Chromium process and its DevTools pipe."""

    def __init__(self, process: subprocess.Popen[bytes], to_browser: int, from_browser: int) -> None:
        self.process = process
        self._out = os.fdopen(to_browser, "wb", buffering=0)
        self._in = os.fdopen(from_browser, "rb", buffering=0)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._waiting: dict[int, queue.Queue[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, profile: str, executable: str | None = None, width: int = 1280, height: int = 900) -> Browser:
        exe = executable or find_chromium()
        if exe is None:
            raise BrowserError("no chromium found (scripts/install-chromium installs Debian's)")
        ours_read, theirs_write = (_high(fd) for fd in os.pipe())
        theirs_read, ours_write = (_high(fd) for fd in os.pipe())

        def child() -> None:
            os.dup2(theirs_read, 3)
            os.dup2(theirs_write, 4)

        args = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                "--disable-background-networking", "--disable-component-update", "--mute-audio",
                "--ignore-certificate-errors", "--remote-debugging-pipe", "--user-data-dir=" + profile,
                "--window-size=%d,%d" % (width, height), "about:blank"]
        process = subprocess.Popen(args, preexec_fn=child, pass_fds=(3, 4, theirs_read, theirs_write),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=open(os.path.join(profile, "chromium.log"), "wb"))
        os.close(theirs_read)
        os.close(theirs_write)
        return cls(process, ours_write, ours_read)

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = self._in.read(65536)
            except OSError:
                chunk = b""
            if not chunk:
                for waiter in list(self._waiting.values()):
                    waiter.put({"error": {"message": "the browser closed its pipe"}})
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                found: queue.Queue[dict[str, Any]] | None = None
                if "id" in message:
                    found = self._waiting.pop(message["id"], None)
                if found is not None:
                    found.put(message)
                else:
                    self.events.append(message)

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 60.0) -> dict[str, Any]:
        """One command; its result (raises L{BrowserError} on an error answer or after C{timeout})."""
        waiter: queue.Queue[dict[str, Any]] = queue.Queue()
        with self._lock:
            call_id = next(self._ids)
            self._waiting[call_id] = waiter
            message: dict[str, Any] = {"id": call_id, "method": method, "params": params or {}}
            if session is not None:
                message["sessionId"] = session
            self._out.write(json.dumps(message).encode() + b"\0")
        try:
            answer = waiter.get(timeout=timeout)
        except queue.Empty:
            raise BrowserError("%s: no answer within %g s" % (method, timeout)) from None
        if "error" in answer:
            raise BrowserError("%s: %s" % (method, answer["error"].get("message")))
        result: dict[str, Any] = answer.get("result", {})
        return result

    def new_page(self) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        page.send("Page.enable")
        page.send("Runtime.enable")
        return page

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (BrowserError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._out.close()


class PageWaits:
    """What a page of either browser does with its own C{evaluate} and C{describe}."""

    def evaluate(self, expression: str) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def wait_for(self, expression: str, timeout: float = 60.0, step: float = 0.1) -> Any:
        """Wait until C{expression} is truthy in the page; its value.  (The test looks at the page
        this often; the page itself only reacts to what the server pushes.)"""
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            try:
                last = self.evaluate(expression)
            except BrowserError as e:  # a navigation under way destroys the context
                last = e
            else:
                if last:
                    return last
            if time.monotonic() > deadline:
                raise BrowserError("%s: still %r after %g s; the page: %s" % (expression, last, timeout,
                                                                             self.describe()))
            time.sleep(step)


class Page(PageWaits):
    """One tab."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60.0) -> dict[str, Any]:
        return self.browser.send(method, params, self.session, timeout)

    def navigate(self, url: str) -> None:
        answer = self.send("Page.navigate", {"url": url})
        if answer.get("errorText"):
            raise BrowserError("navigating to %s: %s" % (url, answer["errorText"]))
        self.wait_for("document.readyState === 'complete'")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited when it is a promise)."""
        answer = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in answer:
            details = answer["exceptionDetails"]
            raise BrowserError("%s: %s" % (expression[:80], details.get("exception", {}).get("description")
                                           or details.get("text")))
        return answer.get("result", {}).get("value")

    def describe(self) -> str:
        """Where the page is, the start of its text, and its last script errors and console lines."""
        try:
            where = self.evaluate("location.href + ' | ' + document.body.innerText.slice(0, 400)")
        except BrowserError as e:
            where = str(e)
        messages = []
        for event in self.browser.events[-200:]:
            params = event.get("params", {})
            if event.get("method") == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                messages.append(details.get("exception", {}).get("description") or details.get("text"))
            elif event.get("method") == "Runtime.consoleAPICalled":
                messages.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
        return "%s; errors and console: %s" % (where, messages[-10:])

    def click(self, selector: str) -> None:
        found = self.evaluate("(() => { const e = document.querySelector(%s); if (e) e.click(); return !!e; })()"
                              % json.dumps(selector))
        if not found:
            raise BrowserError("nothing matches %s" % selector)

    def screenshot(self, path: str) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(data))
