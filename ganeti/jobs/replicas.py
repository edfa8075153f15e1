"""The job queue's replicas on the master candidates: what to push (pure).

A queue is described by its I{listing}: C{{name: digest}}, where C{name} is
a file's path relative to the queue directory (C{"serial"}, C{"version"},
C{"drain"}, C{"job-17"}, C{"archive/0/job-12"}) and C{digest} the SHA-1 of
its content.  L{plan} compares the master's listing with what one
candidate is known to hold and gives the operations that make the
candidate's queue equal to the master's, in Ganeti's node RPCs:
C{jobqueue_rename} (a job archived on the master while the candidate still
has it live), C{jobqueue_update} (missing or differing files),
C{jobqueue_set_drain_flag}, and C{jobqueue_remove} (files the master does
not have: purged or never acknowledged).

L{ListingCache} computes listings of a directory, re-reading only files
whose size or modification time changed; noded answers C{jobqueue_list}
with it, LuxiD and C{gnt-cluster verify} use it for the master's queue.
No Twisted here.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import TYPE_CHECKING, Iterable, Mapping

import attrs
import orjson

if TYPE_CHECKING:
    from ganeti.jobs.model import QueuedJob

#: The name of the drain flag file; replicated with C{jobqueue_set_drain_flag}.
DRAIN = "drain"
#: Queue files replicated besides job files.
PLAIN_FILES = ("version", "serial", DRAIN)

_LIVE_RE = re.compile(r"^job-(0|[1-9][0-9]*)$")
_ARCHIVED_RE = re.compile(r"^archive/(0|[1-9][0-9]*)/job-(0|[1-9][0-9]*)$")
_BUCKET_RE = re.compile(r"^(0|[1-9][0-9]*)$")

Listing = Mapping[str, str]


def digest(content: bytes) -> str:
    return hashlib.sha1(content).hexdigest()


def job_id_of(name: str) -> int | None:
    """The job id of a live or archived job file name, else C{None}."""
    match = _LIVE_RE.match(name)
    if match:
        return int(match.group(1))
    match = _ARCHIVED_RE.match(name)
    if match:
        return int(match.group(2))
    return None


def is_archived(name: str) -> bool:
    return _ARCHIVED_RE.match(name) is not None


def is_replicated(name: str) -> bool:
    """Whether queue file C{name} (relative) belongs in the replicas."""
    return name in PLAIN_FILES or job_id_of(name) is not None


def live_name(job_id: int) -> str:
    return "job-%d" % job_id


def queue_names(queue_dir: str) -> list[str]:
    """The replicated files of the queue in C{queue_dir} (relative names)."""
    names: list[str] = []
    try:
        entries = os.listdir(queue_dir)
    except FileNotFoundError:
        return names
    for name in entries:
        if name in PLAIN_FILES or _LIVE_RE.match(name):
            names.append(name)
    archive = os.path.join(queue_dir, "archive")
    try:
        buckets = [b for b in os.listdir(archive) if _BUCKET_RE.match(b)]
    except (FileNotFoundError, NotADirectoryError):
        buckets = []
    for bucket in buckets:
        try:
            files = os.listdir(os.path.join(archive, bucket))
        except (FileNotFoundError, NotADirectoryError):
            continue
        names.extend("archive/%s/%s" % (bucket, f) for f in files if _LIVE_RE.match(f))
    return sorted(names, key=_order)


def _order(name: str) -> tuple[int, int, str]:
    job_id = job_id_of(name)
    return (1 if job_id is not None else 0, job_id or 0, name)


def not_started(job: QueuedJob) -> bool:
    """Whether no opcode of C{job} has started to run (each is queued or
    waiting for its locks): a failover would run it from its start."""
    from ganeti.jobs import lifecycle

    return all(op.status in (lifecycle.QUEUED, lifecycle.WAITING) for op in job.ops)


def needs_durable(name: str, content: bytes) -> bool:
    """Whether a candidate must fsync queue file C{name} with C{content}:
    every file but a version of a live job that has started and not ended,
    which the master itself does not fsync either (its job process writes
    it; a power loss may take it there as here, never a process crash)."""
    if not _LIVE_RE.match(name):
        return True
    try:
        data = orjson.loads(content)
        statuses = [op["status"] for op in data["ops"]]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return True
    from ganeti.jobs import lifecycle

    started = any(status not in (lifecycle.QUEUED, lifecycle.WAITING) for status in statuses)
    return not started or lifecycle.job_status(statuses) in lifecycle.FINALIZED


def job_status(content: bytes) -> str | None:
    """The status of a job file's content (C{None} if it is no job file)."""
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    from ganeti.jobs.model import QueuedJob

    try:
        return QueuedJob.from_dict(data).status
    except (KeyError, TypeError, ValueError):
        return None


@attrs.frozen
class Entry:
    """One listed file: its digest and, for a job file, the job's status."""

    digest: str
    status: str | None


