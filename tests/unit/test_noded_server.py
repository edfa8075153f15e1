"""noded's resource and procedures through treq's StubTreq (no sockets)."""

from __future__ import annotations

import os
import stat

import pytest
from treq.testing import StubTreq
from twisted.internet.task import Clock

from ganeti import serializer, ssconf
from ganeti.noded.procedures import NodeProcedures
from ganeti.noded.server import NodeRpcResource
from ganeti.rpc import wire


class Node:
    def __init__(self, paths):
        paths.ensure_dirs()
        self.paths = paths
        self.clock = Clock()
        self.stopped = []
        self.procs = NodeProcedures(paths, self.clock, shutdown=lambda: self.stopped.append(True))
        self.stub = StubTreq(NodeRpcResource(self.procs))

    def post(self, procedure, body, method="POST"):
        d = self.stub.request(method, "https://node/" + procedure, data=body)
        self.stub.flush()
        response = self.successful(d)
        content = self.successful(response.content())
        return response.code, serializer.loads(content)

    def call(self, procedure, *args):
        return self.post(procedure, wire.encode_request(list(args)))

    @staticmethod
    def successful(d):
        out = []
        d.addBoth(out.append)
        assert out, "deferred did not fire"
        if hasattr(out[0], "raiseException"):
            out[0].raiseException()
        return out[0]

    def snapshot(self):
        found = {}
        for base, _dirs, names in os.walk(self.paths.root):
            for name in names:
                path = os.path.join(base, name)
                found[path] = open(path, "rb").read()
        return found


@pytest.fixture
def node(root):
    return Node(root)


def test_version(node):
    assert node.call("version") == (200, [True, wire.PROTOCOL_VERSION])


def test_unknown_procedure_and_bad_requests_change_nothing(node):
    before = node.snapshot()
    assert node.call("no_such_thing")[0] == 404
    assert node.call("version/extra")[0] == 404
    assert node.call("..")[0] == 404
    assert node.post("version", b"[]", method="GET") == (400, [False, "Only POST is supported"])
    code, (ok, msg) = node.post("upload_file", b"{not json")
    assert (code, ok) == (400, False) and "JSON" in msg
    code, (ok, msg) = node.post("upload_file", b'{"a": 1}')
    assert (code, ok) == (400, False)
    code, (ok, msg) = node.call("upload_file")
    assert (code, ok) == (400, False) and "Bad arguments" in msg
    code, (ok, _msg) = node.call("version", 1, 2)
    assert (code, ok) == (400, False)
    assert node.snapshot() == before


@pytest.mark.parametrize("body", [b"", b"   ", b"\n"])
def test_empty_body_is_a_bad_request(node, body):
    """Even a procedure without arguments needs "[]"; a blank body runs nothing."""
    before = node.snapshot()
    for procedure in ("version", "node_leave_cluster"):
        code, (ok, msg) = node.post(procedure, body)
        assert (code, ok) == (400, False) and "Empty request body" in msg
    assert node.snapshot() == before
    assert node.post("version", b"[]") == (200, [True, wire.PROTOCOL_VERSION])


def test_upload_allowed_file_atomically_with_mode(node):
    data = b'{"serial_no": 7}' * 100
    details = wire.file_details("/var/lib/ganeti/config.data", data, mode=0o640, atime=1000.0, mtime=2000.0)
    assert node.call("upload_file", details) == (200, [True, None])
    assert open(node.paths.config_data, "rb").read() == data
    st = os.stat(node.paths.config_data)
    assert stat.S_IMODE(st.st_mode) == 0o640 and st.st_mtime == 2000.0
    assert not [n for n in os.listdir(node.paths.data_dir) if n.endswith(".tmp")]


@pytest.mark.parametrize("vpath", ["/etc/passwd", "/var/lib/ganeti/../../../tmp/x", "/var/lib/ganeti/client.pem", "relative"])
def test_upload_outside_the_allow_list_is_refused(node, vpath):
    before = node.snapshot()
    code, (ok, msg) = node.call("upload_file", wire.file_details(vpath, b"evil"))
    assert (code, ok) == (200, False) and "refused" in msg
    assert node.snapshot() == before


