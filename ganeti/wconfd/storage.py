"""Where WConfD keeps its state on disk, and an in-memory twin for tests.

Files under the data directory:

  - C{config.data}: always a complete config in Ganeti's layout, replaced
    atomically (write, fsync, rename, fsync the directory);
  - C{config.journal}: one JSON line per acknowledged change made since
    config.data was last written (C{config.journal.old} exists while a new
    config.data is being written); a change is acknowledged only after its
    line is fsynced, and several concurrent changes share one fsync;
  - C{locks.data}: the lock state in Ganeti's format, plus C{locks.journal},
    one line per owner whose locks changed since.  Lock lines are written
    before the answer is sent (they survive a kill of the daemon) and
    fsynced when locks.data is rewritten;
  - C{wconfd-requests.data}: the answers of the owners' last requests
    (L{ganeti.wconfd.requests}), rewritten before a journal they were
    recorded in is dropped.

Recovery reads config.data, then replays the journal lines newer than its
serial number; a torn last line (a crash mid-write) was never acknowledged
and is dropped.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import Any, Callable

import attrs
from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorThreads
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from zope.interface import Interface, implementer

from ganeti import errors, serializer
from ganeti.paths import Paths

#: buckets (seconds) of L{FileStorage.write_latency}
WRITE_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)

CONFIG_MODE = 0o640
LOCKS_MODE = 0o600


@attrs.define
class Recovered:
    """What L{IConfigStorage.load} found on disk."""

    config: bytes | None
    records: list[dict[str, Any]]
    locks: Any
    lock_records: list[Any]
    requests: Any = None


class IConfigStorage(Interface):
    def load() -> Recovered:
        """Read everything back (at start-up, before serving)."""

    def append(record: dict[str, Any]) -> Deferred:
        """Add a config change; fires once it is durable."""

    def begin_checkpoint() -> None:
        """Later appends go to a new journal (the old one ends at the checkpoint)."""

    def write_config(data: bytes) -> Deferred:
        """Replace config.data durably."""

    def end_checkpoint() -> Deferred:
        """config.data now holds everything in the old journal: drop it."""

    def append_locks(line: Any) -> None:
        """Record one owner's new lock state (before answering)."""

    def write_locks(data: Any) -> None:
        """Replace locks.data and empty the lock journal."""

    def write_requests(data: Any) -> None:
        """Replace the table of recorded answers (durably)."""

    def close() -> None:
        """Stop background work."""

    def room() -> str | None:
        """Why no config change can be written now (the disk is full), or None."""

    def drained() -> Deferred:
        """Fires once every append made so far has succeeded or failed."""

    def durable_config() -> tuple[bytes | None, list[Any]]:
        """config.data and the journal records as they are durable now."""


def parse_journal(data: bytes, source: str = "journal") -> tuple[list[Any], int]:
    """Decode journal lines; returns (records, length of the valid prefix).

    Lines are JSON followed by a newline; decoding stops at the first line
    that is torn or corrupt.
    """
    records: list[Any] = []
    offset = 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        if end < 0:
            break
        try:
            records.append(serializer.loads(data[offset:end]))
        except ValueError:
            break
        offset = end + 1
    return records, offset


