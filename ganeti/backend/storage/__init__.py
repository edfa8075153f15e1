"""Disk storage on a node: the interface, the templates and path checks.

Each disk template that keeps data on the node has a driver providing
L{IDiskStorage}.  Paths are absolute, or relative to the driver's storage
directory; every driver refuses (with L{errors.OpExecError}) a path that
does not lie strictly inside its storage directory once symlinks are
resolved, and any path with a C{..} component.  Sizes are MiB.

A disk record (L{ganeti.objects.Disk}) of the file templates carries its
path as Ganeti does, in C{logical_id = [driver, path]}; see L{disk_path}.
"""

from __future__ import annotations

import os
from typing import Any

from zope.interface import Attribute, Interface

from ganeti import errors
from ganeti.disktemplates import (  # noqa: F401  (the templates' names, defined once)
    CREATABLE_TEMPLATES,
    DT_BLOCK,
    DT_DISKLESS,
    DT_EXT,
    DT_FILE,
    DT_RBD,
    DT_SHARED_FILE,
    TEMPLATES,
)
from ganeti.paths import Paths

#: Ganeti's default file driver, first element of a file disk's logical_id
FD_LOOP = "loop"

MIB = 1024 * 1024


class IDiskStorage(Interface):
    """The disks of one disk template on one node."""

    template = Attribute("The disk template name.")

    def check_path(path: str) -> str:
        """The resolved absolute form of C{path}; raise L{errors.OpExecError}
        if it is not inside the storage directory."""

    def default_path(instance_name: str, index: int) -> str:
        """Where disk C{index} of C{instance_name} goes by default."""

    def create(path: str, size: int) -> str:
        """Create a disk of C{size} MiB at C{path}; return its absolute path."""

    def remove(path: str) -> None:
        """Remove the disk at C{path}; a disk already gone is not an error."""

    def grow(path: str, amount: int, dryrun: bool = False) -> int:
        """Grow the disk at C{path} by C{amount} MiB; return its new size."""

    def size(path: str) -> int:
        """The size of the disk at C{path} in MiB."""

    def hypervisor_path(path: str) -> str:
        """The path to hand to the hypervisor for the existing disk C{path}."""


def check_inside(path: str, base: str) -> str:
    """The resolved form of C{path} if it lies strictly inside C{base}.

    C{path} may be relative to C{base}.  Symlinks (in C{path} and in
    C{base}) are resolved before comparing; C{..} components are refused
    outright.
    @raise errors.OpExecError: if C{path} is outside C{base} or malformed
    """
    if not isinstance(path, str) or not path or "\0" in path:
        raise errors.OpExecError("Invalid disk path %r" % (path,))
    if ".." in path.split(os.sep):
        raise errors.OpExecError("Disk path %r must not contain '..'" % path)
    if not os.path.isabs(path):
        path = os.path.join(base, path)
    real_base = os.path.realpath(base)
    real = os.path.realpath(path)
    if real == real_base or os.path.commonpath([real, real_base]) != real_base:
        raise errors.OpExecError(
            "Disk path %r is outside the storage directory %r" % (path, base)
        )
    return real


def disk_path(disk: Any) -> str | None:
    """The path in a file disk's C{logical_id} (C{[driver, path]}), if any."""
    logical_id = getattr(disk, "logical_id", None)
    if isinstance(logical_id, (list, tuple)) and len(logical_id) == 2:
        path = logical_id[1]
        if isinstance(path, str):
            return path
    return None


def for_template(
    template: str,
    paths: Paths,
    file_storage_dir: str | None = None,
    shared_file_storage_dir: str | None = None,
) -> IDiskStorage:
    """The storage driver of C{template} on the node at C{paths}.

    The directories default to the node's Ganeti layout; the cluster's
    configured directories override them.
    @raise errors.OpExecError: for a template this node does not support
    """
    from ganeti.backend.storage.diskless import DisklessStorage
    from ganeti.backend.storage.file import FileStorage
    from ganeti.backend.storage.sharedfile import SharedFileStorage

    if template == DT_DISKLESS:
        return DisklessStorage()
    if template == DT_FILE:
        return FileStorage(file_storage_dir or paths.file_storage_dir)
    if template == DT_SHARED_FILE:
        return SharedFileStorage(shared_file_storage_dir or paths.shared_file_storage_dir)
    raise errors.OpExecError("Unsupported disk template %r" % (template,))