def test_upload_bad_mode_or_data_is_refused(node):
    before = node.snapshot()
    assert node.call("upload_file", wire.file_details("/var/lib/ganeti/config.data", b"x", mode=0o4755))[1][0] is False
    assert node.call("upload_file", ["/var/lib/ganeti/config.data", [7, "x"], 0o640, "", "", None, None])[1][0] is False
    assert node.snapshot() == before


def test_write_ssconf_files(node):
    assert node.call("write_ssconf_files", {"master_node": ["node1.test"], "node_list": "a\nb"}) == (200, [True, None])
    assert open(node.paths.ssconf("master_node")).read() == "node1.test\n"
    assert node.call("master_node_name") == (200, [True, "node1.test"])
    before = node.snapshot()
    code, (ok, msg) = node.call("write_ssconf_files", {"master_node": ["x"], "../../etc/passwd": ["y"]})
    assert not ok and "Unknown ssconf key" in msg
    assert node.snapshot() == before


def test_written_ssconf_tells_the_heartbeat(node):
    """A failover names the new master in ssconf: the heartbeat looks for it at once (not if refused)."""
    told = []
    node.procs.ssconf_written = lambda: told.append(open(node.paths.ssconf("master_node")).read())
    node.call("write_ssconf_files", {"x": ["y"]})
    assert told == []
    assert node.call("write_ssconf_files", {"master_node": ["node3.test"]})[1][0] is True
    assert told == ["node3.test\n"]


def test_master_node_name_without_ssconf(node):
    assert node.call("master_node_name")[1][0] is False


def test_jobqueue_update_rename_purge(node):
    queue = node.paths.queue_dir
    assert node.call("jobqueue_update", "/var/lib/ganeti/queue/job-1", wire.compress(b"{}"))[1] == [True, None]
    assert node.call("jobqueue_update", "/var/lib/ganeti/queue/job-2", wire.compress(b"x" * 5000))[1] == [True, None]
    assert open(os.path.join(queue, "job-2"), "rb").read() == b"x" * 5000
    pairs = [["/var/lib/ganeti/queue/job-1", "/var/lib/ganeti/queue/archive/0/job-1"],
             ["/var/lib/ganeti/queue/job-9", "/var/lib/ganeti/queue/archive/0/job-9"]]
    code, (ok, result) = node.call("jobqueue_rename", pairs)
    assert ok and result[0] is None and "job-9" in result[1]
    assert os.path.exists(os.path.join(queue, "archive", "0", "job-1"))
    open(os.path.join(queue, "lock"), "w").close()
    assert node.call("jobqueue_purge")[1] == [True, None]
    assert os.listdir(queue) == ["lock"]


def test_jobqueue_drain_flag_list_and_remove(node):
    """The replicas' own procedures: drain flag, listing with digests, removal."""
    import hashlib

    queue = node.paths.queue_dir
    job = b'{"id": 3, "ops": [], "received_timestamp": null, "start_timestamp": null, "end_timestamp": null}'
    assert node.call("jobqueue_update", "/var/lib/ganeti/queue/job-3", wire.compress(job))[1] == [True, None]
    assert node.call("jobqueue_update", "/var/lib/ganeti/queue/archive/0/job-2", wire.compress(b"old"))[1] == [True, None]
    assert node.call("jobqueue_set_drain_flag", True)[1] == [True, None]
    assert os.path.exists(os.path.join(queue, "drain"))
    ok, listing = node.call("jobqueue_list")[1]
    assert ok
    assert listing["job-3"][0] == hashlib.sha1(job).hexdigest()
    assert listing["archive/0/job-2"] == [hashlib.sha1(b"old").hexdigest(), None]
    assert listing["drain"] == [hashlib.sha1(b"").hexdigest(), None]
    assert node.call("jobqueue_set_drain_flag", False)[1] == [True, None]
    assert node.call("jobqueue_set_drain_flag", False)[1] == [True, None]  # already off: fine
    assert node.call("jobqueue_remove", ["/var/lib/ganeti/queue/archive/0/job-2", "/var/lib/ganeti/queue/job-9"])[1] \
        == [True, None]
    assert sorted(node.call("jobqueue_list")[1][1]) == ["job-3"]
    assert node.call("jobqueue_set_drain_flag", "yes")[1][0] is False


