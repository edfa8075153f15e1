"""Server-sent events of the web console: the cluster's changes, one job's log.

C{GET /ui/events} is one L{ClusterStream} per open page.  L{EventHub} asks
LuxiD for the nodes, instances and jobs every L{POLL_INTERVAL} seconds, only
while at least one page is open, and once for all pages: one round of LUXI
queries whatever the number of pages.  A kind whose query took t seconds
waits at least L{LOAD_FACTOR} * t before the next (1,000 instances on a
loaded master), so the console never takes more than a quarter of LuxiD.  A page gets a C{snapshot} event when it
connects, then C{nodes}, C{instances} and C{jobs} events holding only what
changed (the poller goes on for L{IDLE_GRACE} seconds after the last page
left, so that a reload gets its snapshot at once) (C{{"changed": [rows], "removed": [keys]}}); the page never polls.
A page whose connection does not keep up (its TLS send buffer is full: the
transport paused the stream) is sent nothing more until it drains, then a new
snapshot: a slow reader costs a bounded amount of memory.

C{GET /ui/jobs/<id>/events} is one L{JobStream}: LUXI C{WaitForJobChange} in
a loop, on a LUXI connection of its own, pushing C{job} events (status and
the new log entries) until the job ends.

Both count against L{StreamLimits}: at most C{total} streams open, at most
C{per_user} per user; beyond them the answer is 429 and nothing is held.
Every stream sends a comment line every L{KEEPALIVE} seconds, which keeps it
under the connection's idle timeout.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Callable

import attrs
import orjson
from twisted.internet.defer import CancelledError, ensureDeferred
from twisted.internet.interfaces import IPushProducer, IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from zope.interface import implementer

from ganeti.jobs import lifecycle
from ganeti.luxi import methods

#: seconds between two rounds of queries while a page is open
POLL_INTERVAL = 0.5
#: a kind whose query took t seconds is queried again after at least LOAD_FACTOR * t seconds
LOAD_FACTOR = 4.0
#: seconds the poller goes on after the last page left (a reload finds the state current)
IDLE_GRACE = 10.0
#: seconds between two keep-alive comments of a stream
KEEPALIVE = 15.0
#: seconds one WaitForJobChange of a job stream waits
JOB_WAIT = 10.0

NODE_FIELDS = ["name", "role", "offline", "drained", "master_candidate", "liveness", "liveness_since",
               "last_seen", "seen_boot_id", "mtotal", "mfree", "dtotal", "dfree", "pinst_cnt", "sinst_cnt",
               "pip", "group"]
INSTANCE_FIELDS = ["name", "status", "admin_state", "oper_state", "pnode", "snodes", "os", "disk_template",
                   "hypervisor", "be/vcpus", "be/maxmem", "tags"]
JOB_FIELDS = ["id", "status", "summary", "received_ts", "start_ts", "end_ts"]
#: the key of each kind's rows
KEYS = {"nodes": "name", "instances": "name", "jobs": "id"}


@attrs.frozen
class StreamLimits:
    total: int = 64
    per_user: int = 8


def sse(event: str, data: Any) -> bytes:
    """One server-sent event (pure): C{event: NAME}, C{data: JSON}, a blank line."""
    return b"event: " + event.encode("ascii") + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def rows_of(fields: list[str], answer: dict[str, Any]) -> list[dict[str, Any]]:
    """LUXI C{Query}'s C{data} as dicts (a value not available is C{None})."""
    return [{f: (value if status == 0 else None) for f, (status, value) in zip(fields, row)}
            for row in answer.get("data", [])]


def diff(old: dict[Any, dict[str, Any]], new: dict[Any, dict[str, Any]]) -> dict[str, list[Any]] | None:
    """What changed from C{old} to C{new} (key -> row), or C{None} when nothing did (pure)."""
    changed = [row for key, row in new.items() if old.get(key) != row]
    removed = [key for key in old if key not in new]
    if not changed and not removed:
        return None
    return {"changed": changed, "removed": removed}


def _ts(value: Any) -> float | None:
    """A job timestamp, C{[seconds, microseconds]} as LUXI gives it, in seconds."""
    if isinstance(value, list) and len(value) == 2:
        return float(value[0] + value[1] / 1e6)
    return float(value) if isinstance(value, (int, float)) else None


