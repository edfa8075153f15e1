"""Tests for L{ganeti.noded.diskconvert}: the copy of a disk template
conversion, and C{blockdev_convert} between two file disks of a node root."""

from __future__ import annotations

import os
import shutil
import tempfile

from twisted.internet.defer import ensureDeferred, succeed
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.noded import diskconvert
from ganeti.noded.failure import RpcFailure
from ganeti.noded.procedures import NodeProcedures
from ganeti.paths import Paths

MIB = 1024 * 1024


class CopyDataTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def make(self, name: str, size: int, data: bytes = b"", at: int = 0) -> str:
        path = os.path.join(self.dir, name)
        with open(path, "wb") as handle:
            handle.truncate(size)
            handle.seek(at)
            handle.write(data)
        return path

    def test_copies_up_to_the_smaller_size_and_keeps_holes(self) -> None:
        src = self.make("src", 4 * MIB, b"head", at=0)
        with open(src, "r+b") as handle:
            handle.seek(3 * MIB)
            handle.write(b"tail")
        dst = self.make("dst", 3 * MIB + 2, b"x" * 10, at=MIB)
        self.assertEqual(diskconvert.copy_data(src, dst, block=MIB), 3 * MIB + 2)
        with open(dst, "rb") as handle:
            data = handle.read()
        self.assertEqual(len(data), 3 * MIB + 2)
        self.assertEqual(data[:4], b"head")
        self.assertEqual(data[3 * MIB:], b"ta")
        # a zero block of the source is skipped: what the target had there stays (it is a new, empty disk)
        self.assertEqual(data[MIB:MIB + 10], b"x" * 10)
        self.assertLess(os.stat(dst).st_blocks * 512, 3 * MIB, "sparse")


class BlockdevConvertTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root)
        self.node = NodeProcedures(Paths(self.root), MemoryReactorClock())
        self.storage = os.path.join(self.root, "srv/ganeti/file-storage")
        os.makedirs(os.path.join(self.storage, "web1"))

    def disk(self, name: str) -> dict:
        return {"dev_type": "file", "logical_id": ["loop", "/srv/ganeti/file-storage/web1/%s" % name],
                "size": 1, "uuid": name, "iv_name": "disk/0", "mode": "rw", "params": {}}

    def test_file_to_file(self) -> None:
        with open(os.path.join(self.storage, "web1/a"), "wb") as handle:
            handle.write(b"data" + bytes(MIB - 4))
        with open(os.path.join(self.storage, "web1/b"), "wb") as handle:
            handle.truncate(MIB)
        self.patch(diskconvert.threads, "deferToThread", lambda f, *args: succeed(f(*args)))
        self.assertIsNone(self.successResultOf(ensureDeferred(self.node.diskconvert.blockdev_convert(
            self.disk("a"), self.disk("b")))))
        with open(os.path.join(self.storage, "web1/b"), "rb") as handle:
            self.assertEqual(handle.read(4), b"data")

    def test_missing_target(self) -> None:
        with open(os.path.join(self.storage, "web1/a"), "wb") as handle:
            handle.truncate(MIB)
        failure = self.failureResultOf(ensureDeferred(self.node.diskconvert.blockdev_convert(
            self.disk("a"), self.disk("nope"))), RpcFailure)
        self.assertIn("Cannot copy to device 'nope'", str(failure.value))

    def test_setinfo_of_a_file_disk_does_nothing(self) -> None:
        self.assertIsNone(self.successResultOf(ensureDeferred(self.node.diskconvert.blockdev_setinfo(
            self.disk("a"), "originstname+web1"))))
        self.failureResultOf(ensureDeferred(self.node.diskconvert.blockdev_setinfo(self.disk("a"), 3)), RpcFailure)
