"""noded's instance procedures with the fake hypervisor, in temporary roots (no reactor)."""

from __future__ import annotations

import inspect
import os

import attrs
import pytest
from treq.testing import StubTreq
from twisted.internet import defer
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from ganeti import serializer, ssconf
from ganeti.backend import hypervisor as hv
from ganeti.backend import osapi
from ganeti.config.bootstrap import initial_config
from ganeti.noded.failure import RpcFailure
from ganeti.noded.instances import InstanceProcedures
from ganeti.noded.procedures import NodeProcedures
from ganeti.noded.server import NodeRpcResource
from ganeti.objects import NIC, Disk, Instance, new_uuid
from ganeti.rpc import wire
from ganeti.rpc.instances import disk_path, encode_instance
from ganeti.rpc.procedures import TABLE as PROCEDURES
from ganeti.testing.daemons import make_root, remove_root, share_file_storage

MIB = 1024 * 1024
NAME = "inst1.example.test"


# --- helpers ---------------------------------------------------------------------------


def run(value):
    """The result of a procedure call, which must be complete (no reactor here)."""
    if inspect.iscoroutine(value):
        d = defer.ensureDeferred(value)
    else:
        d = value if isinstance(value, defer.Deferred) else defer.succeed(value)
    out = []
    d.addBoth(out.append)
    assert out, "the procedure did not finish"
    if isinstance(out[0], Failure):
        out[0].raiseException()
    return out[0]


def refused(call, *fragments):
    """C{call} (a coroutine, or a function for the synchronous procedures) is refused."""
    with pytest.raises(RpcFailure) as info:
        run(call() if callable(call) else call)
    for fragment in fragments:
        assert fragment in str(info.value)
    return str(info.value)


class FakeProcess(StringTransport):
    pid = None  # never a real process group

    def __init__(self):
        super().__init__()
        self.signals = []

    def signalProcess(self, signal):
        self.signals.append(signal)


class ProcessClock(Clock):
    """A Clock that records spawnProcess instead of running anything."""

    def __init__(self):
        super().__init__()
        self.spawned = []

    def spawnProcess(self, protocol, executable, args=(), env=None, path=None, uid=None, gid=None,
                     usePTY=False, childFDs=None):
        process = FakeProcess()
        self.spawned.append({"protocol": protocol, "executable": executable, "args": list(args),
                             "env": dict(env or {}), "path": path, "process": process})
        protocol.makeConnection(process)
        return process


@pytest.fixture
def cfg():
    return initial_config("cluster.test", "node1.test", "127.0.1.1")


def make_instance(cfg, *, name=NAME, template="file", disks=1, os_name="noop", hvp=None):
    storage_dir = cfg.cluster.shared_file_storage_dir if template == "sharedfile" else cfg.cluster.file_storage_dir
    records = [
        Disk(uuid=new_uuid(), dev_type=template, logical_id=["loop", disk_path(storage_dir, name, i)],
             iv_name="disk/%d" % i, size=16, mode="rw")
        for i in range(disks if template != "diskless" else 0)
    ]
    inst = Instance(
        name=name, uuid=new_uuid(), primary_node=next(iter(cfg.nodes)), os=os_name, hypervisor="fake",
        beparams={"maxmem": 256, "vcpus": 2}, osparams={"image": "/images/x.img"}, hvparams=hvp or {},
        nics=[NIC(mac="aa:00:00:11:22:33", ip="192.0.2.10", nicparams={"mode": "bridged", "link": "br0"})],
        disks=[d.uuid for d in records], disk_template=template, admin_state="down",
    )
    return inst, records


def encoded(cfg, inst, records):
    return encode_instance(cfg, inst, disks=records)


@pytest.fixture
def node(root):
    root.ensure_dirs()
    return InstanceProcedures(root, Clock())


@pytest.fixture
def pair():
    roots = [make_root("gnti1"), make_root("gnti2")]
    for paths in roots:
        paths.ensure_dirs()
    share_file_storage(roots)
    yield [InstanceProcedures(paths, Clock()) for paths in roots]
    for paths in roots:
        remove_root(paths)


