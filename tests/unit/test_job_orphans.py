"""Job processes of a past mastership: found by their lock files and killed at a take-over,
and a job process whose node saw a newer master ends without writing (the bench's
"success without its effect": such a process reconnected to the node's next WConfD and
was answered from the recorded answers of the old mastership)."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from ganeti import serializer
from ganeti.ha import takeover
from ganeti.ha.epoch import write_epoch
from ganeti.jobs import orphans
from ganeti.jobs.process import EXIT_FENCED, exit_if_fenced, fenced_reason
from ganeti.paths import Paths

HOLD = ("import fcntl, sys, time\n"
        "f = open(sys.argv[1], 'a')\n"
        "fcntl.flock(f, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(120)\n")


@pytest.fixture
def paths(tmp_path):
    paths = Paths(str(tmp_path))
    paths.ensure_dirs()
    os.makedirs(paths.queue_dir, exist_ok=True)
    return paths


@pytest.fixture
def holder(paths):
    """A process holding job 7's lock file, as an orphaned job process does."""
    path = os.path.join(paths.lock_dir, "job_000007_1795961692077649066")
    process = subprocess.Popen([sys.executable, "-c", HOLD, path], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "held"
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_the_holders_of_job_lock_files_are_found_by_the_lock_table(paths, holder):
    open(os.path.join(paths.lock_dir, "job_000008_1"), "w").close()  # its process is gone: nobody holds it
    open(os.path.join(paths.lock_dir, "other-lock"), "w").close()
    assert orphans.job_lock_holders(paths) == {7: {holder.pid}}


def test_kill_orphans_kills_them_and_says_so(paths, holder):
    lines: list[str] = []
    assert orphans.kill_orphans(paths, lines.append) == [7]
    assert holder.wait(timeout=30) != 0
    assert lines == ["job 7: its process (pid %d), left running by an earlier mastership of this node, killed"
                     % holder.pid]
    assert orphans.kill_orphans(paths, lines.append) == []


def test_a_take_over_kills_the_orphans_and_forgets_the_old_wconfd_answers(paths, holder):
    """Before the fix the orphan lived on and wconfd-requests.data stayed: the orphan's resent
    config change was answered from it by the new WConfD, although the config taken over
    lacked the change."""
    serializer.write_file(paths.wconfd_requests, b'[["owner", [[12, {"serial": 3}]]]]')
    serializer.write_file(os.path.join(paths.queue_dir, "job-7"), orjson.dumps({
        "id": 7, "ops": [{"input": {"OP_ID": "OP_TAGS_SET"}, "status": "running"}],
        "livelock": os.path.join(paths.lock_dir, "job_000007_1"), "process_id": 1}))
    said: list[str] = []
    takeover._settle_local_state(paths, b"{}", said.append)
    assert holder.wait(timeout=30) != 0
    assert not os.path.exists(paths.wconfd_requests)
    assert len(said) == 1 and "job 7" in said[0]
    job = orjson.loads(serializer.read_file(os.path.join(paths.queue_dir, "job-7")))
    assert job["ops"][0]["status"] == "error" and job.get("process_id") is None


def test_a_job_process_whose_node_saw_a_newer_master_ends_without_writing(paths, capsys):
    exits: list[int] = []
    lock = os.path.join(paths.lock_dir, "job_000009_1")
    open(lock, "w").close()
    write_epoch(paths, 4)
    exit_if_fenced(paths, 9, 4, lock, exit=exits.append)  # its own master: it goes on
    exit_if_fenced(paths, 9, None, lock, exit=exits.append)  # a process of no master (tests, tools)
    assert exits == [] and fenced_reason(paths, 4) is None and os.path.exists(lock)
    write_epoch(paths, 5)
    exit_if_fenced(paths, 9, 4, lock, exit=exits.append)
    assert exits == [EXIT_FENCED] and not os.path.exists(lock)
    assert "job 9: stopped without recording anything: this node has seen master epoch 5 since this job started" \
        " under epoch 4" in capsys.readouterr().err
