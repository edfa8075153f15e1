"""The file template: each disk is a sparse file in the file storage dir.

A disk of instance I is C{DIR/I/disk<n>} by default.  Creating makes the
file with C{O_EXCL} and sets its length, so it takes no space until the
instance writes to it; growing extends the length the same way.
"""

from __future__ import annotations

import os
import stat

from zope.interface import implementer

from ganeti import errors
from ganeti.backend.storage import DT_FILE, MIB, IDiskStorage, check_inside


def _mib(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.OpExecError("Invalid %s %r (MiB, integer)" % (what, value))
    return value


@implementer(IDiskStorage)
class FileStorage:
    """Sparse-file disks under C{base_dir}."""

    template = DT_FILE

    def __init__(self, base_dir: str) -> None:
        self.base_dir = os.path.abspath(base_dir)

    def __repr__(self) -> str:
        return "%s(%r)" % (type(self).__name__, self.base_dir)

    def check_path(self, path: str) -> str:
        return check_inside(path, self.base_dir)

    def default_path(self, instance_name: str, index: int) -> str:
        if not instance_name or "/" in instance_name or instance_name.startswith("."):
            raise errors.OpExecError("Invalid instance name %r" % (instance_name,))
        return os.path.join(self.base_dir, instance_name, "disk%d" % index)

    def _existing(self, path: str) -> str:
        real = self.check_path(path)
        try:
            st = os.stat(real)
        except FileNotFoundError:
            raise errors.OpExecError("Disk %s does not exist" % path) from None
        if not stat.S_ISREG(st.st_mode):
            raise errors.OpExecError("Disk %s is not a regular file" % path)
        return real

    def create(self, path: str, size: int) -> str:
        size = _mib(size, "disk size")
        if size <= 0:
            raise errors.OpExecError("Invalid disk size %d MiB" % size)
        real = self.check_path(path)
        os.makedirs(os.path.dirname(real), mode=0o750, exist_ok=True)
        # resolve again: the directories just made must not change the answer
        if self.check_path(real) != real:
            raise errors.OpExecError("Disk path %s changed while creating it" % path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(real, flags, 0o600)
        except FileExistsError:
            raise errors.OpExecError("Disk %s already exists" % path) from None
        except OSError as exc:
            raise errors.OpExecError("Cannot create disk %s: %s" % (path, exc)) from exc
        try:
            os.ftruncate(fd, size * MIB)
        except OSError as exc:
            os.close(fd)
            os.unlink(real)
            raise errors.OpExecError("Cannot size disk %s: %s" % (path, exc)) from exc
        os.close(fd)
        return real

    def remove(self, path: str) -> None:
        real = self.check_path(path)
        try:
            if os.path.isdir(real) and not os.path.islink(real):
                raise errors.OpExecError("Disk %s is a directory" % path)
            os.unlink(real)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise errors.OpExecError("Cannot remove disk %s: %s" % (path, exc)) from exc
        parent = os.path.dirname(real)
        if parent != os.path.realpath(self.base_dir):
            try:
                os.rmdir(parent)  # the instance's directory, once empty
            except OSError:
                pass

    def grow(self, path: str, amount: int, dryrun: bool = False) -> int:
        amount = _mib(amount, "growth")
        if amount < 0:
            raise errors.OpExecError("Cannot shrink disk %s" % path)
        real = self._existing(path)
        new_size = os.stat(real).st_size + amount * MIB
        if not dryrun:
            try:
                os.truncate(real, new_size)
            except OSError as exc:
                raise errors.OpExecError("Cannot grow disk %s: %s" % (path, exc)) from exc
        return new_size // MIB

    def size(self, path: str) -> int:
        return os.stat(self._existing(path)).st_size // MIB

    def hypervisor_path(self, path: str) -> str:
        return self._existing(path)