def create_disks(node, records):
    return [run(node.blockdev_create(d.to_dict(), d.size, NAME, True, "", False)) for d in records]


# --- lifecycle -------------------------------------------------------------------------


def test_start_list_info_reboot_shutdown(node, cfg):
    inst, records = make_instance(cfg, disks=2)
    data = encoded(cfg, inst, records)
    paths = create_disks(node, records)
    assert paths == [os.path.join(node.paths.root, "srv/ganeti/file-storage", NAME, "disk%d" % i) for i in (0, 1)]
    assert run(node.instance_list(["fake"], {"fake": {}})) == []
    assert run(node.instance_info(NAME, "fake", {})) == {}

    assert run(node.instance_start(data, False, [])) is None
    assert run(node.instance_list(["fake"], {"fake": {}})) == [NAME]
    info = run(node.instance_info(NAME, "fake", {}))
    assert info["memory"] == 256 and info["vcpus"] == 2 and info["state"] == hv.STATE_RUNNING
    assert run(node.all_instances_info(["fake"], {})) == {NAME: info}
    # the hypervisor got the disks as (disk, path, uri), resolved
    record = serializer.read_json(os.path.join(node.paths.run_dir, "fake-hypervisor", NAME))
    assert record["disks"] == [os.path.realpath(p) for p in paths]

    assert run(node.instance_start(data, False, [])) is None  # already running: left alone
    assert run(node.instance_reboot(data, "soft", 30, [])) is None
    assert run(node.instance_reboot(data, "hard", 30, [])) is None
    assert run(node.instance_reboot(data, "full", 30, [])) is None
    assert run(node.instance_list(["fake"], {})) == [NAME]
    # runtime memory (ballooning): the fake hypervisor's state file records it
    assert run(node.instance_balloon_memory(data, 192)) is None
    assert run(node.instance_info(NAME, "fake", {}))["memory"] == 192
    for bad in (0, -5, "192", True, 2**40):
        with pytest.raises(RpcFailure, match="memory must be an integer"):
            run(node.instance_balloon_memory(data, bad))
    assert run(node.instance_info(NAME, "fake", {}))["memory"] == 192
    console = run(node.instance_console_info(data))
    assert console["instance"] == NAME and console["kind"] == hv.CONS_MESSAGE

    assert run(node.instance_shutdown(data, 10, [])) is None
    assert run(node.instance_list(["fake"], {})) == []
    assert run(node.instance_shutdown(data, 10, [])) is None  # not running: succeeds
    refused(node.instance_reboot(data, "soft", 30, []), "not running")
    refused(node.instance_balloon_memory(data, 128), "not running")


def test_every_change_of_what_runs_is_reported_before_the_answer(node, cfg):
    """A start, a shutdown, a reboot or a balloon has NodeD's heartbeat report the node's instances
    before the procedure answers (as a migration's steps do): LuxiD's live queries read those reports,
    so a C{gnt-instance list} right after the job must not read the report from before the change.
    What does not change anything (a start of a running instance, a shutdown of a stopped one) is not."""
    inst, records = make_instance(cfg, disks=1)
    data = encoded(cfg, inst, records)
    create_disks(node, records)
    seen: list[list[str]] = []  # what runs here when the report is asked for
    node.state_changed = lambda: seen.append(run(node.instance_list(["fake"], {})))

    run(node.instance_start(data, False, []))
    assert seen == [[NAME]]
    run(node.instance_start(data, False, []))  # already running: nothing changed
    assert seen == [[NAME]]
    run(node.instance_reboot(data, "soft", 30, []))
    run(node.instance_balloon_memory(data, 192))
    assert seen == [[NAME]] * 3
    run(node.instance_reboot(data, "full", 30, []))  # stopped, then started
    assert seen == [[NAME]] * 3 + [[], [NAME]]
    run(node.instance_shutdown(data, 10, []))
    assert seen[-1] == [] and len(seen) == 6
    run(node.instance_shutdown(data, 10, []))  # not running: nothing changed
    assert len(seen) == 6


