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


# --- the fork server's spare job process ------------------------------------------------------------


def _children(pid):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as handle:
                    data = handle.read()
            except OSError:
                continue
            if int(data[data.rindex(")") + 2:].split()[1]) == pid:
                found.append(int(entry))
    return found


def _wait_for(predicate, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


class _ForkServer:
    """A fork server started as LuxiD starts it (fd 3: its control socket, stdout: its reports)."""

    def __init__(self, root, *options):
        import socket

        os.makedirs(root.lock_dir, exist_ok=True)
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        high = os.dup(theirs.fileno())
        theirs.close()
        code = "import os, sys; os.dup2(%d, 3); os.close(%d); from ganeti.luxid import forkserver; " \
               "sys.exit(forkserver.main(['--root', %r, *%r]))" % (high, high, root.root, list(options))
        self.proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=[high], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        os.close(high)
        #: the spares reported so far ({"spare": pid}), and those retired ({"retired": pid})
        self.spares = []
        self.retired = []

    def spawn(self, job_id, lockfile=None):
        """Ask for job C{job_id} (its lock file named C{lockfile}); its pipes (ours: from the job, to the
        job) and the reported pid."""
        import socket

        to_parent_r, to_parent_w = os.pipe()
        from_parent_r, from_parent_w = os.pipe()
        request = {"job": job_id, **({"lockfile": lockfile} if lockfile else {})}
        socket.send_fds(self.control, [json.dumps(request).encode()], [to_parent_w, from_parent_r])
        os.close(to_parent_w)
        os.close(from_parent_r)
        report = self.report()
        assert report["spawned"] == job_id, report
        return to_parent_r, from_parent_w, report["pid"]

    def report(self):
        """The next report that is not a spare's (those go to L{spares} and L{retired})."""
        while True:
            message = json.loads(self.proc.stdout.readline())
            if set(message) == {"spare"}:
                self.spares.append(message["spare"])
            elif set(message) == {"retired"}:
                self.retired.append(message["retired"])
            else:
                return message


def test_the_fork_server_hands_a_job_to_its_spare_and_never_reports_a_spare(root):
    """A spare, forked ahead and reported as one, runs the next job with the same handshake (its own lock
    file, at the path LuxiD named, nothing run without the confirmation); a spare that dies without a job
    is not reported as a job's end, and the job is then forked; the spares end with the fork server."""
    server = _ForkServer(root)
    try:
        _wait_for(lambda: len(_children(server.proc.pid)) == 1, "a spare forked ahead")
        (spare,) = _children(server.proc.pid)
        named = os.path.join(root.lock_dir, "job_000007_42")
        from_job, to_job, pid = server.spawn(7, named)
        assert pid == spare and server.spares == [spare]
        message = first_message(from_job)
        assert message == {"lockfile": named, "pid": spare}, message
        os.close(to_job)  # LuxiD went away before confirming
        assert server.report() == {"exited": spare, "job": 7, "code": 3, "signal": None}
        assert not os.path.exists(message["lockfile"]) and not os.path.exists(os.path.join(root.queue_dir, "job-7"))
        os.close(from_job)

        _wait_for(lambda: [p for p in _children(server.proc.pid) if p != spare], "the next spare")
        (second,) = [p for p in _children(server.proc.pid) if p != spare]
        os.kill(second, 9)
        _wait_for(lambda: not os.path.exists("/proc/%d" % second), "the spare reaped")
        # its death is not reported: the next report is job 8's (forked; a lock file of another job's
        # name is not taken)
        from_job, to_job, pid = server.spawn(8, os.path.join(root.lock_dir, "job_000007_43"))
        assert pid != second and server.spares == [spare, second]
        message = first_message(from_job)
        assert message["pid"] == pid and message["lockfile"].startswith(root.lock_dir + "/job_000008_"), message
        os.close(to_job)
        assert server.report() == {"exited": pid, "job": 8, "code": 3, "signal": None}
        os.close(from_job)
    finally:
        server.control.close()
        assert server.proc.wait(timeout=60) == 0
    _wait_for(lambda: not _children(server.proc.pid), "no spare left")


def test_an_idle_spare_is_retired_and_the_next_job_forked(root):
    """A spare not given a job within --spare-idle seconds is retired (reported, and it exits without a job's
    end being reported); the next job is forked, with its own lock file, and a spare is forked after it."""
    server = _ForkServer(root, "--spare-idle", "0.5")
    try:
        spare = json.loads(server.proc.stdout.readline())["spare"]
        assert json.loads(server.proc.stdout.readline()) == {"retired": spare}
        _wait_for(lambda: spare not in _children(server.proc.pid), "the retired spare gone")
        assert _children(server.proc.pid) == []
        from_job, to_job, pid = server.spawn(9, os.path.join(root.lock_dir, "job_000009_1"))
        assert pid != spare
        message = first_message(from_job)
        assert message["pid"] == pid and message["lockfile"].startswith(root.lock_dir + "/job_000009_"), message
        os.close(to_job)
        assert server.report() == {"exited": pid, "job": 9, "code": 3, "signal": None}
        os.close(from_job)
        assert len(server.spares) == 1 and server.spares[0] != spare, "a spare forked after the job"
    finally:
        server.control.close()
        assert server.proc.wait(timeout=60) == 0
    _wait_for(lambda: not _children(server.proc.pid), "no spare left")
