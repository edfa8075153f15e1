"""WConfD's AMP schema: argument types, commands and error codes.

Shared by the daemon (responders) and L{ganeti.wconfd.client}.  One command
per WConfD function, named as Ganeti names the function.  An AMP value holds
at most 64 KiB, so configs travel in L{BigBytes}/L{BigJSON} arguments that
split a value over several box keys, transparently to both sides.
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

from twisted.protocols import amp

from ganeti import errors, serializer
from ganeti.locking import Owner
from ganeti.wconfd.store import IpInUse, MacInUse, UnknownEntity

CHUNK = 0xFFFF  # the largest value AMP allows


class BadArguments(errors.GenericError):
    """A command's arguments could not be decoded."""


class InternalError(errors.GenericError):
    """WConfD failed in an unexpected way (the daemon logs the details)."""


class JSON(amp.Argument):
    """Any JSON value, encoded with orjson."""

    def toString(self, inObject: Any) -> bytes:
        return serializer.dumps(inObject)

    def fromString(self, inString: bytes) -> Any:
        try:
            return serializer.loads(inString)
        except ValueError as e:
            raise BadArguments("not valid JSON: %s" % e) from e


class LockRequest(JSON):
    """A lock request: a JSON list of C{[lock name, mode]} pairs."""

    def fromString(self, inString: bytes) -> Any:
        value = super().fromString(inString)
        if not isinstance(value, list) or not all(
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair) for pair in value
        ):
            raise BadArguments("request must be a list of [lock, mode] pairs, not %.200r" % (value,))
        return value