def test_start_hands_a_powered_off_instance_to_the_hypervisor(node, cfg, monkeypatch):
    """A guest that powered itself off (state shutdown) is started again:
    the hypervisor replaces what is left of it."""
    inst, records = make_instance(cfg, disks=1)
    data = encoded(cfg, inst, records)
    create_disks(node, records)
    run(node.instance_start(data, False, []))
    hyper = node.hypervisor("fake")
    starts = []
    monkeypatch.setattr(hyper, "start_instance", lambda instance, devices, paused: starts.append(instance.name))
    run(node.instance_start(data, False, []))
    assert starts == []
    down = {"memory": 256, "vcpus": 2, "state": hv.STATE_SHUTDOWN, "time": 1}
    monkeypatch.setattr(hyper, "get_instance_info", lambda name: down)
    run(node.instance_start(data, False, []))
    assert starts == [NAME]


def test_start_paused_and_diskless(node, cfg):
    inst, records = make_instance(cfg, template="diskless")
    data = encoded(cfg, inst, records)
    run(node.instance_start(data, True, None))
    assert run(node.instance_list(["fake"], {})) == [NAME]
    record = serializer.read_json(os.path.join(node.paths.run_dir, "fake-hypervisor", NAME))
    assert record["state"] == "paused" and record["disks"] == []


def test_start_refuses_missing_disk(node, cfg):
    inst, records = make_instance(cfg)
    refused(node.instance_start(encoded(cfg, inst, records), False, []), "disk 0 of instance", "does not exist")
    assert run(node.instance_list(["fake"], {})) == []


def test_node_info_from_the_hypervisor(root, cfg):
    root.ensure_dirs()
    procs = NodeProcedures(root, Clock())
    inst, records = make_instance(cfg, template="diskless")
    _boot, _storage, (before,) = run(procs.node_info([], [["fake", {}]]))
    assert before["memory_total"] > 0 and before["hv_name"] == "fake"
    run(procs.instances.instance_start(encoded(cfg, inst, records), False, []))
    _boot, _storage, (after,) = run(procs.node_info([], [["fake", {}]]))
    assert after["memory_free"] == max(0, before["memory_free"] - 256)
    with pytest.raises(RpcFailure):
        run(procs.node_info([], [["xen-pvm", {}]]))


def test_get_hypervisor(root):
    clock = Clock()
    fake = hv.get_hypervisor("fake", root, clock)
    assert hv.get_hypervisor("fake", root, clock) is fake
    assert fake.paths == root
    with pytest.raises(hv.HypervisorError):
        hv.get_hypervisor("xen-pvm", root, clock)
    with pytest.raises(hv.HypervisorError):
        hv.get_hypervisor(None, root, clock)


# --- storage ---------------------------------------------------------------------------


def test_blockdev_create_grow_remove(node, cfg):
    _inst, (disk,) = make_instance(cfg)
    data = disk.to_dict()
    path = run(node.blockdev_create(data, 16, NAME, True, "", False))
    assert path == os.path.join(node.paths.file_storage_dir, NAME, "disk0")
    assert os.path.getsize(path) == 16 * MIB
    refused(lambda: node.blockdev_create(data, 16, NAME, True, "", False), "already exists")
    run(node.blockdev_grow(data, 8, True, True, False))  # dry run
    run(node.blockdev_grow(data, 8, False, False, False))  # the logical step: files do not change
    assert os.path.getsize(path) == 16 * MIB
    run(node.blockdev_grow(data, 8, False, True, False))
    assert os.path.getsize(path) == 24 * MIB
    assert run(node.blockdev_remove(data)) is None
    assert not os.path.exists(path) and not os.path.exists(os.path.dirname(path))
    assert run(node.blockdev_remove(data)) is None  # already gone
    refused(lambda: node.blockdev_grow(data, 8, False, True, False), "does not exist")
    assert run(node.blockdev_remove({"dev_type": "diskless"})) is None


