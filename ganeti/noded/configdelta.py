"""C{config_delta}: a master candidate's config.data brought forward by change records.

The master's WConfD journals one record per config change (serial, time,
the entities changed: L{ganeti.wconfd.store}).  Instead of the whole
config.data for every group commit, it sends a candidate that holds serial
C{base} the records C{base+1 .. n}.  The candidate keeps its config in
memory as a L{ConfigStore} (read once from config.data), replays the
records onto it exactly as WConfD replays its own journal, appends them to
its delta journal C{config.data.delta} and fsyncs it before it answers (a
small write instead of the whole file).  config.data is rewritten from
the store shortly after (NodeD: L{REWRITE_DELAY} later, the deltas
meanwhile joining the same rewrite; atomically: write, fsync, rename,
then the journal is removed), so confd, Ganeti's tools and verify see it a
fraction of a second later.  What must see every acknowledged change
rewrites it at once (L{ConfigFollower.flush}): NodeD's start (a kill
between the append and the rewrite), the failover state and reads
(C{failover_status}, C{failover_read}, the election's serial), the start
of the master daemons here, and a whole-file upload (the journal is
written into the old file first, so that no record is ever replayed onto
another file).  The journal's first line names the config.data it follows
(serial and mtime); a journal that follows another file is dropped.

Refusals change nothing: records that do not continue the serial this node
holds (C{base} differs: another master wrote meanwhile, the node restarted
with another file, ...) or that are malformed.  The master then sends the
whole file.  A candidate never goes back: records older than what it holds
are refused too.
"""

from __future__ import annotations

import os
import threading
from types import SimpleNamespace
from typing import Any, Callable, TypeVar

from ganeti import serializer
from ganeti.objects import ConfigData
from ganeti.paths import Paths
from ganeti.wconfd.store import ConfigStore

T = TypeVar("T")

#: seconds NodeD waits after a delta before it rewrites config.data (L{ganeti.noded.procedures})
REWRITE_DELAY = 0.3
#: mode of config.data (as C{upload_file} writes it)
CONFIG_MODE = 0o640


class DeltaRefused(Exception):
    """The records do not apply to the config this node holds."""


def check_records(base: object, records: object) -> list[dict[str, Any]]:
    """The records, if they are a well-formed run C{base+1, base+2, ...}.

    @raise DeltaRefused: malformed, empty or not consecutive
    """
    if not (isinstance(base, int) and not isinstance(base, bool) and base >= 0):
        raise DeltaRefused("base serial must be a non-negative integer")
    if not (isinstance(records, list) and records):
        raise DeltaRefused("records must be a non-empty list")
    expected = base + 1
    for record in records:
        if not isinstance(record, dict):
            raise DeltaRefused("a record must be an object")
        serial = record.get("s")
        if not (isinstance(serial, int) and not isinstance(serial, bool)) or serial != expected:
            raise DeltaRefused("records must have consecutive serials from %d, got %r" % (expected, serial))
        if "full" in record:
            if not isinstance(record["full"], dict):
                raise DeltaRefused("record %d: full must be a config object" % serial)
        elif not (isinstance(record.get("c"), list) and isinstance(record.get("t"), (int, float))):
            raise DeltaRefused("record %d must carry changes (c) and a time (t)" % serial)
        expected += 1
    return records


