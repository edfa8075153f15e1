"""The master epoch: fencing of a master that was replaced.

The master has an epoch, a number raised by one at every change of master.
Every node keeps the highest epoch it has seen in C{var/lib/ganeti/master-epoch}
(written durably before it acts on a higher one).  The master daemons (WConfD,
LuxiD and the job processes LuxiD spawns) read their node's epoch once, when
they start, and send it with every node RPC (HTTP header C{X-Ganeti-Epoch});
NodeD refuses a call that carries a lower epoch than the highest it has seen
(HTTP 409, the node's epoch in the same header).  A master daemon told so
stops: a newer master exists.

The epoch is a file of its own, beside C{config.data} and not inside it:
Ganeti 3.0's loader (C{objects.ConfigData.FromDict}) builds its objects from
C{__slots__} classes and refuses any key it does not know, so an extra key in
C{config.data} would make it unreadable by Ganeti's own tools.

Beside it, C{config-epoch} holds the epoch of the master that wrote the
node's C{config.data}: NodeD records the epoch a C{upload_file} of
config.data or a C{config_delta} carries (L{request_epoch}), the take-over
the epoch it won.  The election and the take-over rank configs by that
epoch first, then by serial: a replaced master may hold changes no majority
confirmed, at serials its successor used for the changes it confirmed.

A process learns its epoch from the environment variable L{ENV}, which the
master daemons set at start-up: the job processes they spawn inherit it.
Calls without the header (the gnt-* commands' own RPCs, Ganeti's tools) are
not fenced.
"""

from __future__ import annotations

import os
import threading
from contextvars import ContextVar
from typing import Any, Callable

from ganeti.paths import Paths

#: HTTP header carrying an epoch, in requests and in refusals.
HEADER = b"X-Ganeti-Epoch"
#: HTTP status of a refusal for a stale epoch.
STALE_CODE = 409
#: Environment variable holding the epoch of a master daemon's process.
ENV = "GANETI_MASTER_EPOCH"
#: File name, in the data directory, of the highest epoch a node has seen.
FILE_NAME = "master-epoch"
#: File name, in the data directory, of the epoch of the master that wrote the node's config.data.
CONFIG_FILE_NAME = "config-epoch"

#: the epoch the node RPC being dispatched carries (C{None}: none), set by NodeD around each call
request_epoch: ContextVar[int | None] = ContextVar("request_epoch", default=None)



def _log() -> Any:
    """This module's logger (Twisted's, imported when first used: the command line reads epochs too)."""
    from twisted.logger import Logger

    return Logger(namespace=__name__)


class StaleEpoch(Exception):
    """A call carried an epoch lower than the highest this node has seen."""

    def __init__(self, offered: int, highest: int) -> None:
        super().__init__("stale master epoch %d: this node has seen epoch %d (a newer master took over)"
                         % (offered, highest))
        self.offered = offered
        self.highest = highest


def epoch_path(paths: Paths) -> str:
    return os.path.join(paths.data_dir, FILE_NAME)


def parse(value: bytes | str | None) -> int | None:
    """An epoch from a header or file: a non-negative integer, else C{None}."""
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    value = value.strip()
    if not value.isdigit() or len(value) > 18:
        return None
    return int(value)


def read_record(paths: Paths) -> tuple[int, str | None]:
    """C{(highest epoch seen, the node that claimed it or None)}; C{(0, None)} when none was recorded.

    The file holds the epoch, then, once a node claimed it for a failover,
    that node's name (one line).
    """
    try:
        with open(epoch_path(paths), "rb") as handle:
            words = handle.read().split()
    except FileNotFoundError:
        return 0, None
    value = parse(words[0]) if words else None
    if value is None or len(words) > 2:
        raise ValueError("%s does not hold an epoch" % epoch_path(paths))
    return value, words[1].decode("utf-8", "replace") if len(words) == 2 else None


def read_epoch(paths: Paths) -> int:
    """The highest epoch this node has seen (0 when none was ever recorded)."""
    return read_record(paths)[0]


def write_epoch(paths: Paths, epoch: int, holder: str | None = None) -> None:
    """Record C{epoch} (claimed by C{holder}) durably: atomic replace, fsync of file and directory."""
    line = b"%d\n" % epoch if holder is None else b"%d %s\n" % (epoch, holder.encode("utf-8"))
    from ganeti import serializer  # (and orjson: not for the command line, which only reads)

    serializer.write_file(epoch_path(paths), line, mode=0o644)