def test_storage_dirs_follow_ssconf(node, cfg):
    ssconf.write_files(node.paths, {"file_storage_dir": ["/data/files"],
                                    "shared_file_storage_dir": ["/data/shared"]})
    assert node.storage_dirs() == (os.path.join(node.paths.root, "data/files"),
                                   os.path.join(node.paths.root, "data/shared"))
    disk = {"dev_type": "file", "logical_id": ["loop", "/data/files/%s/disk0" % NAME], "size": 4}
    path = run(node.blockdev_create(disk, 4, NAME, True, "", False))
    assert path == os.path.join(node.paths.root, "data/files", NAME, "disk0") and os.path.isfile(path)
    # the default directory is no longer the node's storage directory
    _inst, (default,) = make_instance(cfg)
    refused(lambda: node.blockdev_create(default.to_dict(), 4, NAME, True, "", False), "outside the storage directory")


def test_paths_outside_are_refused(node):
    outside = os.path.join(node.paths.root, "escape")
    os.makedirs(node.paths.file_storage_dir)
    os.symlink(outside, os.path.join(node.paths.file_storage_dir, "link"))
    bad = [
        ["loop", "/etc/passwd"],
        ["loop", "/srv/ganeti/file-storage/../../../escape/disk0"],
        ["loop", "/srv/ganeti/file-storage"],
        ["loop", "/srv/ganeti/file-storage/link/disk0"],
        ["loop", "/srv/ganeti/shared-file-storage/x/disk0"],  # a sharedfile path for a file disk
    ]
    for logical_id in bad:
        disk = {"dev_type": "file", "logical_id": logical_id, "size": 4}
        refused(lambda: node.blockdev_create(disk, 4, NAME, True, "", False), "refused")
        refused(lambda: node.blockdev_remove(disk), "refused")
        refused(lambda: node.blockdev_grow(disk, 4, False, True, False), "refused")
    for logical_id in (["loop", "relative/disk0"], ["loop"], "x", ["loop", 7], ["loop", "/a\0b"]):
        disk = {"dev_type": "file", "logical_id": logical_id}
        refused(lambda: node.blockdev_create(disk, 4, NAME, True, "", False), "logical_id")
    assert not os.path.exists(outside)
    assert os.listdir(node.paths.file_storage_dir) == ["link"]


def test_instance_with_disk_outside_is_refused(node, cfg):
    inst, (disk,) = make_instance(cfg)
    evil = attrs.evolve(disk, logical_id=["loop", "/etc/passwd"])
    refused(node.instance_start(encoded(cfg, inst, [evil]), False, []), "outside")
    refused(node.instance_os_add(encoded(cfg, inst, [evil]), False, 0), "outside")
    assert run(node.instance_list(["fake"], {})) == []


# --- migration -------------------------------------------------------------------------


def test_migration_between_two_roots(pair, cfg):
    source, target = pair
    inst, records = make_instance(cfg, template="sharedfile")
    data = encoded(cfg, inst, records)
    (path,) = create_disks(source, records)
    assert os.path.realpath(path) == os.path.realpath(
        os.path.join(target.paths.shared_file_storage_dir, NAME, "disk0"))  # one SAN
    run(source.instance_start(data, False, []))
    told = []  # NodeD's heartbeat reports the node's instances at once when told (not at its next poll)
    source.state_changed = lambda: told.append("source")
    target.state_changed = lambda: told.append("target")

    info = run(source.migration_info(data))
    assert run(target.accept_instance(data, info, "127.0.1.2")) is None
    assert told == ["target"]  # the incoming qemu's event monitor is watched from now on
    assert run(target.instance_list(["fake"], {})) == []  # incoming, not yet running
    assert run(source.instance_migrate("cluster.test", data, "127.0.1.2", True)) is None
    assert run(source.instance_get_migration_status(data))["status"] == "completed"
    assert run(target.instance_finalize_migration_dst(data, info, True)) is None
    assert told == ["target", "target"]  # running there: reported before the migration job ends
    assert run(source.instance_finalize_migration_src(data, True, True)) is None
    assert told == ["target", "target", "source"]
    assert run(source.instance_list(["fake"], {})) == []
    assert run(target.instance_list(["fake"], {})) == [NAME]
    assert run(source.instance_get_migration_status(data))["status"] == "none"