class BigBytes(amp.Argument):
    """Bytes of any size, split over keys C{name}, C{name.1}, C{name.2}...

    The key C{name} holds the number of chunks as ASCII digits.
    """

    def toBox(self, name: bytes, strings: dict[bytes, bytes], objects: dict[str, Any], proto: Any) -> None:
        raw = objects.get(name.decode("ascii"))
        if raw is None:
            if self.optional:
                return
            raise BadArguments("argument %r is required" % name.decode("ascii"))
        value = self.encode(raw)
        count = max(1, -(-len(value) // CHUNK))
        strings[name] = b"%d" % count
        view = memoryview(value)
        for index in range(count):
            strings[b"%s.%d" % (name, index + 1)] = bytes(view[index * CHUNK:(index + 1) * CHUNK])

    def fromBox(self, name: bytes, strings: dict[bytes, bytes], objects: dict[str, Any], proto: Any) -> None:
        if name not in strings and self.optional:
            objects[name.decode("ascii")] = None
            return
        try:
            count = int(strings[name])
            chunks = [strings[b"%s.%d" % (name, i + 1)] for i in range(count)]
        except (KeyError, ValueError) as e:
            raise BadArguments("argument %r is not a valid chunked value" % name.decode("ascii", "replace")) from e
        objects[name.decode("ascii")] = self.decode(b"".join(chunks))

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, bytes):
            raise TypeError("BigBytes needs bytes, not %s" % type(value).__name__)
        return value

    def decode(self, data: bytes) -> Any:
        return data


class BigJSON(BigBytes):
    """A JSON value of any size."""

    def encode(self, value: Any) -> bytes:
        return value if isinstance(value, bytes) else serializer.dumps(value)

    def decode(self, data: bytes) -> Any:
        try:
            return serializer.loads(data)
        except ValueError as e:
            raise BadArguments("not valid JSON: %s" % e) from e


class OwnerArg(amp.Argument):
    """A lock owner, as Ganeti's JSON C{[identifier, lock file, pid]}."""

    _cache: dict[bytes, Owner] = {}

    def toString(self, inObject: Owner) -> bytes:
        return serializer.dumps(inObject.to_wire())

    def fromString(self, inString: bytes) -> Owner:
        owner = self._cache.get(inString)
        if owner is None:
            try:
                owner = Owner.from_wire(serializer.loads(inString))
            except ValueError as e:
                raise BadArguments("owner is not valid JSON: %s" % e) from e
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[inString] = owner
        return owner


#: Every error a command may answer with, and its code on the wire.
ERRORS: dict[type[Exception], bytes] = {
    BadArguments: b"BAD_ARGUMENTS",
    UnknownEntity: b"UNKNOWN_ENTITY",
    MacInUse: b"MAC_IN_USE",
    IpInUse: b"IP_IN_USE",
    errors.PendingRequestError: b"PENDING_REQUEST",
    errors.LockError: b"LOCK_ERROR",
    errors.ConfigVerifyError: b"CONFIG_VERIFY_ERROR",
    errors.ConfigurationError: b"CONFIGURATION_ERROR",
    errors.OpPrereqError: b"PREREQ_ERROR",
    InternalError: b"INTERNAL_ERROR",
}


class Command(amp.Command):
    """A WConfD command: known errors mapped, bad arguments reported."""

    errors = ERRORS

    @classmethod
    def parseArguments(cls, box: Any, protocol: Any) -> dict[str, Any]:
        try:
            return cast("dict[str, Any]", super().parseArguments(box, protocol))
        except BadArguments as e:
            raise BadArguments("%s: %s" % (cls.commandName.decode(), e)) from e
        except KeyError as e:
            raise BadArguments("%s: missing argument %s" % (cls.commandName.decode(), e)) from e
        except (ValueError, TypeError, errors.GenericError) as e:
            raise BadArguments("%s: %s" % (cls.commandName.decode(), e)) from e


OWNER = (b"owner", OwnerArg())
REQUEST = (b"request", LockRequest())
RELEASE = (b"release", JSON(optional=True))
#: the client's id of a mutating call: a retry with an id already applied
#: gets the recorded answer and changes nothing (see L{ganeti.wconfd.requests})
RID = (b"rid", amp.Integer(optional=True))

# --- general ---------------------------------------------------------------


class Echo(Command):
    arguments = [(b"text", amp.Unicode())]
    response = [(b"text", amp.Unicode())]


# --- config reads ----------------------------------------------------------


class ReadConfig(Command):
    """The whole config.data as JSON bytes, with its serial number; empty
    bytes instead when its serial is C{unless_serial} (the caller holds it).
    With C{deltas} too, a caller holding an older serial gets empty bytes
    and C{changes} instead, when WConfD still keeps them: the change records
    from C{unless_serial} on, for L{ganeti.objects.ConfigData.with_changes}
    (a WConfD that does not know C{deltas} sends the config).  With
    C{unless_mtime}, the C{mtime} of the caller's copy, a copy that is not
    what WConfD had at that serial (changes dropped when the disk was full,
    their serials given again) gets the whole config."""

    arguments: ClassVar[list[tuple[bytes, amp.Argument]]] = [
        (b"unless_serial", amp.Integer(optional=True)), (b"deltas", amp.Boolean(optional=True)),
        (b"unless_mtime", amp.Float(optional=True))]
    response = [(b"config", BigBytes()), (b"serial_no", amp.Integer()), (b"changes", BigJSON(optional=True))]


class ReadSerial(Command):
    arguments: ClassVar[list[tuple[bytes, amp.Argument]]] = []
    response = [(b"serial_no", amp.Integer())]


class ReadWriteLatency(Command):
    """How long config changes took to become durable: a histogram
    C{{"buckets", "counts", "sum", "count"}} (seconds), or C{None} when
    the storage keeps none (in memory)."""

    arguments: ClassVar[list[tuple[bytes, amp.Argument]]] = []
    response = [(b"latency", JSON())]


class ReadCluster(Command):
    arguments: ClassVar[list[tuple[bytes, amp.Argument]]] = []
    response = [(b"cluster", BigJSON())]


class ReadEntity(Command):
    """One node, instance, nodegroup, network or disk, by uuid or name."""

    arguments = [(b"kind", amp.Unicode()), (b"key", amp.Unicode())]
    response = [(b"entity", BigJSON())]


class VerifyConfig(Command):
    arguments: ClassVar[list[tuple[bytes, amp.Argument]]] = []
    response = [(b"problems", JSON())]


class FlushConfig(Command):
    """Return once config.data on disk holds every acknowledged change (with
    C{distributed}: once its distribution to the nodes also ended)."""

    arguments: ClassVar[list[tuple[bytes, amp.Argument]]] = [(b"distributed", amp.Boolean(optional=True))]
    response = [(b"serial_no", amp.Integer())]


# --- HA parameters (ha.data, see L{ganeti.ha.keeper}) ------------------------


class ReadHaParams(Command):
    """The current HA parameters (the record of L{ganeti.ha.params})."""

    arguments: ClassVar[list[tuple[bytes, amp.Argument]]] = []
    response = [(b"params", JSON())]


class SetHaParams(Command):
    """Change HA parameters (C{{name: value}}); answers the new record once
    it is durable on the master and sent to the nodes."""

    arguments = [(b"changes", JSON())]
    response = [(b"params", JSON())]


# --- config writes ---------------------------------------------------------


class ChangeFilter(Command):
    """Store job filter rule C{uuid} (a JSON object) or remove it (C{null});
    answers the config serial once durable (LuxiD's ReplaceFilter, DeleteFilter)."""

    arguments = [(b"uuid", amp.Unicode()), (b"rule", JSON())]
    response = [(b"serial_no", amp.Integer())]


class LockConfig(Command):
    """Take the config lock (waiting for it) and return the config."""

    arguments = [OWNER, (b"shared", amp.Boolean()), (b"timeout", amp.Float(optional=True))]
    response = [(b"config", BigBytes()), (b"serial_no", amp.Integer())]


class UnlockConfig(Command):
    """Release the config lock.  Naturally idempotent: no request id."""

    arguments = [OWNER]
    response: ClassVar[list[tuple[bytes, amp.Argument]]] = []


class WriteConfig(Command):
    """Replace the whole config; the owner must hold the config lock."""

    arguments = [OWNER, (b"config", BigJSON()), RELEASE, RID]
    response = [(b"serial_no", amp.Integer())]


class WriteConfigAndUnlock(WriteConfig):
    """L{WriteConfig}, then release the config lock once durable."""


class UpdateEntity(Command):
    """Replace one entity (or the cluster) atomically.

    The entity's C{serial_no} must equal the stored one; the owner must hold
    the entity's lock.  Locks named in C{release} are released once the
    change is durable.  An instance may come with C{disks}, new disk
    records it lists, and C{remove_disks}, uuids of disks it no longer
    lists that leave the config with this change.
    """

    arguments = [
        OWNER,
        (b"kind", amp.Unicode()),
        (b"entity", BigJSON()),
        RELEASE,
        (b"disks", BigJSON(optional=True)),
        (b"remove_disks", JSON(optional=True)),
        RID,
    ]
    response = [(b"serial_no", amp.Integer()), (b"mtime", amp.Float()), (b"config_serial", amp.Integer())]


class AddEntity(Command):
    """Add a node, nodegroup, network or instance (with its disks)."""

    arguments = [
        OWNER, (b"kind", amp.Unicode()), (b"entity", BigJSON()), (b"disks", BigJSON(optional=True)), RELEASE, RID
    ]
    response = [(b"uuid", amp.Unicode()), (b"config_serial", amp.Integer())]


class RemoveEntity(Command):
    """Remove an entity; the owner must hold its lock exclusively."""

    arguments = [OWNER, (b"kind", amp.Unicode()), (b"key", amp.Unicode()), RELEASE, RID]
    response = [(b"config_serial", amp.Integer())]


# --- locks -----------------------------------------------------------------


class ListLocks(Command):
    arguments = [OWNER]
    response = [(b"locks", JSON())]


class ListAllLocks(Command):
    arguments: ClassVar[list[tuple[bytes, amp.Argument]]] = []
    response = [(b"locks", JSON())]


class ListAllLocksOwners(Command):
    arguments: ClassVar[list[tuple[bytes, amp.Argument]]] = []
    response = [(b"locks", BigJSON())]


class ListLocksWaitingStatus(Command):
    arguments: ClassVar[list[tuple[bytes, amp.Argument]]] = []
    response = [(b"status", BigJSON())]


class RegisterOwner(Command):
    """Bind C{owner} to this connection (grants are pushed here from now on).

    Refused unless the peer process holds the owner's lock file; a client
    sends it again after reconnecting.  With C{unless_serial} it also
    answers as L{ReadConfig} does (the config, or empty bytes when its
    serial is that one; with C{deltas}, the changes since): a job process's
    first read comes with it.
    """

    arguments = [OWNER, (b"unless_serial", amp.Integer(optional=True)), (b"deltas", amp.Boolean(optional=True)),
                 (b"unless_mtime", amp.Float(optional=True))]
    response: ClassVar[list[tuple[bytes, amp.Argument]]] = [
        (b"config", BigBytes(optional=True)), (b"serial_no", amp.Integer(optional=True)),
        (b"changes", BigJSON(optional=True))]


class TryUpdateLocks(Command):
    """Apply C{request} now or change nothing.

    Naturally idempotent (it sets the owner's locks to a state), so it
    carries no request id.
    """

    arguments = [OWNER, REQUEST]
    response = [(b"blockers", JSON())]


class UpdateLocksWaiting(Command):
    """Apply now or queue; a queued request is granted later with L{LocksGranted}.

    Naturally idempotent: sending the pending request again keeps its place,
    and a request granted already answers no blockers.  No request id.
    """

    arguments = [OWNER, (b"priority", amp.Integer()), REQUEST]
    response = [(b"blockers", JSON())]


class HasPendingRequest(Command):
    arguments = [OWNER]
    response = [(b"pending", amp.Boolean())]


class CancelPendingRequest(Command):
    arguments = [OWNER, RID]
    response = [(b"cancelled", amp.Boolean())]


class FreeLocks(Command):
    """Release all of the owner's locks.  Naturally idempotent: no request id."""

    arguments = [OWNER]
    response: ClassVar[list[tuple[bytes, amp.Argument]]] = []


class FreeLocksLevel(Command):
    """Release the owner's locks of a level.  Naturally idempotent: no request id."""

    arguments = [OWNER, (b"level", amp.Unicode())]
    response: ClassVar[list[tuple[bytes, amp.Argument]]] = []


class DowngradeLocksLevel(Command):
    """Make the owner's locks of a level shared.  Naturally idempotent: no request id."""

    arguments = [OWNER, (b"level", amp.Unicode())]
    response: ClassVar[list[tuple[bytes, amp.Argument]]] = []


class IntersectLocks(Command):
    """Keep only the named locks.  Naturally idempotent: no request id."""

    arguments = [OWNER, (b"locks", JSON())]
    response: ClassVar[list[tuple[bytes, amp.Argument]]] = []


class OpportunisticLockUnion(Command):
    """Take what is free of C{request}; with a timeout, wait for at least C{count}."""

    arguments = [
        OWNER,
        REQUEST,
        (b"count", amp.Integer(optional=True)),
        (b"timeout", amp.Float(optional=True)),
        RID,
    ]
    response = [(b"acquired", JSON())]


class GuardedOpportunisticLockUnion(OpportunisticLockUnion):
    """Like L{OpportunisticLockUnion}, all-or-nothing below C{count}."""


class AddLocks(Command):
    """Create lock names and hold them exclusively (for entities being created)."""

    arguments = [OWNER, (b"locks", JSON()), RID]
    response = [(b"blockers", JSON())]


class CleanupLocks(Command):
    """Run dead-owner detection now; answers the owners found dead."""

    arguments: ClassVar[list[tuple[bytes, amp.Argument]]] = []
    response = [(b"dead", JSON())]


# --- pushed from WConfD to a client -----------------------------------------


class LocksGranted(Command):
    """A queued request of C{owner} has been granted."""

    arguments = [OWNER]
    response: ClassVar[list[tuple[bytes, amp.Argument]]] = []
    requiresAnswer = False