def test_jobqueue_update_many_writes_every_file_or_none(node):
    """Several queue files in one call (the master's batches): each written;
    one refused path refuses the whole call and writes nothing."""
    queue = node.paths.queue_dir
    files = [["/var/lib/ganeti/queue/job-4", wire.compress(b"x" * 5000)],
             ["/var/lib/ganeti/queue/serial", wire.compress(b"4\n")],
             ["/var/lib/ganeti/queue/archive/0/job-1", wire.compress(b"old")]]
    assert node.call("jobqueue_update_many", files)[1] == [True, None]
    assert open(os.path.join(queue, "job-4"), "rb").read() == b"x" * 5000
    assert open(os.path.join(queue, "serial"), "rb").read() == b"4\n"
    assert open(os.path.join(queue, "archive", "0", "job-1"), "rb").read() == b"old"
    before = node.snapshot()
    bad = [["/var/lib/ganeti/queue/job-5", wire.compress(b"new")], ["/var/lib/ganeti/config.data", wire.compress(b"x")]]
    ok, message = node.call("jobqueue_update_many", bad)[1]
    assert ok is False and "jobqueue_update_many refused" in message
    assert node.call("jobqueue_update_many", [["/var/lib/ganeti/queue/job-5"]])[1][0] is False
    assert node.call("jobqueue_update_many", "job-5")[1][0] is False
    assert node.call("jobqueue_update_many", [["/var/lib/ganeti/queue/job-5", wire.compress(b"new")]], "no")[1][0] \
        is False
    assert node.snapshot() == before
    # a running job's version: written (atomically), not fsynced
    assert node.call("jobqueue_update_many", [["/var/lib/ganeti/queue/job-5", wire.compress(b"run")]], False)[1] \
        == [True, None]
    assert open(os.path.join(queue, "job-5"), "rb").read() == b"run"


def test_jobqueue_update_many_replaces_nothing_when_an_fsync_fails(node, monkeypatch):
    """Every file's data is fsynced (side by side) before any replaces the old one: a failed fsync leaves the
    old files, and no temporary file."""
    from ganeti import kernelsync

    queue = node.paths.queue_dir
    assert node.call("jobqueue_update_many", [["/var/lib/ganeti/queue/serial", wire.compress(b"4\n")]])[1] \
        == [True, None]
    synced: list[int] = []

    def failing(fds):
        synced.extend(fds)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(kernelsync, "fsync_together", failing)
    files = [["/var/lib/ganeti/queue/job-6", wire.compress(b"six")], ["/var/lib/ganeti/queue/serial", wire.compress(b"6\n")]]
    ok, message = node.call("jobqueue_update_many", files)[1]
    assert ok is False and "Input/output error" in message
    assert len(synced) == 2, "both files' data in one go"
    assert sorted(os.listdir(queue)) == ["serial"] and open(os.path.join(queue, "serial"), "rb").read() == b"4\n"


@pytest.mark.parametrize("name", ["/var/lib/ganeti/config.data", "/var/lib/ganeti/queue/../config.data", "/var/lib/ganeti/queue/lock", "/etc/x"])
def test_jobqueue_refuses_paths_outside_the_queue(node, name):
    before = node.snapshot()
    assert node.call("jobqueue_update", name, wire.compress(b"x"))[1][0] is False
    assert node.call("jobqueue_rename", [["/var/lib/ganeti/queue/job-1", name]])[1][0] is False
    assert node.call("jobqueue_remove", [name])[1][0] is False
    assert node.snapshot() == before


def test_node_info_reads_the_machine(node):
    code, (ok, (boot_id, storage, hv)) = node.call("node_info", [["file", "/srv/ganeti/file-storage", []]], [["fake", {}]])
    assert ok and storage[0]["storage_size"] > 0 and storage[0]["storage_free"] >= 0
    assert hv[0]["memory_total"] > 0 and hv[0]["cpu_total"] >= 1
    assert node.call("node_info", [["lvm-vg", "xenvg", []]], [])[1][0] is False
    assert node.call("node_info", [["file", "/../../etc", []]], [])[1][0] is False


