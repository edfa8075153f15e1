"""The on-disk job queue: durable ids, the lock, job files, archive, drain flag."""

import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from ganeti import errors, serializer
from ganeti.jobs import queue as jqueue
from ganeti.jobs.model import CANCELED, ERROR, QUEUED, RUNNING, SUCCESS, QueuedJob, QueuedOpCode
from ganeti.jobs.queue import MAX_JOBS, JobQueueDir, QueueLocked
from ganeti.paths import Paths
from tests.testdata import TESTDATA as _TESTDATA_DIR

TESTDATA = str(_TESTDATA_DIR)
REAL_QUEUE = os.path.join(TESTDATA, "queue")


class Recorder:
    def __init__(self):
        self.writes = []
        self.renames = []

    def on_write(self, path, content):
        self.writes.append((path, content))

    def on_rename(self, pairs):
        self.renames.append(list(pairs))


@pytest.fixture
def paths(tmp_path):
    return Paths(str(tmp_path))


@pytest.fixture
def recorder():
    return Recorder()


@pytest.fixture
def queue(paths, recorder):
    q = JobQueueDir(paths, on_write=recorder.on_write, on_rename=recorder.on_rename)
    q.open()
    yield q
    q.close()


def make_job(job_id, status=QUEUED, end=None, start=None):
    op = QueuedOpCode(input={"OP_ID": "OP_TEST_DELAY", "duration": 0}, status=status)
    return QueuedJob(id=job_id, ops=[op], received_timestamp=[1, 0], start_timestamp=start, end_timestamp=end)


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


# --- open -----------------------------------------------------------------------


def test_open_creates_the_queue(paths):
    q = JobQueueDir(paths)
    q.open()
    try:
        assert q.queue_dir == paths.queue_dir
        assert mode_of(paths.queue_dir) == 0o700
        assert os.path.isdir(os.path.join(paths.queue_dir, "archive"))
        assert open(os.path.join(paths.queue_dir, "version"), "rb").read() == b"1\n"
        assert open(os.path.join(paths.queue_dir, "serial"), "rb").read() == b"0\n"
        assert mode_of(os.path.join(paths.queue_dir, "serial")) == 0o640
        assert q.serial() == 0
        assert q.live_job_ids() == []
        assert not q.is_drained()
    finally:
        q.close()


def test_open_keeps_an_existing_serial(paths):
    os.makedirs(paths.queue_dir)
    serializer.write_file(os.path.join(paths.queue_dir, "serial"), b"41\n")
    with JobQueueDir(paths) as q:
        assert q.serial() == 41
        assert q.allocate_ids(1) == [42]


def test_open_refuses_another_version_and_releases_the_lock(paths):
    os.makedirs(paths.queue_dir)
    version = os.path.join(paths.queue_dir, "version")
    serializer.write_file(version, b"2\n")
    with pytest.raises(errors.JobQueueError, match="version"):
        JobQueueDir(paths).open()
    serializer.write_file(version, b"1\n")
    with JobQueueDir(paths) as q:  # the failed open did not keep the lock
        assert q.is_open


def test_open_refuses_a_garbled_serial(paths):
    os.makedirs(paths.queue_dir)
    serializer.write_file(os.path.join(paths.queue_dir, "serial"), b"12x\n")
    with pytest.raises(errors.JobQueueError, match="serial"):
        JobQueueDir(paths).open()


def test_operations_need_an_open_queue(paths):
    with pytest.raises(errors.JobQueueError):
        JobQueueDir(paths).allocate_ids(1)


# --- the lock ---------------------------------------------------------------------


def test_second_queue_on_the_same_root_is_refused(paths, queue):
    other = JobQueueDir(paths)
    with pytest.raises(QueueLocked) as caught:
        other.open()
    message = str(caught.value)
    assert os.path.join(paths.queue_dir, "lock") in message
    assert "another ganeti-luxid is running on this root" in message
    assert isinstance(caught.value, errors.JobQueueError)
    assert not other.is_open
    queue.close()
    other.open()  # free once the first one closed
    other.close()


