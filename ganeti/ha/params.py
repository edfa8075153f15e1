"""The cluster's high-availability parameters: liveness timeout and automatic failover.

They are cluster parameters (C{gnt-cluster modify --liveness-timeout,
--auto-failover, --failover-timeout}) but they live in a file of their own,
C{var/lib/ganeti/ha.data}, beside C{config.data} and not inside it, for the
reason L{ganeti.ha.epoch} gives: Ganeti 3.0's loader refuses any key of the
cluster object it does not know, so an extra key in C{config.data} would make
the file unreadable by Ganeti's own tools.

WConfD owns the file on the master and replicates it to every node with the
configuration; any node reads its own copy (a candidate deciding on an
automatic failover, LuxiD its liveness timeout).  A missing file means the
defaults; a damaged one is reported and also gives the defaults, so a bad
copy never stops a daemon.

The record (JSON)::

  {"liveness_timeout": 2.0, "auto_failover": false, "failover_timeout": 10.0,
   "serial_no": 3, "mtime": 1764000000.0, "epoch": 2}

C{serial_no} grows by one with each change; C{epoch} is the master epoch
(L{ganeti.ha.epoch}) of the master that made the change.  Copies rank as
configs do (L{HaParams.rank}): by epoch first, then by serial, so a node
keeps the newest copy it is sent, a new master fetches a newer copy from
the candidates before it takes over (L{ganeti.ha.takeover}), and a replaced
master's change that no node confirmed never wins over its successor's.

The last master failover is recorded by the node that took over, in
C{var/lib/ganeti/last-failover} (L{record_failover}): when, the epoch, the
new and the old master.  LuxiD reports the master's record in the cluster
information (C{gnt-cluster info}, RAPI C{/2/info}).
"""

from __future__ import annotations

import os
import time
from typing import Any

import attrs
from twisted.logger import Logger

from ganeti import serializer
from ganeti.ha.bounds import (
    DEFAULT_FAILOVER_TIMEOUT,
    DEFAULT_LIVENESS_TIMEOUT,
    FAILOVER_TIMEOUT_RANGE,
    LIVENESS_TIMEOUT_RANGE,
    PARAMETERS,
)
from ganeti.paths import Paths

#: file name in the data directory
FILE_NAME = "ha.data"
#: file name, in the data directory, of the last failover this node made
FAILOVER_FILE_NAME = "last-failover"

log = Logger()


class HaParamsError(ValueError):
    """A value out of range or of the wrong type; the message names the parameter."""


def _seconds(name: str, value: Any, bounds: tuple[float, float]) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HaParamsError("%s must be a number of seconds, not %r" % (name, value))
    low, high = bounds
    if not low <= value <= high:
        raise HaParamsError("%s must be between %g and %g seconds, not %g" % (name, low, high, value))
    return float(value)


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise HaParamsError("%s must be true or false, not %r" % (name, value))
    return value


@attrs.frozen
class HaParams:
    """One version of the parameters (see the module docstring)."""

    liveness_timeout: float = DEFAULT_LIVENESS_TIMEOUT
    auto_failover: bool = False
    failover_timeout: float = DEFAULT_FAILOVER_TIMEOUT
    serial_no: int = 0
    mtime: float = 0.0
    #: the master epoch under which this version was made (0: none recorded, an older writer)
    epoch: int = 0

    def __attrs_post_init__(self) -> None:
        _seconds("liveness_timeout", self.liveness_timeout, LIVENESS_TIMEOUT_RANGE)
        _seconds("failover_timeout", self.failover_timeout, FAILOVER_TIMEOUT_RANGE)
        _flag("auto_failover", self.auto_failover)
        if self.failover_timeout <= self.liveness_timeout:
            raise HaParamsError("failover_timeout (%g s) must be longer than liveness_timeout (%g s)"
                                % (self.failover_timeout, self.liveness_timeout))
        if isinstance(self.serial_no, bool) or not isinstance(self.serial_no, int) or self.serial_no < 0:
            raise HaParamsError("serial_no must be a non-negative integer, not %r" % (self.serial_no,))
        if isinstance(self.epoch, bool) or not isinstance(self.epoch, int) or self.epoch < 0:
            raise HaParamsError("epoch must be a non-negative integer, not %r" % (self.epoch,))

    def rank(self) -> tuple[int, int]:
        """How new this version is: the epoch of the master that made it, then its serial."""
        return (self.epoch, self.serial_no)

    def under(self, epoch: int) -> HaParams:
        """This version, recorded as made under master epoch C{epoch}."""
        return attrs.evolve(self, epoch=epoch)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> HaParams:
        """Validate a record; unknown keys are ignored (a newer writer may add some).

        @raise HaParamsError: not an object, or a value out of range
        """
        if not isinstance(data, dict):
            raise HaParamsError("the HA parameters must be a JSON object")
        known = {f.name for f in attrs.fields(cls)}
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except TypeError as err:
            raise HaParamsError(str(err)) from None

    def changed(self, **changes: Any) -> HaParams:
        """A new version with C{changes}: serial one higher, mtime now.

        @raise HaParamsError: a value out of range, or an unknown parameter
        """
        unknown = set(changes) - set(PARAMETERS)
        if unknown:
            raise HaParamsError("unknown HA parameter(s): %s" % ", ".join(sorted(unknown)))
        return attrs.evolve(self, serial_no=self.serial_no + 1, mtime=time.time(), **changes)


