"""Storage collectors of the file and sharedfile directories
(C{storage-file}, C{storage-sharedfile}): the size, used and free bytes of
the file system holding the node's directory, and a status."""

from __future__ import annotations

import os
from typing import Any, Callable

from twisted.internet.defer import maybeDeferred

from ganeti.mond.collectors import ClusterView, Collector, CollectorError
from ganeti.mond.report import CATEGORY_STORAGE, KIND_STATUS, STATUS_BAD, STATUS_OK, STATUS_TEMP_BAD, status

#: below this fraction of free space the status is 1 (it heals as disks go)
LOW_SPACE = 0.05


def node_path(root: str, path: str) -> str:
    """A cluster-wide absolute C{path} as the node rooted at C{root} sees it."""
    if not root or root == "/":
        return path
    return os.path.join(root, path.lstrip("/"))


def storage_data(kind: str, path: str, st: Any) -> dict[str, Any]:
    """The report data from C{os.statvfs} of C{path} (pure)."""
    size = st.f_blocks * st.f_frsize
    free = st.f_bavail * st.f_frsize
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    if size and free < LOW_SPACE * size:
        state = status(STATUS_TEMP_BAD, "only %.1f%% of %s is free" % (100.0 * free / size, path))
    else:
        state = status(STATUS_OK)
    return {"type": kind, "path": path, "size": size, "used": used, "free": free, "status": state}


class FileStorage(Collector):
    """The file system of one storage directory; active when the cluster has one."""

    category = CATEGORY_STORAGE
    kind = KIND_STATUS

    def __init__(self, kind: str, root: str, statvfs: Callable[[str], Any] = os.statvfs,
                 run: Callable[..., Any] = maybeDeferred) -> None:
        """@param run: how to call C{statvfs} (the daemon: in a thread, since
            a storage directory may be on a network file system that hangs)"""
        self.storage = kind
        self.name = "storage-%s" % kind
        self._root = root
        self._statvfs = statvfs
        self._call = run

    def _directory(self, view: ClusterView) -> str:
        return view.file_storage_dir if self.storage == "file" else view.shared_file_storage_dir

    def available(self, view: ClusterView) -> bool:
        return bool(self._directory(view))

    def collect(self, view: ClusterView) -> Any:
        path = node_path(self._root, self._directory(view))

        def unusable(failure: Any) -> Any:
            if not failure.check(OSError):
                return failure
            e = failure.value
            raise CollectorError("the %s storage directory %s is unusable: %s" % (self.storage, path,
                                                                               e.strerror or e), STATUS_BAD)
        d = self._call(self._statvfs, path)
        return d.addCallbacks(lambda st: storage_data(self.storage, path, st), unusable)
