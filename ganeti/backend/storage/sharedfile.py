"""The sharedfile template: file disks in a directory all nodes share.

On a real cluster the directory is a network filesystem mounted on every
node; on one machine it is one directory that every node's root names.
Because every node sees the same files, an instance can move between
nodes without copying its disks.
"""

from __future__ import annotations

from zope.interface import implementer

from ganeti.backend.storage import DT_SHARED_FILE, IDiskStorage
from ganeti.backend.storage.file import FileStorage


@implementer(IDiskStorage)
class SharedFileStorage(FileStorage):
    """Sparse-file disks under the shared file storage directory."""

    template = DT_SHARED_FILE
