"""The on-disk job queue of the master: C{var/lib/ganeti/queue}.

Layout (spec/jobs.md section 4)::

  queue/version                    "1\\n"
  queue/serial                     last allocated job id, "<n>\\n"
  queue/lock                       flock'ed by the one running LuxiD
  queue/drain                      present = no new jobs
  queue/job-<id>                   live job files (JSON)
  queue/archive/<id // 10000>/job-<id>

Every change but the serial's is made durable (atomic rename, fsync of
file and directory) before the method returns (the serial is written in
place, not fsynced: L{JobQueueDir.allocate_ids}), and is then handed to
the C{on_write}, C{on_rename} or C{on_drain} hook, which replicates it to
the master candidates.
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Callable, Container, Iterable, Mapping

from twisted.logger import Logger

from ganeti import errors, lockfile, serializer
from ganeti.jobs import blanks
from ganeti.jobs.model import QueuedJob, ts_seconds
from ganeti.paths import Paths

QUEUE_VERSION = 1
MAX_JOBS = 5000  # JOB_QUEUE_SIZE_HARD_LIMIT
JOBS_PER_ARCHIVE_DIRECTORY = 10000
FILE_MODE = 0o640  # JOB_QUEUE_FILES_PERMS
DIR_MODE = 0o700

_JOB_FILE_RE = re.compile(r"^job-(0|[1-9][0-9]*)$")
_NUMBER_RE = re.compile(r"^(0|[1-9][0-9]*)$")

WriteHook = Callable[[str, bytes], None]
RenameHook = Callable[[list[tuple[str, str]]], None]
DrainHook = Callable[[bool], None]


class QueueLocked(errors.JobQueueError):
    """Another process holds the queue lock (another LuxiD on this root)."""


def archive_directory(job_id: int) -> str:
    """The archive subdirectory name of C{job_id} (C{id // 10000})."""
    return str(job_id // JOBS_PER_ARCHIVE_DIRECTORY)


def archivable(job: QueuedJob, cutoff_seconds: float | None) -> bool:
    """Whether C{job} may be archived (spec/jobs.md section 7).

    @param cutoff_seconds: an epoch time; the job qualifies if it is
        finalized and its end (else start) timestamp is older than this.
        C{None} means no age criterion: every finalized job qualifies
        (C{AutoArchiveJobs} with a negative age).
    """
    if not job.finalized:
        return False
    if cutoff_seconds is None:
        return True
    when = ts_seconds(job.end_timestamp)
    if when is None:
        when = ts_seconds(job.start_timestamp)
    if when is None:
        return False
    return when < cutoff_seconds


def check_capacity(live_count: int, adding: int) -> None:
    """Raise L{errors.JobQueueFull} if C{adding} jobs would exceed L{MAX_JOBS}."""
    if live_count + adding > MAX_JOBS:
        raise errors.JobQueueFull(
            "Job queue full: %d live jobs, %d more requested, limit %d" % (live_count, adding, MAX_JOBS)
        )


class JobQueueDir:
    """The queue directory of one node, owned by one LuxiD at a time.

    Not thread-safe beyond id allocation; LuxiD uses it from the reactor
    thread.

    @ivar problems: C{(path, reason)} for every job file the last
        L{load_live_jobs} could not read; such files are left in place.
    """

    log = Logger()

    def __init__(
        self,
        paths: Paths,
        on_write: WriteHook | None = None,
        on_rename: RenameHook | None = None,
        on_drain: DrainHook | None = None,
    ) -> None:
        self.paths = paths
        self.on_write = on_write
        #: job id -> hash of the content L{write_job} wrote last: the watcher of the directory tells this
        #: daemon's own writes from a job process's (L{is_own_write})
        self.written: dict[int, int] = {}
        self.on_rename = on_rename
        self.on_drain = on_drain
        self.problems: list[tuple[str, str]] = []
        self._lock_fd: int | None = None
        self._serial: int | None = None
        self._id_lock = threading.Lock()

    # --- paths ------------------------------------------------------------
    @property
    def queue_dir(self) -> str:
        return self.paths.queue_dir

    @property
    def archive_dir(self) -> str:
        return os.path.join(self.queue_dir, "archive")

    @property
    def version_file(self) -> str:
        return os.path.join(self.queue_dir, "version")

    @property
    def serial_file(self) -> str:
        return os.path.join(self.queue_dir, "serial")

    @property
    def lock_file(self) -> str:
        return os.path.join(self.queue_dir, "lock")

    @property
    def drain_file(self) -> str:
        return os.path.join(self.queue_dir, "drain")

    def job_path(self, job_id: int) -> str:
        return os.path.join(self.queue_dir, "job-%d" % job_id)

    def archive_path(self, job_id: int) -> str:
        return os.path.join(self.archive_dir, archive_directory(job_id), "job-%d" % job_id)

    # --- opening and closing ----------------------------------------------
    @property
    def is_open(self) -> bool:
        return self._lock_fd is not None

    def open(self) -> None:
        """Create the queue if needed, take its lock and check its version.

        @raise QueueLocked: another process holds C{queue/lock}.
        @raise errors.JobQueueError: the queue has another version or an
            unreadable serial file.
        """
        if self._lock_fd is not None:
            return
        os.makedirs(self.queue_dir, mode=DIR_MODE, exist_ok=True)
        try:
            fd = lockfile.hold(self.lock_file)
        except lockfile.LockHeld as e:
            raise QueueLocked(
                "Job queue lock %s is held by another process: another ganeti-luxid"
                " is running on this root (%s)" % (self.lock_file, self.paths.root)
            ) from e
        self._lock_fd = fd
        try:
            os.makedirs(self.archive_dir, mode=DIR_MODE, exist_ok=True)
            self._check_version()
            self._serial = self._recover_serial()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Release the queue lock (idempotent); this process's blanks (L{blanks}) are removed."""
        blanks.drop()
        fd, self._lock_fd = self._lock_fd, None
        self._serial = None
        if fd is not None:
            lockfile.release(fd)

    def __enter__(self) -> JobQueueDir:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _require_open(self) -> None:
        if self._lock_fd is None:
            raise errors.JobQueueError("Job queue %s is not open" % self.queue_dir)

    def _check_version(self) -> None:
        try:
            raw = serializer.read_file(self.version_file)
        except FileNotFoundError:
            self._write(self.version_file, b"%d\n" % QUEUE_VERSION, replicate=False)
            return
        text = raw.decode("utf-8", "replace").strip()
        if text != str(QUEUE_VERSION):
            raise errors.JobQueueError(
                "Found job queue version %r in %s, expected %d" % (text, self.version_file, QUEUE_VERSION)
            )

    def _recover_serial(self) -> int:
        """The serial to allocate from: never below an existing job file."""
        try:
            serial = self._read_serial()
        except FileNotFoundError:
            serial = None
        highest = self._highest_job_id()
        if serial is None or highest > serial:
            if serial is not None:
                self.log.warn(
                    "queue serial {serial} is below existing job {highest}; continuing after it",
                    serial=serial,
                    highest=highest,
                )
            serial = max(highest, serial or 0)
            self._write(self.serial_file, b"%d\n" % serial, replicate=False)
        return serial

    def _read_serial(self) -> int:
        # (NUL bytes: what a crash may leave of a serial written in place whose data was not fsynced)
        text = serializer.read_file(self.serial_file).strip(b"\0 \t\r\n").decode("utf-8", "replace")
        if not text:  # what a crash may leave of a serial whose data was not fsynced: the job files tell
            raise FileNotFoundError(self.serial_file)
        if not _NUMBER_RE.match(text):
            raise errors.JobQueueError("Invalid job queue serial %r in %s" % (text, self.serial_file))
        return int(text)

    def _highest_job_id(self) -> int:
        """The highest id of a live or archived job file (0 if none)."""
        highest = max(self.live_job_ids(), default=0)
        try:
            buckets = [int(n) for n in os.listdir(self.archive_dir) if _NUMBER_RE.match(n)]
        except FileNotFoundError:
            buckets = []
        for bucket in sorted(buckets, reverse=True):
            ids = _job_ids_in(os.path.join(self.archive_dir, str(bucket)))
            if ids:
                highest = max(highest, max(ids))
                break
        return highest

    # --- ids ---------------------------------------------------------------
    def serial(self) -> int:
        """The last allocated job id."""
        if self._serial is not None:
            return self._serial
        try:
            return self._read_serial()
        except FileNotFoundError:
            return 0

    def allocate_ids(self, count: int) -> list[int]:
        """Reserve C{count} new job ids.

        The new serial is written (and handed to C{on_write}) before the
        ids are returned, so an id is never given out twice by this
        process.  Its data is not fsynced: across a crash of the machine
        the job files carry the ids, each durable before its job is
        acknowledged, and L{open} never continues below an existing job
        file (nor stops at the empty serial file a crash may leave).  An
        id whose job was never acknowledged may be given out again.
        """
        if count < 0:
            raise errors.ProgrammerError("Cannot allocate %d job ids" % count)
        self._require_open()
        with self._id_lock:
            assert self._serial is not None
            if count == 0:
                return []
            first = self._serial + 1
            last = self._serial + count
            self._store_serial(last)
            self._serial = last
        return list(range(first, last + 1))

    def _store_serial(self, serial: int) -> None:
        """Write the serial in place, not fsynced, and hand it to C{on_write}.

        Not replaced by a rename as the other files are: renaming over an
        existing file makes ext4 write the new file's data out at once
        (its C{auto_da_alloc}), which cost LuxiD's thread 1-3 ms for every
        submission, behind the fsyncs of other writers.  The serial only
        grows, so the new text covers the old; a crash leaves the old
        number or the new one, and L{open} goes by the job files anyway.
        """
        data = b"%d\n" % serial
        fd = os.open(self.serial_file, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        try:
            view = memoryview(data)
            while view:
                view = view[os.pwrite(fd, view, len(data) - len(view)):]
            if os.fstat(fd).st_size > len(data):  # (longer text, not ours: cut to what we wrote)
                os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        if self.on_write is not None:
            self.on_write(self.serial_file, data)

    # --- job files ---------------------------------------------------------
    def write_job(self, job: QueuedJob, durable: bool = True, sync_dir: bool = True) -> bytes:
        """Write C{job-<id>} atomically; returns the bytes written.
        C{sync_dir=False}: the rename is made durable by the caller's L{sync_dir}."""
        data = job.to_json()
        self._write(self.job_path(job.id), data, durable=durable, sync_dir=sync_dir)
        if job.finalized:  # (nothing follows it: no entry left behind for jobs that never had a process)
            self.written.pop(job.id, None)
        else:
            self.written[job.id] = hash(data)
        return data

    def is_own_write(self, job_id: int, content: bytes) -> bool:
        """Whether C{content} is what L{write_job} wrote last for C{job_id}."""
        return self.written.get(job_id) == hash(content)

    def sync_dir(self) -> None:
        """Make the renames of files written with C{sync_dir=False} durable."""
        serializer.fsync_dir(self.queue_dir)

    def remove_unacknowledged(self, job_id: int) -> None:
        """Remove the file of a job whose submission failed (never acknowledged,
        never run): a LuxiD started later must not run it."""
        try:
            os.unlink(self.job_path(job_id))
        except OSError:
            pass

    def sync_jobs(self, job_ids: Iterable[int]) -> None:
        """Make job files written with C{durable=False} durable: each file,
        then the queue directory (their renames), fsynced."""
        for job_id in job_ids:
            fd = os.open(self.job_path(job_id), os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        serializer.fsync_dir(self.queue_dir)

    def read_job(self, job_id: int) -> QueuedJob | None:
        """The live job C{job_id}, else the archived one, else C{None}.

        A file that cannot be parsed is logged and treated as missing.
        """
        for path in (self.job_path(job_id), self.archive_path(job_id)):
            try:
                return self._load(path, job_id)
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as e:
                self.log.error("cannot read job file {path}: {why}", path=path, why=e)
                return None
        return None

    def archived_job_ids(self) -> list[int]:
        """Ids of the archived job files, ascending."""
        try:
            buckets = [n for n in os.listdir(self.archive_dir) if _NUMBER_RE.match(n)]
        except FileNotFoundError:
            return []
        return sorted(i for bucket in buckets for i in _job_ids_in(os.path.join(self.archive_dir, bucket)))

    def read_archived_job(self, job_id: int) -> QueuedJob | None:
        """The archived job C{job_id}, else C{None} (an unreadable file is logged)."""
        path = self.archive_path(job_id)
        try:
            return self._load(path, job_id)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            self.log.error("cannot read job file {path}: {why}", path=path, why=e)
            return None

    def live_job_ids(self) -> list[int]:
        """Ids of the live job files, ascending."""
        return _job_ids_in(self.queue_dir)

    def load_live_jobs(self) -> dict[int, QueuedJob]:
        """Every readable live job; unreadable files are logged and skipped.

        Skipped files stay where they are (see L{problems}).
        """
        jobs: dict[int, QueuedJob] = {}
        problems: list[tuple[str, str]] = []
        for job_id in self.live_job_ids():
            path = self.job_path(job_id)
            try:
                jobs[job_id] = self._load(path, job_id)
            except FileNotFoundError:
                continue  # archived or removed meanwhile
            except (OSError, ValueError) as e:
                problems.append((path, str(e)))
                self.log.error("skipping unreadable job file {path}: {why}", path=path, why=e)
        self.problems = problems
        return jobs

    def _load(self, path: str, job_id: int) -> QueuedJob:
        job = QueuedJob.from_dict(serializer.loads(serializer.read_file(path)))
        if job.id != job_id:
            raise ValueError("file %s holds job %s" % (path, job.id))
        return job

    # --- archive -----------------------------------------------------------
    archivable = staticmethod(archivable)
    check_capacity = staticmethod(check_capacity)

    def archive_job(self, job_id: int) -> bool:
        """Move a finalized job to the archive; C{False} if unknown or unfinished."""
        return bool(self.archive_jobs([job_id]))

    def archive_finished(self, jobs: Mapping[int, QueuedJob], busy: Container[int], age: float,
                         timeout: float) -> tuple[list[int], int]:
        """C{AutoArchiveJobs}: archive the finished C{jobs} (not C{busy}) that
        ended more than C{age} seconds ago (any age if negative), one by one
        until C{timeout} seconds have passed; the ids archived and how many
        jobs were left unexamined."""
        deadline = time.monotonic() + max(0.0, float(timeout))
        cutoff = time.time() - age if age >= 0 else None
        archived: list[int] = []
        ids = sorted(jobs)
        for index, job_id in enumerate(ids):
            if time.monotonic() > deadline:
                return archived, len(ids) - index
            job = jobs[job_id]
            if not job.finalized or job_id in busy:
                continue
            if cutoff is not None and not archivable(job, cutoff):
                continue
            if self.archive_job(job_id):
                archived.append(job_id)
        return archived, 0

    def archive_jobs(self, job_ids: Iterable[int]) -> list[int]:
        """Archive the finalized ones of C{job_ids}; returns those archived.

        All renames are durable before one C{on_rename} call reports them.
        """
        renames: list[tuple[str, str]] = []
        archived: list[int] = []
        touched: set[str] = set()
        try:
            for job_id in job_ids:
                old = self.job_path(job_id)
                try:
                    job = self._load(old, job_id)
                except FileNotFoundError:
                    continue
                except (OSError, ValueError) as e:
                    self.log.error("not archiving unreadable job file {path}: {why}", path=old, why=e)
                    continue
                if not job.finalized:
                    continue
                new = self.archive_path(job_id)
                directory = os.path.dirname(new)
                os.makedirs(directory, mode=DIR_MODE, exist_ok=True)
                os.rename(old, new)
                touched.add(directory)
                renames.append((old, new))
                archived.append(job_id)
        finally:
            # Report what was renamed even if a later rename failed.
            if renames:
                for directory in sorted(touched):
                    serializer.fsync_dir(directory)
                serializer.fsync_dir(self.archive_dir)
                serializer.fsync_dir(self.queue_dir)
                if self.on_rename is not None:
                    self.on_rename(renames)
        return archived

    # --- drain flag --------------------------------------------------------
    def is_drained(self) -> bool:
        return os.path.exists(self.drain_file)

    def set_drained(self, flag: bool) -> None:
        """Create (C{True}) or remove (C{False}) C{queue/drain}, durably,
        then tell C{on_drain} (even if nothing changed here: a replica may
        still differ)."""
        if flag:
            if not os.path.exists(self.drain_file):
                serializer.write_file(self.drain_file, b"", mode=FILE_MODE)
        else:
            try:
                os.unlink(self.drain_file)
            except FileNotFoundError:
                pass
            else:
                serializer.fsync_dir(self.queue_dir)
        if self.on_drain is not None:
            self.on_drain(flag)

    # --- helpers -----------------------------------------------------------
    def _write(self, path: str, data: bytes, durable: bool = True, replicate: bool = True, sync_dir: bool = True) -> None:
        serializer.write_file(path, data, mode=FILE_MODE, durable=durable, sync_dir=sync_dir,
                              blank=blanks.take(os.path.dirname(path)))  # (LuxiD's: acks)
        if replicate and self.on_write is not None:
            self.on_write(path, data)


def _job_ids_in(directory: str) -> list[int]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    ids = []
    for name in names:
        match = _JOB_FILE_RE.match(name)
        if match:
            ids.append(int(match.group(1)))
    ids.sort()
    return ids


__all__ = [
    "JOBS_PER_ARCHIVE_DIRECTORY",
    "MAX_JOBS",
    "QUEUE_VERSION",
    "JobQueueDir",
    "QueueLocked",
    "archivable",
    "archive_directory",
    "check_capacity",
]