class _JournalWriter:
    """Appends to a journal file in a worker thread, one fsync per batch.

    Every operation goes through one queue and is done in order, so a
    rotation never races a write.  Callers get Deferreds, fired in the
    reactor thread.
    """

    log = Logger()

    def __init__(self, path: str, reactor: IReactorThreads) -> None:
        self._path = path
        self._reactor = reactor
        self._queue: queue.SimpleQueue[tuple[str, Any, Deferred | None]] = queue.SimpleQueue()
        self._fd = self._open()
        self._thread = threading.Thread(target=self._run, name="wconfd-journal", daemon=True)
        self._thread.start()

    def _open(self) -> int:
        fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, CONFIG_MODE)
        serializer.fsync_dir(os.path.dirname(self._path))
        return fd

    def submit(self, op: str, arg: Any = None) -> Deferred:
        d: Deferred = Deferred()
        self._queue.put((op, arg, d))
        return d

    def stop(self) -> None:
        self._queue.put(("stop", None, None))
        self._thread.join(timeout=10)

    def _fire(self, d: Deferred | None, result: Any) -> None:
        if d is not None:
            self._reactor.callFromThread(d.callback, result)

    def _fail(self, d: Deferred | None, exc: BaseException) -> None:
        if d is not None:
            self._reactor.callFromThread(d.errback, exc)

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            waiting: list[Deferred | None] = []
            for op, arg, d in batch:
                if op == "write":
                    size = None
                    try:
                        size = os.fstat(self._fd).st_size
                        _write_all(self._fd, arg)
                        waiting.append(d)
                    except OSError as e:
                        self._cut(size)
                        self._fail(d, JournalWriteError(self._path, e))
                    continue
                self._sync(waiting)
                waiting = []
                if op == "stop":
                    os.close(self._fd)
                    return
                try:
                    self._fire(d, self._special(op, arg))
                except OSError as e:
                    self._fail(d, errors.ConfigurationError("journal %s: %s" % (op, e)))
            self._sync(waiting)

    def _cut(self, size: int | None) -> None:
        """Drop what a failed write left (a torn line ends the journal's
        replay: later records after it would be lost)."""
        if size is None:
            return
        try:
            os.ftruncate(self._fd, size)
        except OSError as e:
            self.log.critical("{path}: cannot drop a torn write: {e}", path=self._path, e=e)

    def _sync(self, waiting: list[Deferred | None]) -> None:
        if not waiting:
            return
        try:
            os.fdatasync(self._fd)
        except OSError as e:
            for d in waiting:
                self._fail(d, errors.ConfigurationError("cannot sync %s: %s" % (self._path, e)))
            return
        for d in waiting:
            self._fire(d, None)

    def _special(self, op: str, arg: Any) -> Any:
        if op == "rotate":
            os.fsync(self._fd)
            os.close(self._fd)
            old = self._path + ".old"
            if os.path.exists(old):
                # The previous checkpoint never finished, so config.data may
                # lack the old journal's records: keep them, add ours after.
                # (A crash before the unlink leaves duplicates; replay skips them.)
                with open(self._path, "rb") as src, open(old, "ab") as dst:
                    dst.write(src.read())
                    dst.flush()
                    os.fsync(dst.fileno())
                os.unlink(self._path)
            else:
                os.replace(self._path, old)
            self._fd = self._open()
        elif op == "drop_old":
            try:
                os.unlink(self._path + ".old")
            except FileNotFoundError:
                pass
            serializer.fsync_dir(os.path.dirname(self._path))
        elif op == "call":
            return arg()
        else:
            raise ValueError(op)
        return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class JournalWriteError(errors.ConfigurationError):
    """A journal append failed; C{cause} is the C{OSError}."""

    def __init__(self, path: str, cause: OSError) -> None:
        super().__init__("cannot write %s: %s" % (path, cause))
        self.cause = cause


#: free bytes a config change needs in the data directory
MIN_FREE_BYTES = 1024 * 1024