class Streams:
    """The open streams, counted against L{StreamLimits}."""

    def __init__(self, limits: StreamLimits) -> None:
        self.limits = limits
        self.per_user: Counter[str] = Counter()
        self.open = 0

    def admit(self, user: str) -> bool:
        if self.open >= self.limits.total or self.per_user[user] >= self.limits.per_user:
            return False
        self.open += 1
        self.per_user[user] += 1
        return True

    def leave(self, user: str) -> None:
        self.open -= 1
        self.per_user[user] -= 1
        if self.per_user[user] <= 0:
            del self.per_user[user]


def start_stream(request: Any) -> None:
    """Answer C{request} with the headers of an event stream."""
    request.setResponseCode(200)
    request.setHeader(b"content-type", b"text/event-stream; charset=utf-8")
    request.setHeader(b"cache-control", b"no-store")
    request.setHeader(b"x-accel-buffering", b"no")
    request.write(b"retry: 2000\n\n")


@implementer(IPushProducer)
class ClusterStream:
    """One open page's C{/ui/events}."""

    def __init__(self, request: Any, hub: EventHub, user: str) -> None:
        self.request = request
        self.hub = hub
        self.user = user
        self.paused = False
        self.behind = False
        self.closed = False

    def send(self, data: bytes) -> None:
        if self.closed:
            return
        if self.paused:
            self.behind = True
            return
        self.request.write(data)

    # IPushProducer: the transport tells when its buffer is full
    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False
        if self.behind and not self.closed:
            self.behind = False
            snapshot = self.hub.snapshot()
            if snapshot is not None:
                self.request.write(snapshot)

    def stopProducing(self) -> None:
        self.closed = True


