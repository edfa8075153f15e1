"""The diskless template: instances without disks."""

from __future__ import annotations

from zope.interface import implementer

from ganeti import errors
from ganeti.backend.storage import DT_DISKLESS, IDiskStorage


@implementer(IDiskStorage)
class DisklessStorage:
    """Has no disks: creating or using one is an error, removing is a no-op."""

    template = DT_DISKLESS

    def _refuse(self) -> errors.OpExecError:
        return errors.OpExecError("The diskless template has no disks")

    def check_path(self, path: str) -> str:
        raise self._refuse()

    def default_path(self, instance_name: str, index: int) -> str:
        raise self._refuse()

    def create(self, path: str, size: int) -> str:
        raise self._refuse()

    def remove(self, path: str) -> None:
        return None

    def grow(self, path: str, amount: int, dryrun: bool = False) -> int:
        raise self._refuse()

    def size(self, path: str) -> int:
        raise self._refuse()

    def hypervisor_path(self, path: str) -> str:
        raise self._refuse()
