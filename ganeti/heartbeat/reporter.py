"""NodeD pushes its state to LuxiD through the heartbeat connection.

What the node reports is exactly what node RPC would answer LuxiD's live
queries (C{all_instances_info}, C{node_info}, with the arguments LuxiD
sends in its C{accepted} or C{params} message), so LuxiD reads a report
the way it reads an RPC answer (L{ganeti.luxid.live}).

  - a full report on every (re)connect, and at most once a minute after that;
  - instance changes at once: the fake hypervisor's state directory is
    watched with inotify, kvm's qemu processes through their QMP events
    (L{ganeti.heartbeat.kvmd}: a guest that powers itself off, a qemu that
    exits); every hypervisor is also polled every L{POLL_INTERVAL} seconds;
  - node resources when they moved by more than L{MEMORY_THRESHOLD} MiB of
    memory or L{DISK_THRESHOLD} MiB of disk.

L{instance_changes} and L{node_changed} are pure.
"""

from __future__ import annotations

import os
from typing import Any, Awaitable, Callable, Mapping, Sequence

from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from ganeti.dirwatch import REMOVED, WRITTEN, DirectoryWatcher, WatchUnavailable
from ganeti.heartbeat import wire
from ganeti.reactors import IReactor

#: seconds between two polls of the hypervisors and the node's resources
POLL_INTERVAL = 2.0
#: seconds between two forced full reports
FULL_EVERY = 60.0
#: node memory moves reported (MiB)
MEMORY_THRESHOLD = 64
#: node disk moves reported (MiB)
DISK_THRESHOLD = 256
#: instance keys whose change is reported (not the uptime)
_INSTANCE_KEYS = ("state", "memory", "vcpus")
_THRESHOLDS = {"mfree": MEMORY_THRESHOLD, "mtotal": MEMORY_THRESHOLD, "mnode": MEMORY_THRESHOLD,
               "dfree": DISK_THRESHOLD, "dtotal": DISK_THRESHOLD}


def instance_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """C{{name: info}} of instances new or changed, C{{name: None}} of those gone."""
    out: dict[str, Any] = {}
    for name, info in new.items():
        before = old.get(name)
        if before is None or any(before.get(k) != info.get(k) for k in _INSTANCE_KEYS):
            out[name] = info
    for name in old:
        if name not in new:
            out[name] = None
    return out


def node_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether the node's resources moved enough to be reported."""
    for key in set(old) | set(new):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and key in _THRESHOLDS:
            if abs(a - b) <= _THRESHOLDS[key]:
                continue
        return True
    return False


