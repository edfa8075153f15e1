"""Plugin collectors: executables in MonD's plugin directory.

Each executable file C{NAME} (letters, digits, C{._-}) is a collector
called C{NAME}, run on its interval with no arguments.  It prints one JSON
object: either a report (C{"data"} and optionally C{"category"},
C{"kind"}, C{"version"}, C{"format_version"}) or, without C{"data"}, the
data itself (category default, kind 0).  A plugin that exits non-zero,
runs longer than the timeout (it is killed) or prints anything else gives
a status report (kind 1) with code 4 saying so.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, cast

from twisted.internet.defer import Deferred
from twisted.internet.error import ProcessDone
from twisted.internet.interfaces import IProcessTransport, IReactorTime
from twisted.internet.protocol import ProcessProtocol
from twisted.python.failure import Failure

from ganeti.mond.collectors import ClusterView, Collector, CollectorError
from ganeti.mond.report import CATEGORIES, KIND_PERF, KIND_STATUS
from ganeti.reactors import ITimeProcessReactor

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: plugins print at most this much
MAX_OUTPUT = 1 << 20
DEFAULT_TIMEOUT = 10.0


def scan(directory: str) -> list[str]:
    """The names of the plugin executables in C{directory}, sorted."""
    try:
        entries = os.listdir(directory)
    except OSError:
        return []
    found = []
    for name in entries:
        path = os.path.join(directory, name)
        if NAME.match(name) and os.path.isfile(path) and os.access(path, os.X_OK):
            found.append(name)
    return sorted(found)


def parse_output(output: bytes) -> tuple[str | None, int, str, int, Any]:
    """C{(category, kind, version, format_version, data)} of a plugin's output (pure).

    @raise CollectorError: the output is not a valid report or object
    """
    try:
        value = json.loads(output.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        text = output[:80].decode("utf-8", "replace")
        raise CollectorError("the plugin printed no JSON object (%s): %r" % (e, text)) from e
    if not isinstance(value, dict):
        raise CollectorError("the plugin printed JSON that is not an object")
    if "data" not in value:
        return None, KIND_PERF, "1", 1, value
    category = value.get("category")
    if category is not None and (category not in CATEGORIES or category == "default"):
        raise CollectorError("the plugin gave an unknown category %r" % (category,))
    kind = value.get("kind", KIND_PERF)
    if kind not in (KIND_PERF, KIND_STATUS) or isinstance(kind, bool):
        raise CollectorError("the plugin gave an unknown kind %r" % (kind,))
    version = value.get("version", "1")
    format_version = value.get("format_version", 1)
    if not isinstance(version, str) or not isinstance(format_version, int) or isinstance(format_version, bool):
        raise CollectorError("the plugin gave a bad version or format_version")
    return category, kind, version, format_version, value["data"]


class _PluginProcess(ProcessProtocol):
    @property
    def _connected(self) -> IProcessTransport:
        """The transport, in methods that run only while connected."""
        return cast(IProcessTransport, self.transport)

    def __init__(self, name: str, clock: IReactorTime, timeout: float) -> None:
        self.name = name
        self.done: Deferred[bytes] = Deferred()
        self._out: list[bytes] = []
        self._size = 0
        self._err = b""
        self._clock = clock
        self._timeout = timeout
        self._timer: Any = None
        self.why = ""

    def connectionMade(self) -> None:
        self._connected.closeStdin()
        self._timer = self._clock.callLater(self._timeout, self.kill, "it ran longer than %gs and was killed"
                                            % self._timeout)

    def kill(self, why: str) -> None:
        """Kill the process; C{why} becomes the failure's reason."""
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if not self.why:
            self.why = why
        try:
            self._connected.signalProcess("KILL")
        except Exception:
            pass

    def outReceived(self, data: bytes) -> None:
        self._size += len(data)
        if self._size > MAX_OUTPUT:
            self.kill("it printed more than %d bytes" % MAX_OUTPUT)
            return
        self._out.append(data)

    def errReceived(self, data: bytes) -> None:
        self._err = (self._err + data)[-400:]

    def processEnded(self, reason: Failure) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        if self.why:
            self.done.errback(CollectorError("plugin %s failed: %s" % (self.name, self.why)))
        elif reason.check(ProcessDone):
            self.done.callback(b"".join(self._out))
        else:
            value = reason.value
            how = ("was killed by signal %s" % value.signal if getattr(value, "signal", None)
                   else "exited with status %s" % getattr(value, "exitCode", "?"))
            err = self._err.decode("utf-8", "replace").strip()
            self.done.errback(CollectorError("plugin %s failed: it %s%s" % (self.name, how,
                                                                             ": " + err if err else "")))


class Plugin(Collector):
    """One plugin executable."""

    def __init__(self, name: str, directory: str, reactor: ITimeProcessReactor, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.name = name
        self.path = os.path.join(directory, name)
        self.version = "1"
        self._reactor = reactor
        self._timeout = timeout
        self._process: _PluginProcess | None = None

    def stop(self) -> None:
        """Kill the plugin if it still runs (MonD stops)."""
        if self._process is not None:
            self._process.kill("MonD stopped")

    def collect(self, view: ClusterView) -> Any:
        process = _PluginProcess(self.name, self._reactor, self._timeout)
        self._process = process
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GANETI_NODE": view.node}
        try:
            self._reactor.spawnProcess(process, self.path, [self.path], env=env, path=os.path.dirname(self.path))
        except OSError as e:
            raise CollectorError("plugin %s cannot run: %s" % (self.name, e)) from e

        def ended(result: Any) -> Any:
            if self._process is process:
                self._process = None
            return result

        process.done.addBoth(ended)

        def parsed(output: bytes) -> Any:
            try:
                category, kind, version, format_version, data = parse_output(output)
            except CollectorError as e:
                raise CollectorError("plugin %s failed: %s" % (self.name, e)) from e
            self.category, self.kind, self.version, self.format_version = category, kind, version, format_version
            return data

        def failed(failure: Failure) -> Any:
            self.kind = KIND_STATUS  # a failing plugin gives a status report
            return failure

        return process.done.addCallbacks(parsed, failed)