def test_node_verify_files_and_ssconf(node):
    ssconf.write_files(node.paths, {"cluster_name": ["c.test"], "master_node": ["n1"]})
    good = wire.sha1_hex(ssconf.render(["c.test"]))
    code, (ok, result) = node.call(
        "node_verify",
        {"filelist": ["/var/lib/ganeti/ssconf_cluster_name", "/var/lib/ganeti/config.data"],
         "ssconf": {"cluster_name": good, "master_node": "0" * 40, "node_list": None},
         "version": None, "unknown-check": 1},
        "c.test", {},
    )
    assert ok
    assert result["filelist"] == {"/var/lib/ganeti/ssconf_cluster_name": good}
    assert result["ssconf"] == {"master_node": wire.sha1_hex(b"n1\n"), "node_list": None}
    assert result["version"][0] == wire.PROTOCOL_VERSION
    assert "unknown-check" not in result


def test_test_delay_waits_on_the_clock(node):
    d = node.stub.request("POST", "https://node/test_delay", data=b"[2.5]")
    node.stub.flush()
    out = []
    d.addCallback(out.append)
    assert not out
    node.clock.advance(2.5)
    node.stub.flush()
    assert out and out[0].code == 200
    assert node.call("test_delay", -1)[1][0] is False


def test_node_leave_cluster_removes_cluster_files_and_stops(node):
    ssconf.write_files(node.paths, {"master_node": ["n1"]})
    serializer.write_file(node.paths.config_data, b"{}")
    assert node.call("node_leave_cluster", False)[1] == [True, None]
    assert not os.path.exists(node.paths.config_data) and not os.path.exists(node.paths.ssconf("master_node"))
    node.clock.advance(1)
    assert node.stopped == [True]


class _ManualPool:
    """A thread pool stand-in: work runs when the test says so, in any order."""

    def __init__(self):
        self.pending = []

    def getThreadPool(self):
        return self

    def run(self, index=0):
        function, d = self.pending.pop(index)
        d.callback(function())


def test_queue_writes_of_one_file_stay_in_order(tmp_path, monkeypatch):
    """Replica writes run off the reactor thread, but a later write of the
    same job file never overtakes an earlier one; other files go on."""
    from twisted.internet import defer, threads

    from ganeti.paths import Paths

    pool = _ManualPool()

    def to_pool(reactor, threadpool, function):
        d = defer.Deferred()
        pool.pending.append((function, d))
        return d

    monkeypatch.setattr(threads, "deferToThreadPool", to_pool)
    paths = Paths(str(tmp_path))
    paths.ensure_dirs()
    procs = NodeProcedures(paths, pool)
    first = procs.jobqueue_update("/var/lib/ganeti/queue/job-1", wire.compress(b"first"))
    second = procs.jobqueue_update("/var/lib/ganeti/queue/job-1", wire.compress(b"second"))
    other = procs.jobqueue_update("/var/lib/ganeti/queue/job-2", wire.compress(b"other"))
    assert len(pool.pending) == 2  # job-1's second write waits for its first
    pool.run(1)  # job-2 first: it does not wait for job-1
    assert other.called and not first.called
    pool.run(0)
    assert first.called and len(pool.pending) == 1
    pool.run(0)
    assert second.called
    with open(os.path.join(paths.queue_dir, "job-1"), "rb") as handle:
        assert handle.read() == b"second"
    assert procs._queue_locks == {}
    # a batch waits for the earlier writes of any of its files
    single = procs.jobqueue_update("/var/lib/ganeti/queue/job-2", wire.compress(b"single"))
    batch = procs.jobqueue_update_many([["/var/lib/ganeti/queue/job-3", wire.compress(b"three")],
                                        ["/var/lib/ganeti/queue/job-2", wire.compress(b"batch")]])
    assert len(pool.pending) == 1
    pool.run(0)
    assert single.called and not batch.called
    pool.run(0)
    assert batch.called
    with open(os.path.join(paths.queue_dir, "job-2"), "rb") as handle:
        assert handle.read() == b"batch"
    assert procs._queue_locks == {}