def test_failed_migration_rolls_back(pair, cfg):
    source, target = pair
    inst, records = make_instance(cfg, template="sharedfile")
    data = encoded(cfg, inst, records)
    create_disks(source, records)
    run(source.instance_start(data, False, []))
    info = run(source.migration_info(data))
    run(target.accept_instance(data, info, "127.0.1.2"))
    run(target.instance_finalize_migration_dst(data, info, False))
    run(source.instance_finalize_migration_src(data, False, True))
    assert run(source.instance_list(["fake"], {})) == [NAME]
    assert run(target.instance_list(["fake"], {})) == []


def test_accept_refuses_when_the_disks_are_not_there(pair, cfg):
    source, target = pair
    inst, records = make_instance(cfg, template="file")
    data = encoded(cfg, inst, records)
    create_disks(source, records)
    run(source.instance_start(data, False, []))
    refused(target.accept_instance(data, run(source.migration_info(data)), "127.0.1.2"), "does not exist")


# --- OS scripts (spawning recorded, not run) --------------------------------------------


@pytest.fixture
def scripted(root):
    root.ensure_dirs()
    reactor = ProcessClock()
    return InstanceProcedures(root, reactor, os_timeouts={"create": 60}), reactor


def test_os_add_runs_create_with_the_environment(scripted, cfg):
    node, reactor = scripted
    inst, records = make_instance(cfg, os_name="image", hvp={"disk_type": "paravirtual"})
    (path,) = create_disks(node, records)
    d = defer.ensureDeferred(node.instance_os_add(encoded(cfg, inst, records), True, 1))
    assert not d.called
    (spawned,) = reactor.spawned
    env = spawned["env"]
    assert spawned["args"][-1] == os.path.join(osapi.SHIPPED_DIR, "image", "create")
    assert spawned["path"] == os.path.join(osapi.SHIPPED_DIR, "image")
    assert env["OS_API_VERSION"] == "20" and env["OS_NAME"] == "image" and env["OS_VARIANT"] == ""
    assert env["INSTANCE_NAME"] == NAME and env["INSTANCE_OS"] == "image" and env["HYPERVISOR"] == "fake"
    assert env["DISK_COUNT"] == "1" and env["DISK_0_PATH"] == os.path.realpath(path)
    assert env["DISK_0_ACCESS"] == "rw" and env["DISK_0_BACKEND_TYPE"] == "file:loop"
    assert env["DISK_0_FRONTEND_TYPE"] == "paravirtual"
    assert env["NIC_COUNT"] == "1" and env["NIC_0_MAC"] == "aa:00:00:11:22:33" and env["NIC_0_IP"] == "192.0.2.10"
    assert env["NIC_0_MODE"] == "bridged" and env["NIC_0_LINK"] == "br0"
    assert env["OSP_IMAGE"] == "/images/x.img" and env["INSTANCE_BE_maxmem"] == "256"
    assert env["INSTANCE_HV_disk_type"] == "paravirtual"
    assert env["DEBUG_LEVEL"] == "1" and env["INSTANCE_REINSTALL"] == "1"
    spawned["protocol"].processEnded(Failure(ProcessDone(0)))
    assert run(d) is None
    (log,) = os.listdir(node.paths.os_log_dir)
    assert log.startswith("create-image-%s-" % NAME) and log.endswith(".log")


