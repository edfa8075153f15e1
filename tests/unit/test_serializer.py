"""Atomic durable writes: a reader sees the old or the new file, never a mix."""

import os
import stat

import pytest

from ganeti import serializer


def test_write_replaces_atomically_with_mode(tmp_path):
    target = tmp_path / "config.data"
    serializer.write_file(str(target), b"old", mode=0o640)
    serializer.write_file(str(target), "new", mode=0o600)
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert os.listdir(tmp_path) == ["config.data"]  # no temporary file left


def test_failed_write_leaves_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "config.data"
    serializer.write_file(str(target), b"old")

    def broken_fsync(fd):
        raise OSError(5, "I/O error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        serializer.write_file(str(target), b"new")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["config.data"]


def test_json_round_trip_and_errors(tmp_path):
    path = str(tmp_path / "x.json")
    serializer.write_json(path, {"a": [1, 2.5, None, "é"]})
    assert serializer.read_json(path) == {"a": [1, 2.5, None, "é"]}
    with pytest.raises(ValueError):
        serializer.loads(b"{not json")
    assert serializer.dumps({"b": 1, "a": 2}, sort_keys=True) == b'{"a":2,"b":1}'


def test_two_threads_replace_the_same_file_at_once(tmp_path):
    """A daemon's threads (NodeD's take-over and a replication writing the queue serial) each get a
    temporary file of their own: neither write fails for the other's rename, and the file is whole."""
    import threading

    target = str(tmp_path / "serial")
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def writer(value: bytes) -> None:
        start.wait()
        try:
            for _ in range(200):
                serializer.write_file(target, value, durable=False)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(value,)) for value in (b"12\n", b"13\n")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert open(target, "rb").read() in (b"12\n", b"13\n")
    assert os.listdir(tmp_path) == ["serial"]