class EventHub:
    """The one poller behind every open page's event stream (see the module docstring)."""

    log = Logger()

    def __init__(self, luxi: Any, clock: IReactorTime, interval: float = POLL_INTERVAL,
                 timer: Callable[[], float] = time.perf_counter, metrics: Any = None) -> None:
        self.luxi = luxi
        #: MonD's node metrics (L{ganeti.rapi.ui.charts.NodeMetrics}), sampled while pages are open; none: no charts
        self.metrics = metrics
        self._sampling = False
        #: measures how long a query took (real time, whatever C{clock} is)
        self.timer = timer
        self.clock = clock
        self.interval = interval
        self.streams: list[ClusterStream] = []
        self.state: dict[str, dict[Any, dict[str, Any]]] | None = None
        self.error: str | None = None
        self._loop: LoopingCall | None = None
        self._idle: Any = None
        #: kind -> when it is next queried
        self._due: dict[str, float] = {}
        self._last_write = 0.0

    def snapshot(self) -> bytes | None:
        if self.state is None:
            return None
        data: dict[str, Any] = {kind: list(rows.values()) for kind, rows in self.state.items()}
        if self.metrics is not None:
            data["metrics"] = self.metrics.recent()
        return sse("snapshot", data)

    def subscribe(self, stream: ClusterStream) -> None:
        if self._idle is not None:
            if self._idle.active():
                self._idle.cancel()
            self._idle = None
        self.streams.append(stream)
        snapshot = self.snapshot()
        if snapshot is not None:
            stream.send(snapshot)
        if self.error is not None:
            stream.send(sse("error", {"message": self.error}))
        if self._loop is None:
            self._loop = LoopingCall(lambda: ensureDeferred(self.poll()))
            self._loop.clock = self.clock
            self._loop.start(self.interval, now=True).addErrback(
                lambda f: self.log.failure("the event poller stopped", f))

    def unsubscribe(self, stream: ClusterStream) -> None:
        stream.closed = True
        if stream in self.streams:
            self.streams.remove(stream)
        if not self.streams and self._loop is not None and self._idle is None:
            # a reload reconnects at once: it finds the state current and gets its snapshot without waiting
            self._idle = self.clock.callLater(IDLE_GRACE, self._stop_polling)

    def _stop_polling(self) -> None:
        self._idle = None
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
        self.state = None  # stale as soon as nobody looks: the next page starts afresh
        if self.metrics is not None:
            self.metrics.clear()

    def stop(self) -> None:
        for stream in list(self.streams):
            self.unsubscribe(stream)
        if self._idle is not None and self._idle.active():
            self._idle.cancel()
        self._stop_polling()

    def broadcast(self, data: bytes) -> None:
        self._last_write = self.clock.seconds()
        for stream in list(self.streams):
            stream.send(data)

    async def fetch(self, kind: str) -> dict[Any, dict[str, Any]]:
        """One query: every node, instance or job (key -> row)."""
        read = getattr(self.luxi, "read", None) or self.luxi.call
        if kind == "nodes":
            return {row["name"]: row for row in rows_of(NODE_FIELDS, await read(methods.Query.name, "node",
                                                                                NODE_FIELDS, None))}
        if kind == "instances":
            return {row["name"]: row for row in rows_of(INSTANCE_FIELDS, await read(methods.Query.name, "instance",
                                                                                    INSTANCE_FIELDS, None))}
        jobs: dict[Any, dict[str, Any]] = {}
        for row in await read(methods.QueryJobs.name, None, JOB_FIELDS):
            if row is None:
                continue
            job = dict(zip(JOB_FIELDS, row))
            for key in ("received_ts", "start_ts", "end_ts"):
                job[key] = _ts(job[key])
            jobs[job["id"]] = job
        return jobs

    async def poll(self) -> None:
        """One tick: query each kind that is due (all of them the first time), push what changed."""
        now = self.clock.seconds()
        due = [kind for kind in KEYS if self.state is None or self._due.get(kind, 0.0) <= now]
        new: dict[str, dict[Any, dict[str, Any]]] = {}
        try:
            for kind in due:
                started = self.timer()
                new[kind] = await self.fetch(kind)
                # a query that takes long is asked less often: the console takes at most 1/LOAD_FACTOR of LuxiD
                self._due[kind] = now + max(self.interval, LOAD_FACTOR * (self.timer() - started))
        except CancelledError:
            raise
        except Exception as e:
            message = "Cannot read the cluster's state from LuxiD: %s" % (e.args[0] if e.args else e)
            if message != self.error:
                self.error = message
                self.broadcast(sse("error", {"message": message}))
            self._keepalive()
            return
        if self.error is not None:
            self.error = None
            self.broadcast(sse("error", {"message": None}))
        if self.state is None:
            self.state = new
            self.broadcast(self.snapshot() or b"")
        else:
            for kind in due:
                changes = diff(self.state[kind], new[kind])
                self.state[kind] = new[kind]
                if changes is not None:
                    self.broadcast(sse(kind, changes))
        if self.metrics is not None and not self._sampling and self.metrics.is_due():
            self._sampling = True
            ensureDeferred(self._sample(dict(self.state["nodes"])))
        self._keepalive()

    async def _sample(self, nodes: dict[str, dict[str, Any]]) -> None:
        """One round of MonD samples (beside the queries: a slow MonD does not hold them up)."""
        try:
            new = await self.metrics.poll(nodes)
            if new and self.state is not None:
                self.broadcast(sse("metrics", new))
        except Exception:
            self.log.failure("sampling MonD")
        finally:
            self._sampling = False

    def _keepalive(self) -> None:
        if self.clock.seconds() - self._last_write >= KEEPALIVE:
            self.broadcast(b": keep-alive\n\n")


class JobStream:
    """One job's C{/ui/jobs/<id>/events}: status and log as they change, until the job ends."""

    log = Logger()

    def __init__(self, request: Any, luxi: Any, job_id: int, wait: float = JOB_WAIT) -> None:
        self.request = request
        self.luxi = luxi
        self.job_id = job_id
        self.wait = wait

    async def run(self, done: Callable[[], None]) -> None:
        info: list[Any] | None = None
        serial: int | None = None
        try:
            while True:
                answer = await self.luxi.call_alone(methods.WaitForJobChange.name, self.job_id,
                                                    ["status", "opstatus"], info, serial, self.wait)
                if answer is None:
                    self.request.write(sse("job", {"id": self.job_id, "status": None, "log": []}))
                    break
                if answer == "nochange":
                    self.request.write(b": keep-alive\n\n")
                    continue
                info, entries = answer
                for entry in entries:
                    serial = max(serial or 0, entry[0])
                log = [{"serial": e[0], "time": _ts(e[1]), "type": e[2], "message": e[3]} for e in entries]
                self.request.write(sse("job", {"id": self.job_id, "status": info[0], "opstatus": info[1],
                                               "log": log}))
                if info[0] in lifecycle.FINALIZED:
                    break
            self.request.write(sse("end", {"id": self.job_id}))
        except CancelledError:
            raise
        except Exception as e:
            self.request.write(sse("error", {"message": str(e.args[0] if e.args else e)}))
        finally:
            done()
