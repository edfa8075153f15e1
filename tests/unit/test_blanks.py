"""Files made ahead of a job's writes (L{ganeti.jobs.blanks}): a write fills
and renames one instead of making a file, a spare's lock file becomes its
job's without losing the lock, and nothing is left behind by processes that
ended."""

from __future__ import annotations

import os

import pytest

from ganeti import childproc, lockfile, serializer
from ganeti.jobs import blanks
from ganeti.jobs.orphans import job_lock_path
from ganeti.jobs.process import create_lockfile
from ganeti.luxid import forkserver
from ganeti.paths import Paths


@pytest.fixture
def paths(tmp_path: object) -> Paths:
    made = Paths(str(tmp_path))
    made.ensure_dirs()
    yield made
    blanks.drop()


def names(directory: str) -> list[str]:
    return sorted(os.listdir(directory))


def test_a_write_fills_a_blank_instead_of_making_a_file(paths: Paths) -> None:
    queue = paths.queue_dir
    assert blanks.make_blanks(queue, 2) == 2
    mine = [".blank-%d-0" % os.getpid(), ".blank-%d-1" % os.getpid()]
    assert [n for n in names(queue) if n.startswith(".blank")] == mine
    blank = blanks.take(queue)
    inode = os.stat(blank).st_ino
    serializer.write_file(os.path.join(queue, "job-7"), b'{"id": 7}', mode=0o640, blank=blank)
    with open(os.path.join(queue, "job-7"), "rb") as handle:
        assert handle.read() == b'{"id": 7}'
    target = os.stat(os.path.join(queue, "job-7"))
    assert target.st_ino == inode, "the blank's inode is the file now"
    assert target.st_mode & 0o777 == 0o640
    assert names(queue) == [mine[0], "job-7"], "a temporary file was made, or the blank left"


def test_a_write_with_its_blank_gone_or_elsewhere_makes_its_own_file(paths: Paths) -> None:
    queue = paths.queue_dir
    blanks.make_blanks(queue, 1)
    gone = blanks.take(queue)
    os.unlink(gone)
    serializer.write_file(os.path.join(queue, "job-1"), b"one", blank=gone)
    blanks.make_blanks(paths.lock_dir, 1)
    elsewhere = blanks.take(paths.lock_dir)
    serializer.write_file(os.path.join(queue, "job-2"), b"two", blank=elsewhere)
    for name, content in (("job-1", b"one"), ("job-2", b"two")):
        with open(os.path.join(queue, name), "rb") as handle:
            assert handle.read() == content
    assert os.path.exists(elsewhere), "a blank of another directory was renamed across"
    assert not any(n.endswith(".tmp") for n in names(queue))


def test_a_write_does_not_follow_a_blank_replaced_by_a_symlink(paths: Paths, tmp_path: object) -> None:
    queue = paths.queue_dir
    blanks.make_blanks(queue, 1)
    blank = blanks.take(queue)
    outside = os.path.join(str(tmp_path), "outside")
    with open(outside, "wb") as handle:
        handle.write(b"untouched")
    os.unlink(blank)
    os.symlink(outside, blank)
    serializer.write_file(os.path.join(queue, "job-3"), b"three", blank=blank)
    with open(outside, "rb") as handle:
        assert handle.read() == b"untouched"
    with open(os.path.join(queue, "job-3"), "rb") as handle:
        assert handle.read() == b"three"


def test_unused_blanks_are_removed_at_the_end(paths: Paths) -> None:
    blanks.make_blanks(paths.queue_dir, 2)
    taken = blanks.take(paths.queue_dir)
    blanks.drop()
    assert names(paths.queue_dir) == [os.path.basename(taken)], "a taken blank is its writer's"
    assert blanks.take(paths.queue_dir) is None


def test_the_spare_lock_file_becomes_the_jobs_still_held(paths: Paths) -> None:
    held: list[tuple[int, str]] = []
    steps = blanks.ahead(paths, held)
    next(steps)
    ((fd, spare_path),) = held
    assert os.path.basename(spare_path) == "spare_%d" % os.getpid()
    assert list(steps) == [None, None][: blanks.SPARE_BLANKS - 1]
    assert len([n for n in names(paths.queue_dir) if n.startswith(".blank")]) == blanks.SPARE_BLANKS
    wanted = job_lock_path(paths, 12)
    lock_fd, lock_path = create_lockfile(paths, 12, wanted, held.pop())
    try:
        assert (lock_fd, lock_path) == (fd, wanted)
        assert not os.path.exists(spare_path)
        with pytest.raises(lockfile.LockHeld):
            lockfile.hold(wanted)
    finally:
        os.close(lock_fd)


