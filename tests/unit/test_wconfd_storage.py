"""Tests for L{ganeti.wconfd.storage}: journal parsing and the file layout.

L{FileStorage} writes its journal from a worker thread and fires its
Deferreds through C{callFromThread}, so its tests run on the global reactor
(pytest-twisted) in a temporary directory.  Nothing sleeps: the tests wait
for the Deferreds the storage hands out.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.defer import gatherResults

from ganeti import serializer
from ganeti.paths import Paths
from ganeti.wconfd.storage import FileStorage, MemoryStorage, parse_journal


def _lines(*records: Any) -> bytes:
    return b"".join(serializer.dumps(r) + b"\n" for r in records)


# --- parse_journal ------------------------------------------------------------


def test_parse_journal_reads_every_complete_line() -> None:
    data = _lines({"s": 2}, {"s": 3})
    assert parse_journal(data) == ([{"s": 2}, {"s": 3}], len(data))


def test_parse_journal_of_nothing() -> None:
    assert parse_journal(b"") == ([], 0)


def test_parse_journal_stops_at_a_torn_last_line() -> None:
    """A line without its newline was never acknowledged: not a record."""
    good = _lines({"s": 2}, {"s": 3})
    torn = serializer.dumps({"s": 4})  # complete JSON, but the newline is missing
    assert parse_journal(good + torn) == ([{"s": 2}, {"s": 3}], len(good))
    assert parse_journal(good + b'{"s": 4, "c": [[') == ([{"s": 2}, {"s": 3}], len(good))


def test_parse_journal_stops_at_a_corrupt_line() -> None:
    """Nothing after a corrupt line is trusted, even lines that parse."""
    good = _lines({"s": 2})
    data = good + b'{"s": 3, garbage}\n' + _lines({"s": 4})
    assert parse_journal(data) == ([{"s": 2}], len(good))


# --- FileStorage ---------------------------------------------------------------


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return Paths(str(tmp_path))


@pytest.fixture
def storage(paths: Paths) -> Iterator[FileStorage]:
    storage = FileStorage(paths, reactor)
    storage.load()
    yield storage
    storage.close()


def _reload(paths: Paths) -> Any:
    """What a restarted daemon finds on disk."""
    again = FileStorage(paths, reactor)
    try:
        return again.load()
    finally:
        again.close()


def test_load_of_an_empty_directory(paths: Paths) -> None:
    found = _reload(paths)
    assert (found.config, found.records, found.locks, found.lock_records) == (None, [], None, [])


@pytest_twisted.ensureDeferred
async def test_appended_records_are_on_disk_when_acknowledged(storage: FileStorage, paths: Paths) -> None:
    await storage.append({"s": 2, "t": 1.0, "c": []})
    await storage.append({"s": 3, "t": 2.0, "c": []})
    assert Path(paths.config_journal).read_bytes() == _lines({"s": 2, "t": 1.0, "c": []}, {"s": 3, "t": 2.0, "c": []})
    assert [r["s"] for r in _reload(paths).records] == [2, 3]


@pytest_twisted.ensureDeferred
async def test_concurrent_appends_share_one_fsync(storage: FileStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    """Appends queued while the writer is busy are made durable together."""
    syncs: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (syncs.append(fd), real(fd))[1])
    busy, release = threading.Event(), threading.Event()

    def hold_the_writer() -> None:
        busy.set()
        release.wait(10)

    blocked = storage._writer.submit("call", hold_the_writer)
    assert busy.wait(10)
    appends = [storage.append({"s": s}) for s in range(2, 12)]
    release.set()
    await blocked
    await gatherResults(appends)
    assert len(syncs) == 1


def test_load_truncates_a_torn_tail(paths: Paths) -> None:
    """A crash mid-write leaves half a line; it is cut off so later appends parse."""
    os.makedirs(paths.data_dir)
    good = _lines({"s": 2})
    Path(paths.config_journal).write_bytes(good + b'{"s": 3, "c"')
    Path(paths.locks_journal).write_bytes(_lines([["a", "/l/a", 1], [], None]) + b'[["b"')
    found = _reload(paths)
    assert found.records == [{"s": 2}]
    assert found.lock_records == [[["a", "/l/a", 1], [], None]]
    assert Path(paths.config_journal).read_bytes() == good
    assert Path(paths.locks_journal).read_bytes() == _lines([["a", "/l/a", 1], [], None])


@pytest_twisted.ensureDeferred
async def test_append_after_a_truncated_tail_is_readable(paths: Paths) -> None:
    os.makedirs(paths.data_dir)
    Path(paths.config_journal).write_bytes(_lines({"s": 2}) + b'{"s": 3, "c"')
    storage = FileStorage(paths, reactor)
    storage.load()
    try:
        await storage.append({"s": 3})
    finally:
        storage.close()
    assert [r["s"] for r in _reload(paths).records] == [2, 3]


@pytest_twisted.ensureDeferred
async def test_checkpoint_rotates_the_journal_and_drops_it_at_the_end(storage: FileStorage, paths: Paths) -> None:
    old = paths.config_journal + ".old"
    await storage.append({"s": 2})
    storage.begin_checkpoint()
    await storage.append({"s": 3})  # goes to the new journal
    assert Path(old).read_bytes() == _lines({"s": 2})
    assert Path(paths.config_journal).read_bytes() == _lines({"s": 3})
    await storage.write_config(b'{"serial_no": 2}')
    await storage.end_checkpoint()
    assert not os.path.exists(old)
    found = _reload(paths)
    assert (found.config, found.records) == (b'{"serial_no": 2}', [{"s": 3}])


@pytest_twisted.ensureDeferred
async def test_records_of_both_journals_come_back_in_order(storage: FileStorage, paths: Paths) -> None:
    """A crash between begin and end of a checkpoint: old journal first."""
    await storage.append({"s": 2})
    await storage.append({"s": 3})
    storage.begin_checkpoint()
    await storage.append({"s": 4})
    assert [r["s"] for r in _reload(paths).records] == [2, 3, 4]


@pytest_twisted.ensureDeferred
async def test_a_second_rotation_keeps_the_unfinished_checkpoints_records(storage: FileStorage, paths: Paths) -> None:
    """If config.data was not written (a failed write, a crash), the old
    journal is still needed: rotating again must not replace it.

    (The rotation used to rename the journal over config.journal.old, so
    the records of the unfinished checkpoint were lost.)
    """
    await storage.append({"s": 2})
    storage.begin_checkpoint()  # ... and the config.data write fails
    await storage.append({"s": 3})
    storage.begin_checkpoint()  # the retry
    await storage.append({"s": 4})
    assert [r["s"] for r in _reload(paths).records] == [2, 3, 4]
    await storage.end_checkpoint()
    assert [r["s"] for r in _reload(paths).records] == [4]


@pytest_twisted.ensureDeferred
async def test_write_config_replaces_config_data(storage: FileStorage, paths: Paths) -> None:
    await storage.write_config(b"first")
    await storage.write_config(b"second")
    assert Path(paths.config_data).read_bytes() == b"second"
    assert os.stat(paths.config_data).st_mode & 0o777 == 0o640
    assert sorted(os.listdir(paths.data_dir)) == ["config.data", "config.journal", "locks.journal"]


def test_write_locks_replaces_locks_data_and_empties_the_lock_journal(storage: FileStorage, paths: Paths) -> None:
    storage.append_locks([["a", "/l/a", 1], [["cluster/BGL", "shared"]], None])
    storage.append_locks([["b", "/l/b", 2], [], None])
    assert [line[0][0] for line in _reload(paths).lock_records] == ["a", "b"]
    storage.write_locks([[[["a", "/l/a", 1], [["cluster/BGL", "shared"]]]], []])
    assert Path(paths.locks_journal).read_bytes() == b""
    storage.append_locks([["c", "/l/c", 3], [], None])  # appends start again at the beginning
    found = _reload(paths)
    assert found.locks == [[[["a", "/l/a", 1], [["cluster/BGL", "shared"]]]], []]
    assert found.lock_records == [[["c", "/l/c", 3], [], None]]
    assert os.stat(paths.locks_data).st_mode & 0o777 == 0o600


def test_recorded_answers_survive_a_restart_and_a_corrupt_file_is_ignored(storage: FileStorage, paths: Paths) -> None:
    table = [[[7, "/l/job-7", 0], [[1792000000000000001, {"blockers": []}]]]]
    storage.write_requests(table)
    assert _reload(paths).requests == table
    assert os.stat(paths.wconfd_requests).st_mode & 0o777 == 0o600
    Path(paths.wconfd_requests).write_bytes(b"[[torn")
    assert _reload(paths).requests is None


# --- MemoryStorage: the twin the service tests use -------------------------------


def test_memory_storage_keeps_unfinished_checkpoint_records() -> None:
    memory = MemoryStorage(b"{}")
    memory.append({"s": 2})
    memory.begin_checkpoint()
    memory.append({"s": 3})
    memory.begin_checkpoint()
    memory.append({"s": 4})
    assert [r["s"] for r in memory.load().records] == [2, 3, 4]
    memory.end_checkpoint()
    assert [r["s"] for r in memory.load().records] == [4]


@pytest_twisted.ensureDeferred
async def test_durable_appends_are_timed(storage: FileStorage) -> None:
    """Each config change's time to durability lands in write_latency (RAPI's /metrics)."""
    assert storage.write_latency.count == 0
    await storage.append({"s": 2})
    await gatherResults([storage.append({"s": s}) for s in (3, 4)])
    assert storage.write_latency.count == 3
    assert 0 < storage.write_latency.total < 10
    assert storage.write_latency.counts[-1] <= 3