def params_path(paths: Paths) -> str:
    return os.path.join(paths.data_dir, FILE_NAME)


def read(paths: Paths) -> HaParams:
    """This node's copy; the defaults when there is none or it is damaged (logged)."""
    path = params_path(paths)
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return HaParams()
    except OSError as err:
        log.warn("Cannot read {path}: {err}; using the default HA parameters", path=path, err=err)
        return HaParams()
    try:
        return HaParams.from_dict(serializer.loads(raw))
    except ValueError as err:
        log.warn("Damaged {path}: {err}; using the default HA parameters", path=path, err=err)
        return HaParams()


def write(paths: Paths, params: HaParams) -> None:
    """Replace this node's copy durably (atomic rename, fsynced)."""
    os.makedirs(paths.data_dir, exist_ok=True)
    serializer.write_file(params_path(paths), serializer.dumps(params.to_dict()))


def accept(paths: Paths, params: HaParams) -> bool:
    """Store a replicated copy unless this node holds a newer one (L{HaParams.rank});
    True if this node holds C{params} now."""
    held = read(paths)
    if held.rank() > params.rank():
        return False
    if held != params:
        write(paths, params)
    return True


class Watch:
    """This node's copy for a daemon that follows it (LuxiD's liveness
    timeout, NodeD's beat interval): one C{stat} per call, the file read
    again only when it was replaced (written by WConfD or a replication)."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._stamp: tuple[int, int, int] | None = None
        self._params = HaParams()
        self._read = False

    def current(self) -> HaParams:
        try:
            st = os.stat(params_path(self.paths))
            stamp: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if not self._read or stamp != self._stamp:
            self._stamp, self._read = stamp, True
            self._params = read(self.paths) if stamp is not None else HaParams()
        return self._params


def beat_interval(params: HaParams, most: float = 1.0) -> float:
    """Seconds between a node's heartbeats: C{most}, or half the liveness
    timeout when that is shorter (a node never looks silent for beating too seldom)."""
    return min(most, params.liveness_timeout / 2)


# --- the last failover ---------------------------------------------------------------------


def failover_path(paths: Paths) -> str:
    return os.path.join(paths.data_dir, FAILOVER_FILE_NAME)


def record_failover(paths: Paths, epoch: int, node: str, old_master: str | None, now: float | None = None) -> None:
    """Record durably that C{node} took over from C{old_master} under C{epoch}."""
    record = {"time": time.time() if now is None else now, "epoch": epoch, "node": node, "old_master": old_master}
    os.makedirs(paths.data_dir, exist_ok=True)
    serializer.write_file(failover_path(paths), serializer.dumps(record))


def last_failover(paths: Paths) -> dict[str, Any] | None:
    """This node's record of the last failover it made, or C{None} (none, or damaged: logged)."""
    path = failover_path(paths)
    try:
        with open(path, "rb") as handle:
            record = serializer.loads(handle.read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        log.warn("Cannot read {path}: {err}", path=path, err=err)
        return None
    if not isinstance(record, dict) or not isinstance(record.get("node"), str) \
            or not isinstance(record.get("time"), (int, float)) or not isinstance(record.get("epoch"), int):
        log.warn("Damaged {path}: not a failover record", path=path)
        return None
    return {"time": float(record["time"]), "epoch": record["epoch"], "node": record["node"],
            "old_master": record.get("old_master") if isinstance(record.get("old_master"), str) else None}


def cluster_fields(paths: Paths) -> dict[str, Any]:
    """The HA part of LUXI C{QueryClusterInfo} (and RAPI C{/2/info}) on the master.

    Names start with C{ha_}, which none of Ganeti's cluster fields do.
    """
    from ganeti.ha import epoch as master_epoch

    params = read(paths)
    try:
        current_epoch: int | None = master_epoch.read_epoch(paths)
    except (OSError, ValueError):
        current_epoch = None
    return {
        "ha_liveness_timeout": params.liveness_timeout,
        "ha_auto_failover": params.auto_failover,
        "ha_failover_timeout": params.failover_timeout,
        "ha_serial_no": params.serial_no,
        "ha_master_epoch": current_epoch,
        "ha_last_failover": last_failover(paths),
    }
