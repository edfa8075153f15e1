"""MonD's service: the cluster view, the collectors' timers and the report cache.

Every L{MondService.config_interval} seconds MonD reads the node's ssconf
(hypervisors, storage directories, master) and asks confd for the data
collector settings and the node's instances (DATA_COLLECTORS,
NODE_INSTANCES).  When confd does not answer it uses the node's replica of
config.data if it has one (a master candidate), else its own cache of the
last answers, and says so.  Then each active collector runs on its own
timer; its report (or a status report saying why it failed) replaces the
previous one in the cache.  Requests only read the cache, already encoded.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable

import attrs
from twisted.application.service import Service
from twisted.internet.defer import gatherResults, maybeDeferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti import serializer
from ganeti.mond import report as rp
from ganeti.mond import settings as st
from ganeti.mond.collectors import ClusterView, Collector, CollectorError
from ganeti.paths import Paths
from ganeti.reactors import ITimeUDPReactor

#: how long one confd query may take (seconds)
CONFD_TIMEOUT = 2.0
#: a collector run that takes longer than this many intervals (and at
#: least L{OVERDUE_MINIMUM} seconds) is reported as stuck (status 2)
OVERDUE_INTERVALS = 2
OVERDUE_MINIMUM = 10.0


@attrs.frozen
class Entry:
    """The cached report of one collector."""

    collector: Collector
    report: dict[str, Any]
    plain: bytes
    verbose: bytes
    ok: bool
    when: float


def encode_entry(collector: Collector, data: Any, when: float, ok: bool) -> Entry:
    report = rp.envelope(collector.name, collector.category, collector.kind, data, when, collector.version,
                         collector.format_version)
    plain = serializer.dumps(dict(report, data=collector.present(data, False)))
    verbose = plain if collector.kind != rp.KIND_STATUS else serializer.dumps(report)
    return Entry(collector, report, plain, verbose, ok, when)


class MondService(Service):
    """See the module docstring.

    @param collectors: the built-in collectors (in report order)
    @param plugins: C{name -> Collector} for the plugin names found now;
        called at every refresh
    @param confd: C{(qtype, query) -> Deferred of a ConfdResult}, or None
        to make a confd client from the node's files
    """

    log = Logger()

    def __init__(self, paths: Paths, reactor: ITimeUDPReactor, node: str, collectors: Iterable[Collector], *,
                 plugins: Callable[[], dict[str, Collector]] = dict, confd_port: int = 1814,
                 config_interval: float = st.CONFIG_INTERVAL, confd: Callable[..., Any] | None = None) -> None:
        self.paths = paths
        self.reactor = reactor
        self.node = node
        self.builtins = list(collectors)
        self.plugins: dict[str, Collector] = {}
        self._find_plugins = plugins
        self.confd_port = confd_port
        self.config_interval = config_interval
        self._confd = confd
        self._client: Any = None
        self._peers: tuple[list[str], bytes] | None = None
        self.cache = st.Cache(os.path.join(paths.data_dir, "mond", "cluster.json"))
        self.settings: dict[str, st.Setting] = {}
        self.view = ClusterView(node=node)
        self.entries: dict[str, Entry] = {}
        self.active: list[Collector] = []
        self._intervals: dict[str, float] = {}
        self._timers: dict[str, Any] = {}
        self._pending: set[str] = set()
        self._refresh_timer: Any = None
        self._refreshing = False
        #: bumped whenever a report changes (for derived caches such as /metrics)
        self.generation = 0
        self.refreshes = 0

    # --- lifecycle ----------------------------------------------------------
    def startService(self) -> None:
        super().startService()
        cached = self.cache.load()
        if cached is not None:
            self.settings, instances, when = cached
            self.view = attrs.evolve(self._local_view(), instances=tuple(instances), source="cache",
                                     stale="confd not asked yet (cache of %s)" % _when(when))
        self.refresh()

    def stopService(self) -> None:
        super().stopService()
        for timer in list(self._timers.values()) + [self._refresh_timer]:
            if timer is not None and timer.active():
                timer.cancel()
        self._timers.clear()
        for collector in self.collectors():
            collector.stop()
        if self._client is not None:
            self._client.close()

    # --- the cluster view ---------------------------------------------------
    def _ssconf(self, key: str) -> str:
        """The node's ssconf value C{key} ("" when it has none)."""
        try:
            with open(self.paths.ssconf(key)) as handle:
                return handle.read().strip()
        except (OSError, UnicodeDecodeError):
            return ""

    def _local_view(self) -> ClusterView:
        """What this node's ssconf says (hypervisors, storage, master)."""
        value = self._ssconf

        return attrs.evolve(
            self.view,
            master=value("master_node") == self.node,
            candidate=self.node in value("master_candidates").split(),
            hypervisors=tuple(h for h in value("hypervisor_list").splitlines() if h),
            file_storage_dir=value("file_storage_dir"),
            shared_file_storage_dir=value("shared_file_storage_dir"),
        )

    def _query(self, qtype: int, query: Any) -> Any:
        if self._confd is not None:
            return self._confd(qtype, query)
        from ganeti.confd.client import ConfdClient

        peers = [p for p in self._ssconf("master_candidates_ips").splitlines() if p]
        with open(self.paths.hmac_key, "rb") as handle:  # as Ganeti keeps it, newline included
            key = handle.read()
        # a new key (renew-crypto) or new candidates: a new client
        if self._client is None or (peers, key) != self._peers:
            if self._client is not None:
                self._client.close()
            self._client = ConfdClient(self.reactor, key, peers, port=self.confd_port, timeout=CONFD_TIMEOUT)
            self._peers = (peers, key)
        return self._client.query(qtype, query)

    def refresh(self) -> Any:
        """Refresh the view and apply it; schedules the next refresh."""
        if self._refresh_timer is not None and self._refresh_timer.active():
            self._refresh_timer.cancel()
        self._refresh_timer = self.reactor.callLater(self.config_interval, self.refresh)
        if self._refreshing:
            return None
        self._refreshing = True
        from ganeti.confd import wire

        def ask() -> Any:
            return gatherResults([maybeDeferred(self._query, wire.REQ_DATA_COLLECTORS, None),
                                  maybeDeferred(self._query, wire.REQ_NODE_INSTANCES, self.node)],
                                 consumeErrors=True)

        d = maybeDeferred(ask)
        d.addCallbacks(self._answered, self._unanswered)
        d.addErrback(lambda f: self.log.failure("MonD: refreshing the cluster view failed", f))
        d.addBoth(self._refreshed)
        return d

    def _refreshed(self, _: Any) -> None:
        self._refreshing = False
        self.refreshes += 1

    def _answered(self, results: list[Any]) -> None:
        collectors, instances = results
        for result in results:
            if not result.ok:
                raise CollectorError("confd answered with status %s: %r" % (result.status, result.answer))
        self.settings = st.parse_collectors(collectors.answer)
        primary = instances.answer[0] if isinstance(instances.answer, list) and instances.answer else []
        records = [st.instance_record(i) for i in primary if isinstance(i, dict)]
        now = self.reactor.seconds()
        if self.view.source not in ("confd", "none"):
            self.log.info("MonD: confd answers again; the cluster view is current")
        self.view = attrs.evolve(self._local_view(), instances=tuple(records), source="confd", stale="")
        try:
            self.cache.save(self.settings, records, now)
        except OSError as e:
            self.log.warn("MonD: cannot keep a copy of the cluster view at {path}: {e}", path=self.cache.path, e=e)
        self.apply()

    def _unanswered(self, failure: Failure) -> None:
        why = failure.value
        if hasattr(why, "subFailure"):
            why = why.subFailure.value
        reason = "confd did not answer (%s)" % (str(why) or type(why).__name__)
        view = self._local_view()
        try:
            raw = serializer.loads(serializer.read_file(self.paths.config_data))
            self.settings = st.collectors_from_config(raw)
            self.view = attrs.evolve(view, instances=tuple(st.instances_from_config(raw, self.node)),
                                     source="config replica", stale="")
        except (OSError, ValueError, AttributeError, TypeError):
            cached = self.cache.load()
            if cached is not None:
                self.settings, instances, when = cached
                stale = "%s; using the copy of %s" % (reason, _when(when))
                self.view = attrs.evolve(view, instances=tuple(instances), source="cache", stale=stale)
            else:
                self.view = attrs.evolve(view, source="none", stale="%s; no cached copy" % reason)
        if self.view.stale:
            self.log.warn("MonD: {stale}", stale=self.view.stale)
        self.apply()

    # --- the collectors -----------------------------------------------------
    def collectors(self) -> list[Collector]:
        return self.builtins + [self.plugins[n] for n in sorted(self.plugins)]

    def apply(self) -> None:
        """Start, stop and re-time collectors to match the view and settings."""
        try:
            self.plugins = dict(self._find_plugins())
        except Exception:
            self.log.failure("MonD: cannot look for plugins")
        active = []
        for collector in self.collectors():
            setting = st.setting_of(self.settings, collector.name)
            if setting.active and collector.available(self.view):
                active.append(collector)
        self.active = active
        names = {c.name for c in active}
        for name in list(self._timers):
            if name not in names:
                timer = self._timers.pop(name)
                if timer.active():
                    timer.cancel()
                self._intervals.pop(name, None)
        for name in list(self.entries):
            if name not in names:
                del self.entries[name]
                self.generation += 1
        for collector in active:
            interval = st.setting_of(self.settings, collector.name).interval
            if self._intervals.get(collector.name) == interval and collector.name in self._timers:
                continue
            self._intervals[collector.name] = interval
            timer = self._timers.pop(collector.name, None)
            if timer is not None and timer.active():
                timer.cancel()
                self._timers[collector.name] = self.reactor.callLater(interval, self._run, collector)
            else:
                self._run(collector)

    def _run(self, collector: Collector) -> None:
        name = collector.name
        interval = self._intervals.get(name, st.DEFAULT_INTERVAL)
        self._timers[name] = self.reactor.callLater(interval, self._run, collector)
        if name in self._pending:  # the previous run has not finished: skip this one
            return
        self._pending.add(name)
        view = attrs.evolve(self.view, interval=interval)
        limit = max(OVERDUE_INTERVALS * interval, OVERDUE_MINIMUM)
        overdue = self.reactor.callLater(limit, self._overdue, collector, limit)
        d = maybeDeferred(collector.collect, view)
        d.addCallbacks(self._store, self._failed, callbackArgs=(collector, True), errbackArgs=(collector,))
        d.addErrback(lambda f: self.log.failure("MonD: collector {name}", f, name=name))
        d.addBoth(lambda _: self._finished(name, overdue))

    def _finished(self, name: str, overdue: Any) -> None:
        self._pending.discard(name)
        if overdue.active():
            overdue.cancel()

    def _overdue(self, collector: Collector, limit: float) -> None:
        """A run still going after C{limit} seconds: say so (it is not started again meanwhile)."""
        self.log.warn("MonD: collector {name} has not finished after {limit}s", name=collector.name, limit=limit)
        self._store(rp.failed_data(rp.STATUS_UNKNOWN, "the collector has not finished after %gs" % limit),
                    collector, False)

    def _store(self, data: Any, collector: Collector, ok: bool) -> None:
        if collector.name not in self._timers:  # deactivated meanwhile
            return
        self.entries[collector.name] = encode_entry(collector, data, self.reactor.seconds(), ok)
        self.generation += 1

    def _failed(self, failure: Failure, collector: Collector) -> None:
        if failure.check(CollectorError):
            code, message = failure.value.code, str(failure.value)
        else:
            self.log.failure("MonD: collector {name} crashed", failure, name=collector.name)
            code, message = rp.STATUS_UNKNOWN, "the collector failed: %s" % (failure.getErrorMessage(),)
        self._store(rp.failed_data(code, message), collector, False)

    # --- what requests read -------------------------------------------------
    def find(self, category: str | None, name: str) -> Collector | None:
        for collector in self.active:
            if collector.name == name and collector.category == category:
                return collector
        return None

    def report_bytes(self, collector: Collector, verbose: bool) -> bytes:
        entry = self.entries.get(collector.name)
        if entry is None:
            entry = encode_entry(collector, rp.failed_data(rp.STATUS_UNKNOWN, "no data collected yet"),
                                 self.reactor.seconds(), False)
        return entry.verbose if verbose else entry.plain

    def all_bytes(self, verbose: bool) -> bytes:
        return b"[" + b",".join(self.report_bytes(c, verbose) for c in self.active) + b"]"

    def list_bytes(self) -> bytes:
        return serializer.dumps([[c.name, c.category, c.kind] for c in self.active])


def _when(seconds: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))
