"""C{config_delta}: a master candidate's config.data brought forward by change records.

The master's WConfD journals one record per config change (serial, time,
the entities changed: L{ganeti.wconfd.store}).  Instead of the whole
config.data for every group commit, it sends a candidate that holds serial
C{base} the records C{base+1 .. n}.  The candidate keeps its config in
memory as a L{ConfigStore} (read once from config.data), replays the
records onto it exactly as WConfD replays its own journal, and replaces
config.data atomically (write, fsync, rename: a kill mid-write leaves the
old file or the new one) before it answers.  Every reader of config.data
(confd, failover, Ganeti's tools) therefore sees a complete, current file;
only the bytes on the wire and the parsing shrink.

Refusals change nothing: records that do not continue the serial this node
holds (C{base} differs: another master wrote meanwhile, the node restarted
with another file, ...) or that are malformed.  The master then sends the
whole file.  A candidate never goes back: records older than what it holds
are refused too.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, TypeVar

from ganeti import serializer
from ganeti.objects import ConfigData
from ganeti.paths import Paths
from ganeti.wconfd.store import ConfigStore

T = TypeVar("T")

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


class ConfigFollower:
    """This node's config.data as a L{ConfigStore}, kept across deltas.

    The store is read again whenever config.data is not the file this
    follower wrote last (a whole-file upload, a failover fetch, an edit).
    Calls are serialized; L{apply} does file I/O and is meant for a thread.
    """

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._lock = threading.Lock()
        self._store: ConfigStore | None = None
        self._identity: tuple[int, int, int] | None = None

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
            self._store = ConfigStore(config)
            self._identity = identity
        return self._store

    def locked(self, write: Callable[[], T], content: bytes | None = None) -> T:
        """Run C{write} (a whole-file write of config.data) in turn with
        L{apply}; given the C{content} written, keep it as the store the
        next delta applies to (else config.data is read again then)."""
        with self._lock:
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
        """The serial number of this node's config.data."""
        with self._lock:
            return self._current().serial_no

    def apply(self, base: object, records: object) -> int:
        """Replay C{records} (serials C{base+1..}) onto config.data; the new serial.

        @raise DeltaRefused: nothing was changed
        """
        runs = check_records(base, records)
        with self._lock:
            store = self._current()
            if store.serial_no != base:
                raise DeltaRefused("this node holds config serial %d, not %s" % (store.serial_no, base))
            try:
                for record in runs:
                    store.replay(record)
                data = store.snapshot()
            except Exception as e:  # a malformed record: forget the half-changed store
                self._store = self._identity = None
                raise DeltaRefused("record cannot be applied: %s: %s" % (e.__class__.__name__, e)) from None
            try:
                serializer.write_file(self.paths.config_data, data, mode=CONFIG_MODE)
            except BaseException:
                self._store = self._identity = None  # the file is the old one (or, if renamed, read again)
                raise
            self._identity = _identity(self.paths.config_data)
            return store.serial_no


__all__ = ["ConfigFollower", "DeltaRefused", "check_records"]
