"""Master failover decisions and the noded procedures behind them."""

from __future__ import annotations

import os

import orjson
import pytest
from treq.testing import StubTreq
from twisted.internet.task import Clock

from ganeti import serializer
from ganeti.ha.failover import (
    FAIL,
    RETRY,
    START,
    FailoverRefused,
    NodeState,
    check_candidate,
    master_vote,
    newest_state,
    startup_vote,
)
from ganeti.noded.failure import RpcFailure
from ganeti.noded.master import master_ip_command
from ganeti.noded.procedures import NodeProcedures
from ganeti.noded.server import NodeRpcResource
from ganeti.rpc import wire


def test_check_candidate_refuses_the_master_and_non_candidates():
    check_candidate("n2", "n1", ["n1", "n2"])
    with pytest.raises(FailoverRefused, match="n1 is already the master"):
        check_candidate("n1", "n1", ["n1", "n2"])
    with pytest.raises(FailoverRefused, match="master candidates is:\nn2$"):
        check_candidate("n3", "n1", ["n1", "n2"])


def test_master_vote():
    master_vote({"n1": "n1", "n2": "n1", "n3": None}, "n1")
    with pytest.raises(FailoverRefused, match="Unhealthy nodes: \\['n2', 'n3'\\]"):
        master_vote({"n1": "n1", "n2": None, "n3": None}, "n1")
    with pytest.raises(FailoverRefused, match="I believe the master is n2 but the other nodes voted n1"):
        master_vote({"n1": "n1", "n2": "n1", "n3": "n2"}, "n2")


def test_startup_vote():
    assert startup_vote({"a": "a", "b": "a", "c": None}, "a") == START
    assert startup_vote({"a": "a", "b": None, "c": None}, "a") == RETRY
    assert startup_vote({"a": "a", "b": "b", "c": "b"}, "a") == FAIL
    assert startup_vote({"a": "a", "b": None}, "a") == RETRY
    assert startup_vote({"a": "a"}, "a") == START


def state(epoch=0, config=1, queue=1, **jobs):
    return NodeState(epoch, config, queue, {k.replace("_", "-"): v for k, v in jobs.items()})


def test_newest_state_fetches_what_another_candidate_holds_newer():
    plan = newest_state("n2", {
        "n2": state(1, 5, 10, job_9="success", job_10="queued"),
        "n3": state(3, 7, 11, job_9="success", job_10="running", job_11="queued"),
        "n4": state(0, 6, 9, job_10="success"),
    })
    assert plan.config_from == "n3" and plan.serial_from == "n3"
    assert plan.jobs == {"n3": ["job-11"], "n4": ["job-10"]}
    assert plan.epoch == 4


def test_newest_state_keeps_ours_when_nobody_is_ahead():
    plan = newest_state("n2", {"n2": state(2, 7, 11, job_1="error"), "n3": state(2, 7, 11, job_1="running")})
    assert (plan.config_from, plan.serial_from, plan.jobs, plan.epoch) == (None, None, {}, 3)


def test_master_ip_command():
    params = {"ip": "192.0.2.10", "netmask": 24, "netdev": "eth0"}
    assert master_ip_command("add", params) == ["ip", "address", "add", "192.0.2.10/24", "dev", "eth0",
                                                "label", "eth0:0"]
    assert master_ip_command("del", params) == ["ip", "address", "del", "192.0.2.10/24", "dev", "eth0"]
    for netdev in (None, "", "none"):
        assert master_ip_command("add", dict(params, netdev=netdev)) is None
    for bad in ({"netdev": "eth0; rm"}, {"ip": "nope"}, {"netmask": 33}, {"netmask": True}):
        with pytest.raises(RpcFailure):
            master_ip_command("add", dict(params, **bad))


class InlineClock(Clock):
    """A clock whose thread pool runs work at once (with L{inline_threads})."""

    def getThreadPool(self):
        return None


@pytest.fixture
def inline_threads(monkeypatch):
    from twisted.internet import defer, threads

    monkeypatch.setattr(threads, "deferToThreadPool", lambda _reactor, _pool, f, *a: defer.maybeDeferred(f, *a))


def call(paths, procedure, *args):
    stub = StubTreq(NodeRpcResource(NodeProcedures(paths, InlineClock())))
    d = stub.request("POST", "https://node/" + procedure, data=wire.encode_request(list(args)))
    stub.flush()
    out = []
    d.addCallback(lambda response: response.content()).addBoth(out.append)
    stub.flush()
    return serializer.loads(out[0])


def test_failover_read_hands_out_only_config_and_queue_files(root, inline_threads):
    root.ensure_dirs()
    os.makedirs(root.queue_dir, exist_ok=True)
    serializer.write_file(root.config_data, b'{"serial_no": 3}')
    serializer.write_file(os.path.join(root.queue_dir, "job-4"), b"{}")
    ok, files = call(root, "failover_read", ["config.data", "job-4", "job-5"])
    assert ok and wire.decompress(files["config.data"]) == b'{"serial_no": 3}'
    assert wire.decompress(files["job-4"]) == b"{}" and files["job-5"] is None
    for bad in ("../server.pem", "server.pem", "/etc/passwd", "archive/../../x"):
        ok, message = call(root, "failover_read", [bad])
        assert not ok and "refused" in message


def test_failover_status(root, inline_threads):
    root.ensure_dirs()
    os.makedirs(root.queue_dir, exist_ok=True)
    serializer.write_file(root.config_data, b'{"serial_no": 3}')
    serializer.write_file(os.path.join(root.queue_dir, "serial"), b"12\n")
    serializer.write_file(os.path.join(root.queue_dir, "job-12"), b'{"ops": [{"status": "queued"}]}')
    from ganeti.ha import epoch

    epoch.write_epoch(root, 4)
    ok, status = call(root, "failover_status")
    assert ok and status["epoch"] == 4 and status["config_serial"] == 3 and status["queue_serial"] == 12
    assert list(status["jobs"]) == ["job-12"]


def test_node_stop_master_kills_the_job_processes_left_running(tmp_path):
    """The new master ended their jobs in error: each job process still
    holding its lock file here is killed; a dead one, or a lock file its
    job file does not name, is left alone."""
    import signal

    from ganeti import lockfile
    from ganeti.noded.master import stop_job_processes
    from ganeti.paths import Paths

    paths = Paths(str(tmp_path))
    paths.ensure_dirs()
    os.makedirs(paths.queue_dir, exist_ok=True)

    def job(job_id: int, lock: str, pid: int) -> str:
        path = os.path.join(paths.lock_dir, lock)
        serializer.write_file(os.path.join(paths.queue_dir, "job-%d" % job_id),
                              orjson.dumps({"id": job_id, "livelock": path, "process_id": pid}))
        return path

    held = lockfile.hold(job(7, "job_000007_1", os.getpid()))  # a running job process: this one
    try:
        open(job(8, "job_000008_1", os.getpid()), "w").close()  # its process is gone: nobody holds it
        job(9, "job_000009_2", os.getpid())
        other = lockfile.hold(os.path.join(paths.lock_dir, "job_000009_1"))  # not the lock job 9 names
        killed: list[tuple[int, int]] = []
        lines: list[str] = []
        assert stop_job_processes(paths, lines.append, lambda pid, signum: killed.append((pid, signum))) == [7]
        lockfile.release(other)
    finally:
        lockfile.release(held)
    assert killed == [(os.getpid(), signal.SIGKILL)]
    assert lines == ["job 7: its process (pid %d) killed: the job ended in error on the new master" % os.getpid()]