def test_lock_held_by_another_process_is_refused(paths, tmp_path):
    with JobQueueDir(paths):  # create the layout
        pass
    ready = tmp_path / "ready"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import fcntl, os, sys, time
                fd = os.open(sys.argv[1], os.O_RDWR)
                fcntl.flock(fd, fcntl.LOCK_EX)
                open(sys.argv[2], "w").close()
                time.sleep(60)
                """
            ),
            os.path.join(paths.queue_dir, "lock"),
            str(ready),
        ]
    )
    try:
        for _ in range(500):
            if ready.exists():
                break
            holder.poll()
            assert holder.returncode is None
            time.sleep(0.01)
        with pytest.raises(QueueLocked):
            JobQueueDir(paths).open()
    finally:
        holder.kill()
        holder.wait()
    with JobQueueDir(paths) as q:  # the kernel dropped the dead holder's lock
        assert q.is_open


# --- ids ------------------------------------------------------------------------------


def test_ids_are_consecutive_and_durable(queue, paths, recorder):
    assert queue.allocate_ids(1) == [1]
    assert queue.allocate_ids(3) == [2, 3, 4]
    assert queue.allocate_ids(0) == []
    assert queue.serial() == 4
    serial_path = os.path.join(paths.queue_dir, "serial")
    assert open(serial_path, "rb").read() == b"4\n"
    assert recorder.writes == [(serial_path, b"1\n"), (serial_path, b"4\n")]
    with pytest.raises(errors.ProgrammerError):
        queue.allocate_ids(-1)


def test_ids_continue_after_a_crash(paths, tmp_path):
    """A process that allocated ids and was killed: the next one continues."""
    script = textwrap.dedent(
        """
        import os, sys
        from ganeti.jobs.queue import JobQueueDir
        from ganeti.paths import Paths
        q = JobQueueDir(Paths(sys.argv[1]))
        q.open()
        print(q.allocate_ids(5), flush=True)
        os._exit(9)  # no close(), no cleanup
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script, paths.root], capture_output=True, text=True, check=False, timeout=60
    )
    assert out.returncode == 9, out.stderr
    assert out.stdout.strip() == "[1, 2, 3, 4, 5]"
    with JobQueueDir(paths) as q:
        assert q.allocate_ids(2) == [6, 7]
    with JobQueueDir(paths) as q:  # and again after a clean close
        assert q.allocate_ids(1) == [8]


def test_failed_serial_write_gives_out_no_ids(queue, paths, monkeypatch):
    queue.allocate_ids(2)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", broken)
    with pytest.raises(OSError):
        queue.allocate_ids(1)
    monkeypatch.undo()
    assert queue.serial() == 2
    assert queue.allocate_ids(1) == [3]


def test_serial_behind_existing_jobs_is_recovered(paths):
    """Never hand out an id whose job file (live or archived) exists."""
    with JobQueueDir(paths) as q:
        q.allocate_ids(3)
        q.write_job(make_job(3))
        finished = make_job(20007, status=SUCCESS, end=[5, 0])
        q.write_job(finished)
        assert q.archive_job(20007)
    serializer.write_file(os.path.join(paths.queue_dir, "serial"), b"1\n")
    with JobQueueDir(paths) as q:
        assert q.serial() == 20007
        assert q.allocate_ids(1) == [20008]


def test_empty_serial_after_a_crash_continues_after_the_job_files(paths):
    """The serial's data is not fsynced: a crash may leave it empty (or behind); the job files, durable before
    their jobs are acknowledged, keep their ids from being given out again."""
    with JobQueueDir(paths) as q:
        q.allocate_ids(4)
        q.write_job(make_job(4))
    serializer.write_file(os.path.join(paths.queue_dir, "serial"), b"")
    with JobQueueDir(paths) as q:
        assert q.allocate_ids(1) == [5]


def test_serial_is_written_in_place(queue, paths):
    """The serial is rewritten in its file, not replaced by a rename (which makes ext4 write the data out at
    once, in LuxiD's thread): the same inode throughout, no temporary file left."""
    serial_path = os.path.join(paths.queue_dir, "serial")
    queue.allocate_ids(1)
    inode = os.stat(serial_path).st_ino
    for _ in range(12):  # past 9 -> 10: the text grows by a digit
        queue.allocate_ids(1)
    assert os.stat(serial_path).st_ino == inode
    assert open(serial_path, "rb").read() == b"13\n"
    assert sorted(os.listdir(paths.queue_dir)) == ["archive", "lock", "serial", "version"]


