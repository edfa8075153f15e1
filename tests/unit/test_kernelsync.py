"""fsyncs run by the kernel (ganeti.kernelsync): real files in a temporary
directory; completions come through an eventfd the global reactor reads, so
these tests run on it (pytest-twisted)."""

from __future__ import annotations

import errno
import os
from typing import Any, Iterator

import pytest
import pytest_twisted
from twisted.internet import reactor, threads
from twisted.internet.defer import Deferred

from ganeti import kernelsync, serializer


def _kernel_has_it() -> bool:
    probe = kernelsync.KernelSync.open(reactor, threads.deferToThread)
    if probe is None:
        return False
    probe.close()
    return True


needs_kernel = pytest.mark.skipif(not _kernel_has_it(), reason="no asynchronous fsync on this kernel or machine")


class Counting:
    """The fallback: blocking calls run in a thread, counted."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def __call__(self, function: Any, *args: Any) -> Deferred:
        self.calls.append(function)
        return threads.deferToThread(function, *args)


@pytest.fixture
def files(tmp_path: Any) -> Iterator[list[int]]:
    fds = []
    for n in range(3):
        path = tmp_path / ("job-%d" % n)
        path.write_bytes(b"{}" * 100)
        fds.append(os.open(path, os.O_RDONLY))
    fds.append(os.open(tmp_path, os.O_RDONLY))  # a directory fsyncs as well
    yield fds
    for fd in fds:
        os.close(fd)


@pytest.fixture
def sync() -> Iterator[kernelsync.KernelSync]:
    fallback = Counting()
    opened = kernelsync.KernelSync.open(reactor, fallback)
    if opened is None:
        pytest.skip("no asynchronous fsync on this kernel or machine")
    opened.fallback = fallback
    yield opened
    opened.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@needs_kernel
@pytest_twisted.ensureDeferred
async def test_files_and_their_directory_are_fsynced_by_the_kernel(sync: Any, files: list[int]) -> None:
    await sync.fsync(files)
    assert sync.fallback.calls == [], "no thread: the kernel ran them"
    assert not sync.refused


@needs_kernel
@pytest_twisted.ensureDeferred
async def test_more_fsyncs_than_slots_wait_for_room(sync: Any, tmp_path: Any) -> None:
    fds = []
    try:
        for n in range(kernelsync.SLOTS * 2 + 5):
            path = tmp_path / ("f%d" % n)
            path.write_bytes(b"x")
            fds.append(os.open(path, os.O_RDONLY))
        await sync.fsync(fds[:7])  # (one batch alone first)
        await Deferred.fromCoroutine(_both(sync.fsync(fds[7:]), sync.fsync(fds[:3])))
        assert sync.fallback.calls == []
    finally:
        for fd in fds:
            os.close(fd)


async def _both(first: Deferred, second: Deferred) -> None:
    await first
    await second


@needs_kernel
@pytest_twisted.ensureDeferred
async def test_a_bad_descriptor_fails_its_batch_and_the_kernel_keeps_the_next(sync: Any, files: list[int]) -> None:
    closed = os.open("/dev/null", os.O_RDONLY)
    os.close(closed)
    with pytest.raises(OSError) as caught:
        await sync.fsync([files[0], closed, files[1]])
    assert caught.value.errno == errno.EBADF
    await sync.fsync(files)
    assert not sync.refused and sync.fallback.calls == []


@needs_kernel
@pytest_twisted.ensureDeferred
async def test_once_refused_fsyncs_run_in_threads(sync: Any, files: list[int]) -> None:
    sync.refused = True  # as after an EINVAL (a file system without asynchronous fsync)
    await sync.fsync(files)
    assert len(sync.fallback.calls) == 1


@needs_kernel
@pytest_twisted.ensureDeferred
async def test_a_forked_child_does_not_use_its_parents_context(sync: Any, files: list[int]) -> None:
    sync._pid = os.getpid() + 1  # (as in a child: the kernel gives it no context)
    await sync.fsync(files)
    assert len(sync.fallback.calls) == 1


@needs_kernel
@pytest_twisted.ensureDeferred
async def test_fsync_paths_opens_and_closes_each(sync: Any, tmp_path: Any) -> None:
    (tmp_path / "a").write_bytes(b"a")
    before = _open_fds()
    await kernelsync.fsync_paths(sync, [str(tmp_path / "a"), str(tmp_path)], sync.fallback)
    assert _open_fds() == before
    with pytest.raises(FileNotFoundError):
        await kernelsync.fsync_paths(sync, [str(tmp_path / "a"), str(tmp_path / "gone")], sync.fallback)
    assert _open_fds() == before, "what was opened before the missing one is closed"


@pytest_twisted.ensureDeferred
async def test_fsync_paths_without_a_kernel_context_uses_a_thread(tmp_path: Any) -> None:
    (tmp_path / "a").write_bytes(b"a")
    fallback = Counting()
    await kernelsync.fsync_paths(None, [str(tmp_path / "a"), str(tmp_path)], fallback)
    assert len(fallback.calls) == 1


@needs_kernel
def test_closing_fails_what_is_in_flight(files: list[int]) -> None:
    sync = kernelsync.KernelSync.open(reactor, Counting())
    assert sync is not None
    pending = sync.fsync(files)
    sync.close()
    failures: list[Any] = []
    pending.addErrback(failures.append)
    if failures:  # (unless the kernel was done before the close)
        assert failures[0].value.errno == errno.ECANCELED


def test_fsync_together_in_a_thread(files: list[int]) -> None:
    kernelsync.fsync_together(files)
    kernelsync.fsync_together(files[:1])


def test_fsync_together_raises_for_a_bad_descriptor(files: list[int]) -> None:
    closed = os.open("/dev/null", os.O_RDONLY)
    os.close(closed)
    with pytest.raises(OSError) as caught:
        kernelsync.fsync_together([files[0], closed, files[1]])
    assert caught.value.errno == errno.EBADF


def test_staged_files_replace_theirs_only_when_put_in_place(tmp_path: Any) -> None:
    target = tmp_path / "job-1"
    target.write_bytes(b"old")
    staged = [serializer.stage_file(str(target), b"new"), serializer.stage_file(str(tmp_path / "job-2"), b"two")]
    assert target.read_bytes() == b"old"
    kernelsync.fsync_together([fd for _tmp, fd in staged])
    serializer.put_in_place(*staged[0], str(target))
    serializer.drop_staged(staged[1:])
    assert target.read_bytes() == b"new"
    assert sorted(os.listdir(tmp_path)) == ["job-1"], "the dropped one's temporary file is gone"