def _identity(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def parse_delta_journal(data: bytes) -> tuple[dict[str, Any] | None, list[dict[str, Any]], int]:
    """(header, records, valid length) of a delta journal's content.

    The first line is the header C{{"base": serial, "mtime": mtime}} of the
    config.data the records follow; a torn or unreadable line ends it (a
    kill mid-append: that record was never acknowledged).
    """
    header: dict[str, Any] | None = None
    records: list[dict[str, Any]] = []
    valid = 0
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break
        try:
            value = serializer.loads(line)
        except ValueError:
            break
        if not isinstance(value, dict):
            break
        if header is None:
            header = value
        else:
            records.append(value)
        valid += len(line)
    return header, records, valid


def held_serial(paths: Paths) -> int | None:
    """The config serial a node holds durably: its config.data's, or the last
    record of a delta journal that follows it (read only: nothing is cut or
    dropped).  C{None}: no readable config.data."""
    try:
        config = serializer.loads(serializer.read_file(paths.config_data))
    except (OSError, ValueError):
        return None
    serial = config.get("serial_no") if isinstance(config, dict) else None
    if not isinstance(serial, int):
        return None
    try:
        header, records, _valid = parse_delta_journal(serializer.read_file(paths.config_data + ".delta"))
    except OSError:
        return serial
    view = SimpleNamespace(serial_no=serial, mtime=config.get("mtime"))
    if not ConfigFollower._follows(header, records, view):  # type: ignore[arg-type]
        return serial
    for record in records:
        if record.get("s") == serial + 1:
            serial += 1
    return serial


class ConfigFollower:
    """This node's config.data as a L{ConfigStore}, kept across deltas.

    A delta is made durable by appending its records to the delta journal
    (C{config.data.delta}, fsynced) before the answer; config.data is
    rewritten from the store later (L{rewrite}: coalesced, in a thread; at
    the latest when NodeD starts, before WConfD starts here, or before
    anything of this node's config is read for a failover: L{flush}).  The
    journal's header names the config.data it follows (serial and mtime):
    records are replayed only onto that file, and only those newer than it
    (a kill between the rewrite and the journal's truncation).

    The store is read again whenever config.data is not the file this
    follower wrote last (a whole-file upload, a failover fetch, an edit).
    Calls are serialized; they do file I/O and are meant for a thread.
    """

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self.journal = paths.config_data + ".delta"
        self._lock = threading.Lock()
        self._store: ConfigStore | None = None
        self._identity: tuple[int, int, int] | None = None
        #: records appended since config.data was last written
        self.pending = 0

    def _current(self) -> ConfigStore:
        identity = _identity(self.paths.config_data)
        if identity is None:
            raise DeltaRefused("this node has no config.data")
        if self._store is None or identity != self._identity:
            self._store = None
            try:
                config = ConfigData.from_json(serializer.read_file(self.paths.config_data))
            except (OSError, ValueError, TypeError, KeyError) as e:
                raise DeltaRefused("this node's config.data cannot be read: %s" % e) from None
            store = ConfigStore(config)
            self.pending = self._replay(store)
            self._store = store
            self._identity = identity
        return self._store

    def _replay(self, store: ConfigStore) -> int:
        """Apply the journal's records that follow C{store} (config.data as
        read); drop a journal that follows another file.  How many applied."""
        try:
            data = serializer.read_file(self.journal)
        except FileNotFoundError:
            return 0
        header, records, valid = parse_delta_journal(data)
        if not self._follows(header, records, store):
            self._drop_journal()  # it follows another config.data (or holds nothing durable)
            return 0
        applied = 0
        for record in records:
            serial = record.get("s")
            if not isinstance(serial, int) or serial <= store.serial_no:
                continue  # already in config.data (killed before the journal was emptied)
            if serial != store.serial_no + 1:
                break
            store.replay(record)
            applied += 1
        if valid != len(data):
            with open(self.journal, "r+b") as handle:
                handle.truncate(valid)
                os.fsync(handle.fileno())
        return applied

    @staticmethod
    def _follows(header: dict[str, Any] | None, records: list[dict[str, Any]], store: ConfigStore) -> bool:
        """Whether the journal continues the config.data read into C{store}:
        its base is that file, or (killed between a rewrite and the
        journal's removal) that file is one of its records (same serial and
        time)."""
        if header is None:
            return False
        base = header.get("base")
        if not isinstance(base, int) or base > store.serial_no:
            return False
        if base == store.serial_no:
            return header.get("mtime") == store.mtime
        return any(r.get("s") == store.serial_no and r.get("t") == store.mtime for r in records)

    def _drop_journal(self) -> None:
        try:
            os.unlink(self.journal)
        except FileNotFoundError:
            return
        serializer.fsync_dir(os.path.dirname(self.journal))

    def _write_config(self, store: ConfigStore) -> None:
        """config.data from C{store}, then an empty journal (in that order: a kill
        between the two leaves records the new file already holds)."""
        serializer.write_file(self.paths.config_data, store.snapshot(), mode=CONFIG_MODE)
        self._identity = _identity(self.paths.config_data)
        self._drop_journal()
        self.pending = 0

    def locked(self, write: Callable[[], T], content: bytes | None = None) -> T:
        """Run C{write} (a whole-file write of config.data) in turn with
        L{apply}, after the journal was written into config.data (so that no
        record of an older file is ever replayed onto the new one); given the
        C{content} written, keep it as the store the next delta applies to."""
        with self._lock:
            self._flush()
            self._store = self._identity = None
            result = write()
            if content is not None:
                try:
                    self._store = ConfigStore(ConfigData.from_json(content))
                except (ValueError, TypeError, KeyError):
                    return result  # not a config this node can follow: deltas are refused until the next file
                self._identity = _identity(self.paths.config_data)
            return result

    def serial(self) -> int:
        """The serial number of this node's config (config.data and its journal)."""
        with self._lock:
            return self._current().serial_no

    def flush(self) -> None:
        """Make config.data hold every record received (L{rewrite} at once)."""
        with self._lock:
            self._flush()

    rewrite = flush

    def _flush(self) -> None:
        if not self.pending and not os.path.exists(self.journal):
            return
        try:
            store = self._current()
        except DeltaRefused:
            return  # no config.data (or an unreadable one): nothing to bring forward
        if self.pending or os.path.exists(self.journal):
            self._write_config(store)

    def apply(self, base: object, records: object) -> int:
        """Replay C{records} (serials C{base+1..}) onto this node's config and
        journal them durably; the new serial.

        @raise DeltaRefused: nothing was changed
        """
        runs = check_records(base, records)
        with self._lock:
            store = self._current()
            if store.serial_no != base:
                raise DeltaRefused("this node holds config serial %d, not %s" % (store.serial_no, base))
            base_header = serializer.dumps({"base": store.serial_no, "mtime": store.mtime}) + b"\n"
            try:
                for record in runs:
                    store.replay(record)
            except Exception as e:  # a malformed record: forget the half-changed store
                self._store = self._identity = None
                raise DeltaRefused("record cannot be applied: %s: %s" % (e.__class__.__name__, e)) from None
            fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, CONFIG_MODE)
            try:
                size = os.fstat(fd).st_size
                header = b"" if size else base_header  # a new (or emptied) journal starts with its base
                lines = header + b"".join(serializer.dumps(record) + b"\n" for record in runs)
                try:
                    view = memoryview(lines)
                    while view:
                        view = view[os.write(fd, view):]
                    os.fsync(fd)
                    if header:
                        serializer.fsync_dir(os.path.dirname(self.journal))
                except BaseException:
                    self._store = self._identity = None  # read again: config.data and what the journal holds
                    try:
                        os.ftruncate(fd, size)  # not acknowledged: not kept either
                    except OSError:
                        pass  # a torn end is cut when the journal is read again
                    raise
            finally:
                os.close(fd)
            self.pending += len(runs)
            return store.serial_no


__all__ = ["ConfigFollower", "DeltaRefused", "check_records", "held_serial", "parse_delta_journal"]