class ListingCache:
    """Listings of one queue directory; unchanged files are not read again."""

    def __init__(self, queue_dir: str, *, statuses: bool = True) -> None:
        """@param statuses: whether to parse job files for their status
            (else every L{Entry} has status C{None})"""
        self.queue_dir = queue_dir
        self.statuses = statuses
        self._known: dict[str, tuple[tuple[int, int, int], Entry]] = {}

    def entries(self) -> dict[str, Entry]:
        """C{{name: Entry}} of every replicated file now in the directory."""
        result: dict[str, Entry] = {}
        known: dict[str, tuple[tuple[int, int, int], Entry]] = {}
        for name in queue_names(self.queue_dir):
            path = os.path.join(self.queue_dir, name)
            try:
                st = os.stat(path)
                stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
                cached = self._known.get(name)
                if cached is not None and cached[0] == stamp:
                    entry = cached[1]
                else:
                    with open(path, "rb") as handle:
                        content = handle.read()
                    wanted = self.statuses and job_id_of(name) is not None
                    status = job_status(content) if wanted else None
                    entry = Entry(digest(content), status)
            except OSError:
                continue  # renamed or removed meanwhile
            known[name] = (stamp, entry)
            result[name] = entry
        self._known = known
        return result

    def listing(self) -> dict[str, str]:
        return {name: entry.digest for name, entry in self.entries().items()}


# --- what to push -----------------------------------------------------------------------------


@attrs.frozen
class Rename:
    """C{jobqueue_rename} of C{old} to C{new} (a job archived on the master)."""

    old: str
    new: str


@attrs.frozen
class Update:
    """C{jobqueue_update} of C{name} with the master's content."""

    name: str


@attrs.frozen
class SetDrain:
    """C{jobqueue_set_drain_flag}."""

    flag: bool


@attrs.frozen
class Remove:
    """C{jobqueue_remove}: files the master does not have."""

    names: tuple[str, ...]


Operation = Rename | Update | SetDrain | Remove


def plan(desired: Listing, held: Listing, names: Iterable[str] | None = None) -> list[Operation]:
    """The operations that make a candidate holding C{held} hold C{desired}.

    @param desired: the master's listing
    @param held: what the candidate is known to hold
    @param names: only these files may differ (C{None}: compare everything)
    @return: renames first (they save pushing archived jobs again), then
        updates in job id order (plain files first), the drain flag, then
        one removal of whatever is left over
    """
    wanted = set(desired) | set(held) if names is None else set(names)
    # a job archived on the master that the candidate still has live: move it
    for name in list(wanted):
        job_id = job_id_of(name)
        if job_id is not None and is_archived(name):
            wanted.add(live_name(job_id))
    after = {name: held[name] for name in wanted if name in held}  # (only these are looked at: no copy of all)
    renames: list[Operation] = []
    for name in sorted(wanted, key=_order):
        if is_archived(name) and name in desired and name not in after:
            old = live_name(job_id_of(name) or 0)
            if old in after and old not in desired:
                renames.append(Rename(old, name))
                after[name] = after.pop(old)
    updates: list[Operation] = []
    drain: list[Operation] = []
    removals: list[str] = []
    for name in sorted(wanted, key=_order):
        if name == DRAIN:
            if (name in desired) != (name in after):
                drain.append(SetDrain(name in desired))
            continue
        if name in desired:
            if after.get(name) != desired[name]:
                updates.append(Update(name))
        elif name in after:
            removals.append(name)
    tail: list[Operation] = [Remove(tuple(removals))] if removals else []
    return renames + updates + drain + tail


def differences(master: Mapping[str, Entry], replica: Mapping[str, Entry]) -> dict[int, str]:
    """Jobs whose replica differs from the master's copy: C{{job id: why}}.

    Only jobs that are final on the master are judged (a running job's
    replica may lag a moment behind); a job the candidate has and the
    master does not is always reported.
    """
    from ganeti.jobs.model import FINALIZED

    found: dict[int, str] = {}
    theirs: dict[int, tuple[str, Entry]] = {}
    for name, entry in replica.items():
        job_id = job_id_of(name)
        if job_id is not None:
            theirs[job_id] = (name, entry)
    ours: dict[int, tuple[str, Entry]] = {}
    for name, entry in master.items():
        job_id = job_id_of(name)
        if job_id is not None:
            ours[job_id] = (name, entry)
    for job_id in sorted(set(ours) | set(theirs)):
        if job_id not in ours:
            found[job_id] = "extra (%s there, not on the master)" % theirs[job_id][0]
            continue
        name, entry = ours[job_id]
        if entry.status not in FINALIZED:
            continue
        if job_id not in theirs:
            found[job_id] = "missing"
            continue
        their_name, their_entry = theirs[job_id]
        if their_entry.digest == entry.digest and their_name == name:
            continue
        if their_entry.status != entry.status:
            found[job_id] = "stale (status %s, master: %s)" % (their_entry.status, entry.status)
        elif their_name != name:
            found[job_id] = "%s there, %s on the master" % (their_name, name)
        else:
            found[job_id] = "content differs from the master's"
    return found


__all__ = [
    "DRAIN", "Entry", "ListingCache", "Operation", "Remove", "Rename", "SetDrain", "Update",
    "differences", "digest", "is_replicated", "job_id_of", "job_status", "plan", "queue_names",
]
