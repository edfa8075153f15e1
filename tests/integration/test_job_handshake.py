"""The job process's side of the handshake, driven over real pipes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from ganeti.jobs import channel


def start_job_process(root, *extra):
    to_parent_r, to_parent_w = os.pipe()
    from_parent_r, from_parent_w = os.pipe()
    os.makedirs(root.lock_dir, exist_ok=True)

    def child_fds():
        os.dup2(to_parent_w, channel.TO_PARENT_FD)
        os.dup2(from_parent_r, channel.FROM_PARENT_FD)

    proc = subprocess.Popen(
        [sys.executable, "-m", "ganeti.jobs", "7", "--root", root.root, *extra],
        preexec_fn=child_fds,
        pass_fds=(channel.TO_PARENT_FD, channel.FROM_PARENT_FD, to_parent_w, from_parent_r),
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(to_parent_w)
    os.close(from_parent_r)
    return proc, to_parent_r, from_parent_w


def first_message(fd):
    return channel.read_blocking(fd, 30)


def test_child_sends_its_held_lock_file_then_exits_when_luxid_goes_away(root):
    proc, from_child, to_child = start_job_process(root)
    message = first_message(from_child)
    path = message["lockfile"]
    assert message["pid"] == proc.pid and path.startswith(root.lock_dir + "/job_000007_")
    from ganeti.lockfile import is_free as owner_is_dead

    assert not owner_is_dead(path), "the child must hold its lock file"
    os.close(to_child)  # LuxiD died before confirming
    assert proc.wait(timeout=30) == 3
    assert "not confirmed" in proc.stderr.read()
    assert not os.path.exists(path), "an unconfirmed child removes its lock file"
    assert not os.path.exists(os.path.join(root.queue_dir, "job-7")), "nothing ran"
    os.close(from_child)


def test_child_gives_up_when_the_confirmation_never_comes(root):
    proc, from_child, to_child = start_job_process(root, "--confirm-timeout", "0.5")
    path = first_message(from_child)["lockfile"]
    started = time.monotonic()
    assert proc.wait(timeout=30) == 3
    assert time.monotonic() - started < 10
    assert not os.path.exists(path)
    os.close(to_child)
    os.close(from_child)


def test_a_wrong_answer_is_not_a_confirmation(root):
    proc, from_child, to_child = start_job_process(root)
    first_message(from_child)
    os.write(to_child, json.dumps({"confirm": "maybe"}).encode() + b"\n")
    assert proc.wait(timeout=30) == 3
    os.close(to_child)
    os.close(from_child)
