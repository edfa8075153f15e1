"""A temporary node root and an open job queue in it, for LuxiD's unit tests."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from ganeti.jobs.queue import JobQueueDir
from ganeti.paths import Paths


def temp_root(case: SynchronousTestCase, prefix: str = "gntq") -> Paths:
    """A fresh root with Ganeti's directories, removed after C{case}."""
    root = tempfile.mkdtemp(prefix=prefix)
    case.addCleanup(shutil.rmtree, root, True)
    paths = Paths(root)
    paths.ensure_dirs()
    return paths


def open_queue(case: SynchronousTestCase, paths: Paths, **hooks: Any) -> JobQueueDir:
    """The job queue of C{paths}, open (with C{hooks}: C{on_write}, ...) until C{case} ends."""
    queue = JobQueueDir(paths, **hooks)
    queue.open()
    case.addCleanup(queue.close)
    return queue
