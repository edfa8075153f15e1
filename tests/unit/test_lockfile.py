"""The lock file owner: holding, probing and reading flock'ed files."""

from __future__ import annotations

import os
import tempfile

from twisted.trial.unittest import SynchronousTestCase

from ganeti import lockfile
from ganeti.daemon import AlreadyRunning, lock_pid_file
from ganeti.paths import Paths


class LockFileTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "sub", "owner.lock")

    def tearDown(self) -> None:
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)

    def test_hold_creates_the_file_and_its_directory(self) -> None:
        fd = lockfile.hold(self.path)
        self.addCleanup(os.close, fd)
        self.assertTrue(os.path.exists(self.path))
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o600)

    def test_a_second_holder_is_refused_and_keeps_nothing_open(self) -> None:
        fd = lockfile.hold(self.path)
        self.addCleanup(lockfile.release, fd)
        before = len(os.listdir("/proc/self/fd"))
        with self.assertRaises(lockfile.LockHeld) as caught:
            lockfile.hold(self.path)
        self.assertEqual(caught.exception.path, self.path)
        self.assertEqual(len(os.listdir("/proc/self/fd")), before)

    def test_released_lock_can_be_taken_again(self) -> None:
        lockfile.release(lockfile.hold(self.path))
        lockfile.release(lockfile.hold(self.path))

    def test_create_new_refuses_an_existing_file(self) -> None:
        lockfile.release(lockfile.hold(self.path))
        with self.assertRaises(FileExistsError):
            lockfile.hold(self.path, create_new=True)

    def test_is_free_follows_the_holder(self) -> None:
        self.assertTrue(lockfile.is_free(self.path))  # missing
        fd = lockfile.hold(self.path)
        self.assertFalse(lockfile.is_free(self.path))
        lockfile.release(fd)
        self.assertTrue(lockfile.is_free(self.path))

    def test_a_symlink_counts_as_held(self) -> None:
        target = os.path.join(self.dir, "target")
        open(target, "w").close()
        link = os.path.join(self.dir, "link")
        os.symlink(target, link)
        self.assertFalse(lockfile.is_free(link))

    def test_holder_pid_reads_the_pid_only_while_held(self) -> None:
        self.assertIsNone(lockfile.holder_pid(self.path))
        fd = lockfile.hold(self.path)
        lockfile.write_pid(fd, 4242)
        self.assertEqual(lockfile.holder_pid(self.path), 4242)
        lockfile.write_pid(fd)
        self.assertEqual(lockfile.holder_pid(self.path), os.getpid())
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"garbage", 0)
        self.assertEqual(lockfile.holder_pid(self.path), -1)
        lockfile.release(fd)
        self.assertIsNone(lockfile.holder_pid(self.path))

    def test_read_pid(self) -> None:
        self.assertEqual(lockfile.read_pid(self.path), "?")
        fd = lockfile.hold(self.path)
        self.addCleanup(lockfile.release, fd)
        self.assertEqual(lockfile.read_pid(self.path), "?")
        lockfile.write_pid(fd, 17)
        self.assertEqual(lockfile.read_pid(self.path), "17")

    def test_holds_lock_finds_the_holder_in_the_lock_table(self) -> None:
        fd = lockfile.hold(self.path)
        self.addCleanup(lockfile.release, fd)
        inode = os.stat(self.path).st_ino
        table = os.path.join(self.dir, "locks")
        with open(table, "wb") as handle:
            handle.write(b"1: FLOCK  ADVISORY  WRITE 4242 fe:00:%d 0 EOF\n" % inode)
            handle.write(b"1: -> FLOCK  ADVISORY  WRITE 5151 fe:00:%d 0 EOF\n" % inode)
        proc = os.path.join(self.dir, "proc")  # no fdinfo there: the lock table is read
        self.assertTrue(lockfile.holds_lock(self.path, 4242, table, proc))
        self.assertFalse(lockfile.holds_lock(self.path, 5151, table, proc))  # a waiter holds nothing
        self.assertFalse(lockfile.holds_lock(os.path.join(self.dir, "gone"), 4242, table, proc))

    def fdinfo(self, pid: int, fd: int, inode: int, *locks: int) -> None:
        directory = os.path.join(self.dir, "proc", str(pid), "fdinfo")
        os.makedirs(directory, exist_ok=True)
        lines = [b"pos:\t0", b"flags:\t02100002", b"mnt_id:\t27", b"ino:\t%d" % inode]
        lines += [b"lock:\t1: FLOCK  ADVISORY  WRITE %d fe:00:%d 0 EOF" % (p, inode) for p in locks]
        with open(os.path.join(directory, str(fd)), "wb") as handle:
            handle.write(b"\n".join(lines) + b"\n")

    def test_holds_lock_reads_the_process_own_fdinfo_not_the_lock_table(self) -> None:
        """/proc/locks costs milliseconds per read on a busy machine (WConfD
        checks every new job process): a readable fdinfo answers alone."""
        fd = lockfile.hold(self.path)
        self.addCleanup(lockfile.release, fd)
        inode = os.stat(self.path).st_ino
        proc = os.path.join(self.dir, "proc")
        table = os.path.join(self.dir, "no-such-table")  # reading it would raise
        self.fdinfo(4242, 0, inode + 1)
        self.fdinfo(4242, 5, inode, 4242)
        self.fdinfo(5151, 3, inode, 4242)  # inherited from 4242: it is not the holder
        self.fdinfo(6262, 3, inode + 1, 6262)  # holds another file
        self.assertTrue(lockfile.holds_lock(self.path, 4242, table, proc))
        self.assertFalse(lockfile.holds_lock(self.path, 5151, table, proc))
        self.assertFalse(lockfile.holds_lock(self.path, 6262, table, proc))

    def test_fdinfo_lock_holders(self) -> None:
        text = b"pos:\t0\nino:\t77\nlock:\t1: FLOCK  ADVISORY  WRITE 10 fe:00:77 0 EOF\n" \
               b"lock:\t2: -> FLOCK  ADVISORY  WRITE 11 fe:00:77 0 EOF\n"
        self.assertEqual(lockfile.fdinfo_lock_holders(text, 77), {10})
        self.assertIsNone(lockfile.fdinfo_lock_holders(text, 78))
        self.assertEqual(lockfile.fdinfo_lock_holders(b"pos:\t0\nino:\t77\n", 77), set())
        self.assertIsNone(lockfile.fdinfo_lock_holders(b"garbage", 77))


class PidFileTests(SynchronousTestCase):
    def test_second_daemon_on_a_root_stops_with_the_first_ones_pid(self) -> None:
        root = tempfile.mkdtemp()
        paths = Paths(root)
        fd = lock_pid_file(paths, "ganeti-test")
        self.addCleanup(os.close, fd)
        with self.assertRaises(AlreadyRunning) as caught:
            lock_pid_file(paths, "ganeti-test")
        self.assertIn("pid %d" % os.getpid(), str(caught.exception))
        self.assertEqual(os.stat(paths.pid_file("ganeti-test")).st_mode & 0o777, 0o644)