def test_serial_text_longer_than_the_new_one_is_cut(paths):
    """A serial file with more than the number in it (written by something else): nothing of it stays after
    the new number."""
    os.makedirs(paths.queue_dir, exist_ok=True)
    with open(os.path.join(paths.queue_dir, "serial"), "wb") as handle:
        handle.write(b"7\n\n\n\n\n\n")
    with JobQueueDir(paths) as q:
        assert q.allocate_ids(1) == [8]
    assert open(os.path.join(paths.queue_dir, "serial"), "rb").read() == b"8\n"
    with JobQueueDir(paths) as q:
        assert q.allocate_ids(1) == [9]


def test_serial_of_nul_bytes_after_a_crash_continues_after_the_job_files(paths):
    """A file written in place whose data never reached the disk may read as NUL bytes after a crash: as an
    empty serial, the job files tell where to continue."""
    with JobQueueDir(paths) as q:
        q.allocate_ids(4)
        q.write_job(make_job(4))
    with open(os.path.join(paths.queue_dir, "serial"), "wb") as handle:
        handle.write(b"\0\0")
    with JobQueueDir(paths) as q:
        assert q.allocate_ids(1) == [5]


# --- job files ----------------------------------------------------------------------------


def test_write_and_read_job(queue, paths, recorder):
    job = make_job(queue.allocate_ids(1)[0])
    data = queue.write_job(job)
    path = os.path.join(paths.queue_dir, "job-1")
    assert queue.job_path(1) == path
    assert open(path, "rb").read() == data
    assert serializer.loads(data) == job.to_dict()
    assert mode_of(path) == 0o640
    assert recorder.writes[-1] == (path, data)
    again = queue.read_job(1)
    assert again is not None and again.to_dict() == job.to_dict()
    assert queue.read_job(2) is None
    assert queue.live_job_ids() == [1]
    job.ops[0].status = RUNNING
    queue.write_job(job, durable=False)
    assert queue.read_job(1).status == RUNNING


def test_load_live_jobs_skips_bad_files_without_deleting_them(queue, paths):
    for job_id in (1, 2, 5):
        queue.write_job(make_job(job_id))
    bad = {
        3: b"{not json",
        4: b'{"id": 4, "ops": "none"}',
        6: serializer.dumps(make_job(7).to_dict()),  # holds another job
        8: b"",
    }
    for job_id, content in bad.items():
        serializer.write_file(queue.job_path(job_id), content)
    for name in ("job-x", "job-09", ".job-5.123.tmp", "serial.bak"):
        serializer.write_file(os.path.join(paths.queue_dir, name), b"{}")
    jobs = queue.load_live_jobs()
    assert sorted(jobs) == [1, 2, 5]
    assert all(jobs[i].id == i for i in jobs)
    assert sorted(path for path, _why in queue.problems) == sorted(queue.job_path(i) for i in bad)
    for job_id in bad:
        assert os.path.exists(queue.job_path(job_id))
    assert queue.read_job(3) is None
    assert queue.live_job_ids() == [1, 2, 3, 4, 5, 6, 8]


def test_real_ganeti_queue_loads(tmp_path):
    paths = Paths(str(tmp_path))
    os.makedirs(os.path.dirname(paths.queue_dir))
    shutil.copytree(REAL_QUEUE, paths.queue_dir)
    for name in os.listdir(paths.queue_dir):
        os.chmod(os.path.join(paths.queue_dir, name), 0o640)
    os.chmod(paths.queue_dir, 0o700)
    with JobQueueDir(paths) as q:
        jobs = q.load_live_jobs()
        assert q.problems == []
        assert {i: j.status for i, j in jobs.items()} == {
            1838: ERROR,
            1885: SUCCESS,
            1886: SUCCESS,
            1887: SUCCESS,
            1888: SUCCESS,
            1889: SUCCESS,
            1890: ERROR,
            1891: SUCCESS,
            1892: SUCCESS,
        }
        # Its serial file says 1890 although jobs 1891 and 1892 exist.
        assert q.serial() == 1892
        assert q.allocate_ids(1) == [1893]
        assert q.archive_job(1838)
        assert os.path.exists(os.path.join(paths.queue_dir, "archive", "0", "job-1838"))
        assert q.read_job(1838).status == ERROR