def config_epoch_path(paths: Paths) -> str:
    return os.path.join(paths.data_dir, CONFIG_FILE_NAME)


def read_config_epoch(paths: Paths) -> int:
    """The epoch of the master that wrote this node's config.data (0: none
    recorded, as on a node from before the record, or unreadable)."""
    try:
        with open(config_epoch_path(paths), "rb") as handle:
            value = parse(handle.read())
    except OSError:
        return 0
    return 0 if value is None else value


def write_config_epoch(paths: Paths, epoch: int) -> None:
    """Record, durably, that config.data was written by the master of C{epoch}.

    Written after config.data (or its delta journal): a crash between the two
    leaves a newer config under an older epoch, which only ranks it lower
    (L{ganeti.ha.election.newness}), never an older config under a newer one.
    """
    if read_config_epoch(paths) != epoch:
        from ganeti import serializer

        serializer.write_file(config_epoch_path(paths), b"%d\n" % epoch, mode=0o644)


def mark_upgraded_config(paths: Paths, epoch: int | None, me: str) -> bool:
    """On a master whose config.data has no recorded epoch yet (a node from
    before the record): record the epoch it runs under, when this node is the
    one that claimed it (or nobody did), so that its own config does not rank
    below the candidates' copies of it.  Whether it recorded it.

    Nothing when a record exists (the take-over wrote it) or another node
    claimed the epoch (a take-over is under way: this config may be stale).
    """
    if epoch is None or os.path.exists(config_epoch_path(paths)):
        return False
    try:
        highest, holder = read_record(paths)
    except ValueError:
        return False
    if highest != epoch or holder not in (None, me):
        return False
    write_config_epoch(paths, epoch)
    return True


class EpochGuard:
    """A node's highest seen epoch, in memory and on disk.

    L{check} is called for every RPC that carries an epoch: a lower one is
    refused, a higher one is recorded durably before the call runs.
    """

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._lock = threading.Lock()
        self.highest, self.holder = read_record(paths)

    def check(self, offered: int | None) -> None:
        """Accept a call carrying C{offered} (C{None}: no epoch, accepted).

        @raise StaleEpoch: C{offered} is lower than the highest seen
        """
        if offered is None:
            return
        with self._lock:
            if offered < self.highest:
                raise StaleEpoch(offered, self.highest)
            if offered > self.highest:
                write_epoch(self.paths, offered)
                _log().info("master epoch raised from {old} to {new}", old=self.highest, new=offered)
                self.highest, self.holder = offered, None

    def claim(self, epoch: int, holder: str) -> None:
        """Give C{epoch} to the node C{holder} taking over as master: once
        per epoch (a second claim of the same epoch by another node is
        refused), recorded durably before the answer.

        @raise StaleEpoch: C{epoch} is lower than the highest seen, or
            another node claimed it already
        """
        with self._lock:
            if epoch < self.highest or (epoch == self.highest and self.holder not in (None, holder)):
                raise StaleEpoch(epoch, self.highest)
            if (epoch, holder) != (self.highest, self.holder):
                write_epoch(self.paths, epoch, holder)
                _log().info("master epoch {new} claimed by {holder}", new=epoch, holder=holder)
                self.highest, self.holder = epoch, holder

    def raise_to(self, epoch: int) -> int:
        """Record C{epoch} if higher; the highest epoch afterwards."""
        self.check(max(epoch, self.highest))
        return self.highest


# --- the epoch of this process (a master daemon or one of its job processes) -----------

_fenced_callbacks: list[Callable[[int], None]] = []


def process_epoch() -> int | None:
    """The epoch this process acts under, or C{None} (not a master daemon)."""
    return parse(os.environ.get(ENV))


def adopt(epoch: int, on_fenced: Callable[[int], None] | None = None) -> None:
    """Act under C{epoch} from now on (inherited by child processes).

    @param on_fenced: called with the higher epoch when a node refuses a call
    """
    os.environ[ENV] = str(epoch)
    if on_fenced is not None:
        _fenced_callbacks.append(on_fenced)


def fenced(higher: int) -> None:
    """A node refused this process's epoch: tell whoever asked to know."""
    for callback in list(_fenced_callbacks):
        callback(higher)


def forget() -> None:
    """Act under no epoch (tests)."""
    os.environ.pop(ENV, None)
    _fenced_callbacks.clear()