@implementer(IConfigStorage)
class FileStorage:
    """State in files under a node's data directory."""

    log = Logger()

    def __init__(self, paths: Paths, reactor: IReactorThreads) -> None:
        from ganeti.promtext import Histogram

        self._paths = paths
        self._reactor = reactor
        #: how long config changes took to become durable (journal append + fsync), in seconds
        self.write_latency = Histogram(WRITE_LATENCY_BUCKETS)
        self._writer: _JournalWriter | None = None
        self._locks_fd: int | None = None

    def load(self) -> Recovered:
        paths = self._paths
        os.makedirs(paths.data_dir, exist_ok=True)
        try:
            config = serializer.read_file(paths.config_data)
        except FileNotFoundError:
            config = None
        records: list[dict[str, Any]] = []
        for path in (paths.config_journal + ".old", paths.config_journal):
            records.extend(self._read_journal(path))
        locks: Any = None
        try:
            locks = serializer.read_json(paths.locks_data)
        except FileNotFoundError:
            pass
        except ValueError as e:
            raise errors.ConfigurationError("%s is corrupt: %s" % (paths.locks_data, e)) from e
        lock_records = self._read_journal(paths.locks_journal)
        requests: Any = None
        try:
            requests = serializer.read_json(paths.wconfd_requests)
        except FileNotFoundError:
            pass
        except ValueError:
            self.log.warn("{path} is corrupt: retried requests may be applied again", path=paths.wconfd_requests)
        self._writer = _JournalWriter(paths.config_journal, self._reactor)
        self._locks_fd = os.open(
            paths.locks_journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, LOCKS_MODE
        )
        return Recovered(config, records, locks, lock_records, requests)

    def _read_journal(self, path: str) -> list[Any]:
        try:
            data = serializer.read_file(path)
        except FileNotFoundError:
            return []
        records, valid = parse_journal(data)
        if valid != len(data):
            self.log.warn(
                "{path}: dropping {n} bytes of an unfinished write at the end", path=path, n=len(data) - valid
            )
            with open(path, "r+b") as handle:
                handle.truncate(valid)
                os.fsync(handle.fileno())
        return records

    def append(self, record: dict[str, Any]) -> Deferred:
        assert self._writer is not None, "load() first"
        started = time.perf_counter()
        done = self._writer.submit("write", serializer.dumps(record) + b"\n")

        def observe(result: Any) -> Any:
            self.write_latency.observe(time.perf_counter() - started)
            return result
        return done.addCallback(observe)

    def begin_checkpoint(self) -> None:
        assert self._writer is not None
        self._writer.submit("rotate")

    def write_config(self, data: bytes) -> Deferred:
        path = self._paths.config_data
        return deferToThreadPool(
            self._reactor, self._reactor.getThreadPool(), serializer.write_file, path, data, mode=CONFIG_MODE
        )

    def end_checkpoint(self) -> Deferred:
        assert self._writer is not None
        return self._writer.submit("drop_old")

    def append_locks(self, line: Any) -> None:
        assert self._locks_fd is not None
        _write_all(self._locks_fd, serializer.dumps(line) + b"\n")

    def write_locks(self, data: Any) -> None:
        serializer.write_file(self._paths.locks_data, serializer.dumps(data), mode=LOCKS_MODE)
        assert self._locks_fd is not None
        os.ftruncate(self._locks_fd, 0)

    def write_requests(self, data: Any) -> None:
        serializer.write_file(self._paths.wconfd_requests, serializer.dumps(data), mode=LOCKS_MODE)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.stop()
            self._writer = None
        if self._locks_fd is not None:
            os.close(self._locks_fd)
            self._locks_fd = None

    def room(self) -> str | None:
        try:
            st = os.statvfs(self._paths.data_dir)
        except OSError:
            return None
        free = st.f_bavail * st.f_frsize
        if free >= MIN_FREE_BYTES:
            return None
        return "the data directory %s is full (%d KiB free)" % (self._paths.data_dir, free // 1024)

    def drained(self) -> Deferred:
        assert self._writer is not None, "load() first"
        return self._writer.submit("call", lambda: None)

    def durable_config(self) -> tuple[bytes | None, list[Any]]:
        paths = self._paths
        try:
            config = serializer.read_file(paths.config_data)
        except FileNotFoundError:
            config = None
        records: list[Any] = []
        for path in (paths.config_journal + ".old", paths.config_journal):
            try:
                records.extend(parse_journal(serializer.read_file(path))[0])
            except FileNotFoundError:
                pass
        return config, records


@implementer(IConfigStorage)
class MemoryStorage:
    """The same contract in memory; every write completes at once."""

    def __init__(self, config: bytes | None = None) -> None:
        self.config = config
        self.journal: list[dict[str, Any]] = []
        self.old_journal: list[dict[str, Any]] = []
        self.locks: Any = None
        self.lock_journal: list[Any] = []
        self.requests: Any = None
        self.config_writes = 0
        #: set to a Deferred-returning callable to control when writes finish
        self.on_write: Callable[[bytes], Deferred] | None = None

    def load(self) -> Recovered:
        return Recovered(self.config, self.old_journal + self.journal, self.locks, list(self.lock_journal), self.requests)

    def append(self, record: dict[str, Any]) -> Deferred:
        self.journal.append(serializer.loads(serializer.dumps(record)))
        return succeed(None)

    def begin_checkpoint(self) -> None:
        self.old_journal, self.journal = self.old_journal + self.journal, []

    def write_config(self, data: bytes) -> Deferred:
        def done(_: Any) -> None:
            self.config = data
            self.config_writes += 1

        if self.on_write is not None:
            return self.on_write(data).addCallback(done)
        done(None)
        return succeed(None)

    def end_checkpoint(self) -> Deferred:
        self.old_journal = []
        return succeed(None)

    def append_locks(self, line: Any) -> None:
        self.lock_journal.append(serializer.loads(serializer.dumps(line)))

    def write_locks(self, data: Any) -> None:
        self.locks = serializer.loads(serializer.dumps(data))
        self.lock_journal = []

    def write_requests(self, data: Any) -> None:
        self.requests = serializer.loads(serializer.dumps(data))

    def room(self) -> str | None:
        return None

    def drained(self) -> Deferred:
        return succeed(None)

    def durable_config(self) -> tuple[bytes | None, list[Any]]:
        return self.config, self.old_journal + self.journal

    def close(self) -> None:
        pass