def test_a_spare_lock_file_that_cannot_be_renamed_leaves_the_job_its_own(paths: Paths) -> None:
    held: list[tuple[int, str]] = []
    next(blanks.ahead(paths, held))
    spare_path = held[0][1]
    assert blanks.claim(held[0], os.path.join(paths.lock_dir, "gone", "job_000012_1")) is None
    assert not os.path.exists(spare_path)
    lock_fd, lock_path = create_lockfile(paths, 12, None, None)
    os.close(lock_fd)
    assert os.path.dirname(lock_path) == paths.lock_dir


def test_what_a_dead_process_left_is_removed(paths: Paths) -> None:
    dead, alive = 999_999_991, os.getpid()
    for pid in (dead, alive):
        for n in range(2):
            open(os.path.join(paths.queue_dir, ".blank-%d-%d" % (pid, n)), "wb").close()
        open(os.path.join(paths.lock_dir, "spare_%d" % pid), "wb").close()
    open(os.path.join(paths.queue_dir, "job-5"), "wb").close()
    assert blanks.sweep(paths, alive=lambda pid: pid == alive) == 3
    assert names(paths.queue_dir).count("job-5") == 1
    assert [n for n in names(paths.queue_dir) if n.startswith(".blank")] == [
        ".blank-%d-0" % alive, ".blank-%d-1" % alive]
    assert "spare_%d" % alive in names(paths.lock_dir) and "spare_%d" % dead not in names(paths.lock_dir)
    blanks.forget(paths, alive)
    assert not [n for n in names(paths.queue_dir) if n.startswith(".blank")]
    assert not [n for n in names(paths.lock_dir) if n.startswith("spare_")]


def test_the_fork_server_removes_what_a_reaped_child_made(paths: Paths) -> None:
    pid = os.fork()
    if pid == 0:  # a spare that made its files and died without its job
        try:
            next(blanks.ahead(paths, []))
            blanks.make_blanks(paths.queue_dir, 2)
        finally:
            os._exit(0)
    spares = forkserver._Spares(paths, 1811, [], seed=object())
    spares.lost.add(pid)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # (ended, not reaped)
    forkserver._reap({}, spares)
    assert pid not in spares.lost, "not reaped"
    assert not [n for n in names(paths.queue_dir) if n.startswith(".blank-%d-" % pid)]
    assert "spare_%d" % pid not in names(paths.lock_dir)



def test_blanks_removed_by_someone_else_are_made_again(paths: Paths) -> None:
    """(A purge of the queue directory removes every file in it.)"""
    assert blanks.make_blanks(paths.queue_dir, 2) == 2
    for name in names(paths.queue_dir):
        os.unlink(os.path.join(paths.queue_dir, name))
    assert blanks.make_blanks(paths.queue_dir, 2) == 2
    assert len(names(paths.queue_dir)) == 2
    assert all(os.path.exists(blanks.take(paths.queue_dir) or "") for _ in range(2))


def test_a_killed_process_not_yet_reaped_is_not_running() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # a zombie: it exists, and runs no more
    try:
        assert not childproc.pid_alive(pid)
        assert childproc.pid_alive(os.getpid())
    finally:
        os.waitpid(pid, 0)
    assert not childproc.pid_alive(pid)


def test_luxid_sweeps_at_its_start_what_dead_processes_left(paths: Paths) -> None:
    from twisted.internet.testing import MemoryReactorClock

    from ganeti.jobs.queue import JobQueueDir
    from ganeti.luxid.service import LuxidService

    left = [os.path.join(paths.queue_dir, ".blank-999999991-0"), os.path.join(paths.lock_dir, "spare_999999991")]
    for path in left:
        open(path, "wb").close()
    queue = JobQueueDir(paths)
    queue.open()
    service = LuxidService(paths, MemoryReactorClock(), queue, use_forkserver=False)
    service.startService()
    try:
        assert not any(os.path.exists(path) for path in left)
    finally:
        service.stopService()