# --- archive ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "job_id,bucket",
    [(0, "0"), (1, "0"), (9999, "0"), (10000, "1"), (10001, "1"), (19999, "1"), (20000, "2"), (123456, "12")],
)
def test_archive_paths_across_buckets(queue, paths, recorder, job_id, bucket):
    expected = os.path.join(paths.queue_dir, "archive", bucket, "job-%d" % job_id)
    assert queue.archive_path(job_id) == expected
    queue.write_job(make_job(job_id, status=SUCCESS, end=[10, 0]))
    assert queue.archive_job(job_id) is True
    assert os.path.exists(expected)
    assert not os.path.exists(queue.job_path(job_id))
    assert recorder.renames == [[(queue.job_path(job_id), expected)]]
    assert queue.live_job_ids() == []
    assert queue.read_job(job_id).id == job_id
    assert queue.archive_job(job_id) is False  # no longer live


def test_only_finalized_jobs_are_archived(queue, recorder):
    for job_id, status in ((1, QUEUED), (2, RUNNING), (3, CANCELED), (4, ERROR), (5, SUCCESS)):
        queue.write_job(make_job(job_id, status=status))
    assert queue.archive_job(1) is False
    assert queue.archive_job(2) is False
    assert queue.archive_job(99) is False
    assert recorder.renames == []
    assert queue.archive_jobs([1, 2, 3, 4, 5, 99]) == [3, 4, 5]
    assert len(recorder.renames) == 1 and [old for old, _new in recorder.renames[0]] == [
        queue.job_path(i) for i in (3, 4, 5)
    ]
    assert queue.live_job_ids() == [1, 2]


def test_unreadable_job_is_not_archived(queue):
    serializer.write_file(queue.job_path(4), b"garbage")
    assert queue.archive_job(4) is False
    assert os.path.exists(queue.job_path(4))


@pytest.mark.parametrize(
    "status,start,end,cutoff,expected",
    [
        (SUCCESS, [50, 0], [100, 0], 101.0, True),
        (SUCCESS, [50, 0], [100, 0], 100.0, False),  # not older than the cutoff
        (SUCCESS, [50, 0], [100, 500000], 100.4, False),  # microseconds count
        (ERROR, [50, 0], None, 60.0, True),  # no end: the start decides
        (CANCELED, None, None, 1e12, False),  # no timestamps: never by age
        (CANCELED, None, None, None, True),  # no age criterion: all finalized
        (RUNNING, [1, 0], None, 1e12, False),
        (QUEUED, None, None, None, False),
    ],
)
def test_archivable(status, start, end, cutoff, expected):
    job = make_job(1, status=status, start=start, end=end)
    assert jqueue.archivable(job, cutoff) is expected
    assert JobQueueDir.archivable(job, cutoff) is expected


# --- drain flag ---------------------------------------------------------------------------------


def test_drain_flag(queue, paths):
    drain = os.path.join(paths.queue_dir, "drain")
    assert not queue.is_drained()
    queue.set_drained(True)
    assert queue.is_drained()
    assert open(drain, "rb").read() == b""
    queue.set_drained(True)
    assert queue.is_drained()
    assert JobQueueDir(paths).is_drained()  # it is on disk, not in memory
    queue.set_drained(False)
    assert not queue.is_drained() and not os.path.exists(drain)
    queue.set_drained(False)
    assert not queue.is_drained()


# --- capacity ------------------------------------------------------------------------------------


def test_capacity():
    assert MAX_JOBS == 5000
    jqueue.check_capacity(0, 1)
    jqueue.check_capacity(4999, 1)
    jqueue.check_capacity(0, 5000)
    JobQueueDir.check_capacity(10, 10)
    for live, adding in ((5000, 1), (4999, 2), (0, 5001)):
        with pytest.raises(errors.JobQueueFull):
            jqueue.check_capacity(live, adding)
    assert issubclass(errors.JobQueueFull, errors.JobQueueError)