def test_os_add_failure_quotes_the_log(scripted, cfg):
    node, reactor = scripted
    inst, records = make_instance(cfg, template="diskless")
    d = defer.ensureDeferred(node.instance_os_add(encoded(cfg, inst, records), False, 0))
    (log,) = os.listdir(node.paths.os_log_dir)
    with open(os.path.join(node.paths.os_log_dir, log), "w") as handle:
        handle.write("".join("line %d\n" % i for i in range(50)))
    reactor.spawned[0]["protocol"].processEnded(Failure(ProcessTerminated(exitCode=3)))
    message = refused(d, "create script of OS noop", "exit code 3", "line 49", "line 30")
    assert "line 29\n" not in message


def test_os_add_timeout_kills(scripted, cfg):
    node, reactor = scripted
    inst, records = make_instance(cfg, template="diskless")
    d = defer.ensureDeferred(node.instance_os_add(encoded(cfg, inst, records), False, 0))
    reactor.advance(59)
    process = reactor.spawned[0]["process"]
    assert process.signals == []
    reactor.advance(1)
    assert process.signals == ["KILL"]
    reactor.spawned[0]["protocol"].processEnded(Failure(ProcessTerminated(signal=9)))
    refused(d, "timed out after 60 seconds")


def test_rename_passes_the_old_name(scripted, cfg):
    node, reactor = scripted
    inst, records = make_instance(cfg, template="diskless", name="new.example.test")
    d = defer.ensureDeferred(node.instance_run_rename(encoded(cfg, inst, records), "old.example.test", 0))
    env = reactor.spawned[0]["env"]
    assert env["OLD_INSTANCE_NAME"] == "old.example.test" and env["INSTANCE_NAME"] == "new.example.test"
    assert reactor.spawned[0]["args"][-1].endswith("/noop/rename")
    reactor.spawned[0]["protocol"].processEnded(Failure(ProcessDone(0)))
    assert run(d) is None


def test_os_add_refusals_spawn_nothing(scripted, cfg):
    node, reactor = scripted
    for os_name, fragment in (("nosuchos", "not found"), ("../etc", "Invalid OS name"),
                              ("noop+variant", None), ("", "has no OS")):
        inst, records = make_instance(cfg, template="diskless", os_name=os_name)
        if fragment is None:  # an OS without variants ignores the variant
            d = defer.ensureDeferred(node.instance_os_add(encoded(cfg, inst, records), False, 0))
            reactor.spawned.pop()["protocol"].processEnded(Failure(ProcessDone(0)))
            run(d)
            continue
        refused(node.instance_os_add(encoded(cfg, inst, records), False, 0), fragment)
    inst, records = make_instance(cfg, template="diskless")
    refused(node.instance_os_add(encoded(cfg, inst, records), False, "x"), "debug")
    refused(node.instance_run_rename(encoded(cfg, inst, records), "../x", 0), "old instance name")
    assert reactor.spawned == []


def test_os_diagnose(node):
    broken = os.path.join(node.paths.os_search_dir, "broken")
    os.makedirs(broken)
    with open(os.path.join(broken, "ganeti_api_version"), "w") as handle:
        handle.write("20\n")
    found = {(entry[0], entry[1]): entry for entry in run(node.os_diagnose())}
    noop = found["noop", os.path.join(osapi.SHIPPED_DIR, "noop")]
    assert noop[2:] == [True, "", [], [], [20], True]
    image = found["image", os.path.join(osapi.SHIPPED_DIR, "image")]
    assert image[2] is True and [p[0] for p in image[5]] == ["image"]
    name, path, status, diagnose, *_rest = found["broken", broken]
    assert status is False and "missing script" in diagnose


# --- bad input never crashes noded -------------------------------------------------------