class StateReporter:
    """Sends this node's state through C{send} (the heartbeat client's).

    @param instances: C{await instances(args)} -> C{{name: info}} (the
        node's C{all_instances_info} payload)
    @param node_info: C{await node_info(args)} -> node query fields
        (C{node_report} of the node's C{node_info} payload)
    @param watch: directories whose changes mean "look at the instances now"
    """

    log = Logger()

    def __init__(self, reactor: IReactor, send: Callable[[dict[str, Any]], bool],
                 instances: Callable[[list[Any]], Awaitable[dict[str, Any]]],
                 node_info: Callable[[list[Any]], Awaitable[dict[str, Any]]], *, watch: Sequence[str] = (),
                 poll: float = POLL_INTERVAL, full_every: float = FULL_EVERY) -> None:
        self.reactor = reactor
        self.send = send
        self._instances = instances
        self._node_info = node_info
        self.watch_dirs = list(watch)
        self.poll_interval = poll
        self.full_every = full_every
        self.args: dict[str, Any] | None = None
        self._sent_instances: dict[str, Any] = {}
        self._sent_node: dict[str, Any] = {}
        self._last_full = -1e18
        self._busy = False
        self._again = False
        self._next_waiters: list[Deferred[None]] = []
        self._poll: LoopingCall | None = None
        self._dir_watch: DirectoryWatcher | None = None
        self.reports = 0
        #: the kvm event watcher (L{ganeti.heartbeat.kvmd.KvmEvents}), synced on every look
        self.kvm_events: Any = None

    # --- life cycle ------------------------------------------------------------------
    def connected(self, args: dict[str, Any] | None) -> None:
        """A (re)connection was accepted: a full report now."""
        if args is not None:
            self.args = args
        self._last_full = -1e18
        self.check()
        if self._poll is None:
            self._poll = LoopingCall(self.check)
            self._poll.clock = self.reactor
            self._poll.start(self.poll_interval, now=False)
            self._watch()

    def params(self, args: dict[str, Any]) -> None:
        """LuxiD sent new report arguments (the cluster changed): full report."""
        self.connected(args)

    def stop(self) -> None:
        if self._poll is not None and self._poll.running:
            self._poll.stop()
        self._poll = None
        if self._dir_watch is not None:
            self._dir_watch.stop()
            self._dir_watch = None
        if self.kvm_events is not None:
            self.kvm_events.stop()

    def _watch(self) -> None:
        if not self.watch_dirs or self._dir_watch is not None:
            return
        watch = DirectoryWatcher(self.reactor, self._written, events=(WRITTEN, REMOVED))
        try:
            for directory in self.watch_dirs:
                os.makedirs(directory, exist_ok=True)
                watch.watch(directory)
        except (OSError, WatchUnavailable):
            watch.stop()
            self.log.failure("state reports: cannot watch {dirs}; polling only", dirs=self.watch_dirs)
            return
        self._dir_watch = watch

    def _written(self, _name: str) -> None:
        self.check()

    # --- reporting -------------------------------------------------------------------------
    def check(self) -> Deferred[None]:
        """Look at the node now; send what changed (one look at a time).

        @return: fires once a look that began after this call has sent what
            it found (at once while not connected)"""
        if self.kvm_events is not None:
            self.kvm_events.sync()
        if self.args is None:
            return succeed(None)
        waiter: Deferred[None] = Deferred()
        if self._busy:
            self._again = True
            self._next_waiters.append(waiter)
            return waiter
        self._busy = True
        waiters = [waiter]
        d = Deferred.fromCoroutine(self._check())

        def done(_: Any) -> None:
            self._busy = False
            if self._again:
                self._again = False
                later, self._next_waiters = self._next_waiters, []

                def wake(_: Any) -> None:
                    for w in later:
                        w.callback(None)

                self.check().addBoth(wake)
            for w in waiters:
                w.callback(None)

        d.addErrback(lambda f: self.log.failure("state report failed", f)).addBoth(done)
        return waiter

    async def _check(self) -> None:
        assert self.args is not None
        instances = await self._instances(self.args.get("instances", []))
        node = await self._node_info(self.args.get("node_info", [[], []]))
        now = self.reactor.seconds()
        if now - self._last_full >= self.full_every:
            if self.send(wire.report(True, instances, node)):
                self._last_full = now
                self._sent_instances, self._sent_node = instances, node
                self.reports += 1
            return
        changes = instance_changes(self._sent_instances, instances)
        moved = node_changed(self._sent_node, node)
        if not changes and not moved:
            return
        if self.send(wire.report(False, changes or None, node if moved else None)):
            self._sent_instances = instances
            if moved:
                self._sent_node = node
            self.reports += 1


def node_reporter(paths: Any, reactor: IReactor, send: Callable[[dict[str, Any]], bool]) -> StateReporter:
    """NodeD's reporter: its own instance procedures, the fake hypervisor's directory watched."""
    from ganeti.noded.procedures import NodeProcedures
    from ganeti.rpc.live import instances_report, node_report

    procedures = NodeProcedures(paths, reactor)

    async def instances(args: list[Any]) -> dict[str, Any]:
        payload = await procedures.instances.all_instances_info(*args) if args else {}
        return instances_report(payload) or {}

    async def node_info(args: list[Any]) -> dict[str, Any]:
        return node_report(await procedures.node_info(*args)) or {}

    from ganeti.heartbeat.kvmd import KvmEvents

    reporter = StateReporter(reactor, send, instances, node_info,
                             watch=[os.path.join(paths.run_dir, "fake-hypervisor")])
    reporter.kvm_events = KvmEvents(reactor, os.path.join(paths.run_dir, "kvm-hypervisor", "ctrl"), reporter.check)
    return reporter


__all__ = ["DISK_THRESHOLD", "FULL_EVERY", "MEMORY_THRESHOLD", "POLL_INTERVAL", "StateReporter",
           "instance_changes", "node_changed", "node_reporter"]
