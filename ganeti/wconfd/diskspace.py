"""WConfD when the data directory is full.

A config change is refused before it is applied when the data directory
has less than L{ganeti.wconfd.storage.MIN_FREE_BYTES} free
(L{check_room}: "the data directory ... is full; nothing changed").  A
change whose journal write still fails for want of space (the disk filled
meanwhile) is not acknowledged, and WConfD goes back to what is durable
(L{revert}: config.data and the journal, read again once every pending
append has ended) instead of keeping the change in memory, where queries
showed it and a later config.data would have written it: a tag applied
under an error status.  WConfD then takes changes again.
"""

from __future__ import annotations

import errno
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from ganeti import errors
from ganeti.objects import ConfigData
from ganeti.wconfd.storage import JournalWriteError
from ganeti.wconfd.store import ConfigStore

#: the service (not imported: it imports this module, and the import-circle
#: test counts type-only imports too)
Service = Any

log = Logger(namespace="ganeti.wconfd.service.WConfdService")


def check_room(service: Service) -> None:
    """Refuse a change (nothing applied) while the data directory is full."""
    why = service.storage.room()
    if why is not None:
        raise errors.ConfigurationError("cannot change the configuration: %s; nothing changed" % why)


def disk_full(error: BaseException) -> bool:
    return isinstance(error, JournalWriteError) and error.cause.errno in (errno.ENOSPC, errno.EDQUOT)


def revert(service: Service) -> Deferred[None]:
    """Go back to the durable config once the pending appends have ended
    (the service refuses changes meanwhile: it is broken)."""
    d: Deferred[None] = service.storage.drained()
    d.addCallback(lambda _: _reload(service))
    d.addErrback(lambda f: log.failure("cannot go back to the durable configuration; restart WConfD", f))
    return d


def _reload(service: Service) -> None:
    data, records = service.storage.durable_config()
    if data is None:
        raise errors.ConfigurationError("config.data is gone")
    store = ConfigStore(ConfigData.from_json(data))
    for record in records:
        if record.get("s", 0) > store.serial_no:
            store.replay(record)
    dropped = service.config_store.serial_no - store.serial_no
    service.store = store
    service._broken = None
    log.warn("a config change could not be written (the disk is full): back to the durable serial {serial}"
             " ({n} unsaved change(s) dropped); changes are taken again", serial=store.serial_no, n=dropped)


__all__ = ["check_room", "disk_full", "revert"]