BAD_CALLS = [
    ("instance_start", [None, False, []]),
    ("instance_start", [{"name": "x"}, False, []]),  # no hypervisor
    ("instance_start", [{"name": "../x", "hypervisor": "fake"}, False, []]),
    ("instance_start", [{"name": "x", "hypervisor": "nosuchhv"}, False, []]),
    ("instance_start", [{"name": "x", "hypervisor": "fake", "nics": "eth0"}, False, []]),
    ("instance_start", [{"name": "x", "hypervisor": "fake", "beparams": []}, False, []]),
    ("instance_start", [{"name": "x", "hypervisor": "fake", "disks_info": [{"dev_type": "plain"}]}, False, []]),
    ("instance_start", [{"name": "x", "hypervisor": "fake", "disks_info": "d"}, False, []]),
    ("instance_start", [{"name": "x", "hypervisor": "fake"}, "yes", []]),
    ("instance_start", [{"name": "x", "hypervisor": "fake"}, False, "why"]),
    ("instance_shutdown", [{"name": "x", "hypervisor": "fake"}, -1, []]),
    ("instance_shutdown", [{"name": "x", "hypervisor": "fake"}, "10", []]),
    ("instance_reboot", [{"name": "x", "hypervisor": "fake"}, "sideways", 10, []]),
    ("instance_list", ["fake", {}]),
    ("instance_list", [["nosuchhv"], {}]),
    ("instance_info", ["x/y", "fake", {}]),
    ("instance_info", ["x", "fake", []]),
    ("all_instances_info", [[1], {}]),
    ("accept_instance", [{"name": "x", "hypervisor": "fake"}, {}, None]),
    ("instance_migrate", [None, {"name": "x", "hypervisor": "fake"}, "127.0.1.2", True]),
    ("instance_finalize_migration_dst", [{"name": "x", "hypervisor": "fake"}, {}, "ok"]),
    ("instance_finalize_migration_dst", [{"name": "x", "hypervisor": "fake"}, {}, True]),  # nothing to finalize
    ("blockdev_create", [{"dev_type": "file", "logical_id": ["loop", "/srv/ganeti/file-storage/x/disk0"]}, 0, "x", True, "", False]),
    ("blockdev_create", [{"dev_type": "file", "logical_id": ["loop", "/srv/ganeti/file-storage/x/disk0"]}, True, "x", True, "", False]),
    ("blockdev_create", [{"dev_type": "file", "logical_id": ["loop", "/srv/ganeti/file-storage/x/disk0"]}, 4, "x", True, "", True]),
    ("blockdev_create", [{"dev_type": "plain", "logical_id": ["xenvg", "lv"]}, 4, "x", True, "", False]),
    ("blockdev_create", [{"dev_type": "diskless"}, 4, "x", True, "", False]),
    ("blockdev_create", ["disk", 4, "x", True, "", False]),
    ("blockdev_create", [{"dev_type": "file", "children": "x"}, 4, "x", True, "", False]),
    ("blockdev_remove", [[]]),
    ("blockdev_grow", [{"dev_type": "file", "logical_id": ["loop", "/srv/ganeti/file-storage/x/disk0"]}, -4, False, True, False]),
    ("instance_os_add", [{"name": "x", "hypervisor": "fake", "os": "noop"}, "no", 0]),
    ("instance_run_rename", [{"name": "x", "hypervisor": "fake", "os": "noop"}, None, 0]),
]


@pytest.mark.parametrize("procedure, args", BAD_CALLS)
def test_bad_arguments_are_refused(root, procedure, args):
    root.ensure_dirs()
    stub = StubTreq(NodeRpcResource(NodeProcedures(root, Clock())))
    d = stub.request("POST", "https://node/" + procedure, data=wire.encode_request(args))
    stub.flush()
    response = run(d)
    ok, message = serializer.loads(run(response.content()))
    assert response.code == 200 and ok is False
    assert not message.startswith("Error while executing backend function"), message
    assert not os.path.exists(os.path.join(root.run_dir, "fake-hypervisor", "x"))
    assert not os.path.exists(os.path.join(root.file_storage_dir, "x"))


def test_every_instance_procedure_is_registered(root):
    procs = NodeProcedures(root, Clock())
    for name in ("instance_start", "blockdev_create", "os_diagnose", "instance_finalize_migration_src"):
        assert name in PROCEDURES
        assert procs.lookup(name) == getattr(procs.instances, name)