def test_node_verify_disk_files(node):
    """Missing files among those the master expects, and orphan files under
    the storage directories it asks about, both cluster-wide paths."""
    base = node.paths.file_storage_dir
    os.makedirs(os.path.join(base, "web1", "sub"))
    for name in ("web1/disk0", "web1/sub/stray", "old/disk0"):
        os.makedirs(os.path.dirname(os.path.join(base, name)), exist_ok=True)
        open(os.path.join(base, name), "wb").close()
    os.symlink("/etc/passwd", os.path.join(base, "web1", "link"))
    virtual = "/" + os.path.relpath(base, node.paths.root)
    check = {"present": [virtual + "/web1/disk0", virtual + "/web1/disk1"], "known": [virtual + "/old/disk0"],
             "scan": ["file", "sharedfile"]}
    code, (ok, result) = node.call("node_verify", {wire.NV_DISK_FILES: check}, "c.test", {})
    assert (code, ok) == (200, True)
    with open(os.path.join(base, "web1", "disk0"), "wb") as handle:
        handle.truncate(3 * 1024 * 1024)
    code, (ok, result) = node.call("node_verify", {wire.NV_DISK_FILES: check}, "c.test", {})
    assert result[wire.NV_DISK_FILES] == {"missing": [virtual + "/web1/disk1"],
                                          "orphans": [virtual + "/web1/sub/stray"],
                                          "sizes": {virtual + "/web1/disk0": 3}}
    code, (ok, result) = node.call("node_verify", {wire.NV_DISK_FILES: {"present": ["relative"]}}, "c.test", {})
    assert not ok and "absolute paths" in result


def test_blockdev_getdimensions(node):
    base = node.paths.file_storage_dir
    virtual = "/" + os.path.relpath(base, node.paths.root)
    disk = {"dev_type": "file", "logical_id": ["loop", virtual + "/web1/disk0"], "size": 2, "uuid": "d0",
            "iv_name": "disk/0", "mode": "rw", "params": {}}
    assert node.call("blockdev_create", disk, 2, "web1", True, "", False)[1][0]
    gone = dict(disk, logical_id=["loop", virtual + "/web1/disk1"])
    assert node.call("blockdev_getdimensions", [disk, gone]) == (200, [True, [[2 * 1024 * 1024, None], None]])


def test_node_verify_instance_list(node):
    code, (ok, result) = node.call("node_verify", {"instancelist": ["fake"]}, "c.test", {})
    assert (code, ok, result["instancelist"]) == (200, True, [])


def test_demote_is_refused_on_the_master_and_while_master_daemons_run(node):
    import fcntl

    from ganeti import daemons

    daemons.write_node_identity(node.paths, "n1", "192.0.2.1")
    ssconf.write_files(node.paths, {"master_node": ["n1"]})
    code, (ok, msg) = node.call("node_demote_from_mc")
    assert not ok and "ssconf status shows I'm the master node, will not demote" in msg
    ssconf.write_files(node.paths, {"master_node": ["n2"]})
    with open(node.paths.pid_file("ganeti-wconfd"), "w") as held:  # a running WConfD holds its pid file
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("4242")
        held.flush()
        code, (ok, msg) = node.call("node_demote_from_mc")
    assert not ok and msg.endswith("ganeti-wconfd running here, will not demote"), msg


def test_promote_needs_the_rapi_certificate(node):
    code, (ok, msg) = node.call("node_promote_to_mc")
    assert not ok and msg == "no RAPI certificate at %s; cannot start ganeti-rapi" % node.paths.rapi_pem
    assert not os.path.exists(node.paths.pid_file("ganeti-rapi"))


def test_node_leave_cluster_stops_confd_mond_and_rapi(node, monkeypatch):
    """As Ganeti's LeaveCluster, the node that left stops its confd and MonD
    (and RAPI, on a candidate); the answer waits for them."""
    from twisted.internet import defer, threads

    from ganeti import daemons

    running = {"ganeti-confd": 41, "ganeti-mond": 42, "ganeti-noded": 40}
    stopped, pool = [], _ManualPool()
    monkeypatch.setattr(daemons, "running_pid", lambda paths, spec: running.get(spec.name))
    monkeypatch.setattr(daemons, "stop", lambda paths, names, timeout, out: stopped.extend(names))

    def to_pool(reactor, threadpool, function):
        d = defer.Deferred()
        pool.pending.append((function, d))
        return d

    monkeypatch.setattr(threads, "deferToThreadPool", to_pool)
    node.clock.getThreadPool = lambda: pool
    d = defer.ensureDeferred(defer.maybeDeferred(node.procs.node_leave_cluster, False))
    assert not d.called and not stopped
    pool.run()
    assert stopped == ["ganeti-confd", "ganeti-mond"]
    assert d.called
