"""The ExtStorage interface on a node: providers, their validation, the
scripts' environment, attach's output, and noded's ext/blockdev disks
(spawns recorded on a fake reactor: nothing runs)."""

from __future__ import annotations

import inspect
import os
import shutil
import tempfile

import pytest
from twisted.internet import defer
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from ganeti import errors
from ganeti.backend.storage import extstorage as es
from ganeti.cmdlib import ext_disks as master_ext
from ganeti.noded import extstorage as noded_ext
from ganeti.noded.failure import RpcFailure
from ganeti.objects import Disk
from ganeti.paths import Paths

SCRIPTS = es.REQUIRED_SCRIPTS


class FakeProcess(StringTransport):
    pid = None

    def signalProcess(self, signal):
        pass


class ProcessClock(Clock):
    """A Clock recording spawnProcess instead of running anything."""

    def __init__(self):
        super().__init__()
        self.spawned = []

    def spawnProcess(self, protocol, executable, args=(), env=None, path=None, uid=None, gid=None,
                     usePTY=False, childFDs=None):
        process = FakeProcess()
        self.spawned.append({"protocol": protocol, "args": list(args), "env": dict(env or {}), "path": path,
                             "fds": childFDs})
        protocol.makeConnection(process)
        return process


def result(d):
    if inspect.iscoroutine(d):
        d = defer.ensureDeferred(d)
    out = []
    d.addBoth(out.append)
    assert out, "not finished"
    if isinstance(out[0], Failure):
        out[0].raiseException()
    return out[0]


@pytest.fixture
def root():
    path = tempfile.mkdtemp(prefix="ganeti-es-")
    yield path
    shutil.rmtree(path)


def make_provider(root, name="prov", base="srv/ganeti/extstorage", params="dir Where\nsize_hint Hint\n",
                  skip=(), mode=0o755):
    directory = os.path.join(root, base, name)
    os.makedirs(directory)
    for script in SCRIPTS + es.OPTIONAL_SCRIPTS:
        if script in skip:
            continue
        path = os.path.join(directory, script)
        with open(path, "w") as handle:
            handle.write("#!/bin/sh\n")
        os.chmod(path, mode)
    if params is not None:
        with open(os.path.join(directory, es.PARAMETERS_FILE), "w") as handle:
            handle.write(params)
    return directory


# --- providers ------------------------------------------------------------------------


def test_search_path_under_the_root_then_shipped(root):
    path = es.search_path(root)
    assert path[:4] == [os.path.join(root, d) for d in ("srv/ganeti/extstorage", "usr/local/lib/ganeti/extstorage",
                                                         "usr/lib/ganeti/extstorage", "usr/share/ganeti/extstorage")]
    assert path[4] == es.SHIPPED_DIR


def test_find_first_match_and_parameters(root):
    first = make_provider(root)
    make_provider(root, base="usr/share/ganeti/extstorage", params="other x\n")
    provider = es.find(root, "prov")
    assert provider.path == first
    assert provider.parameters == [["dir", "Where"], ["size_hint", "Hint"]]
    assert provider.scripts["create"] == os.path.join(first, "create")


def test_optional_scripts_may_be_absent(root):
    make_provider(root, skip=("snapshot", "open", "close"))
    provider = es.find(root, "prov")
    assert provider.scripts["open"] is None and provider.scripts["attach"]


def test_shipped_loopback_is_found_and_valid(root):
    provider = es.find(root, "loopback")
    assert provider.path == os.path.join(es.SHIPPED_DIR, "loopback")
    assert provider.parameter_names == ["dir"]


@pytest.mark.parametrize("setup, fragment", [
    (lambda root: None, "not found in search path"),
    (lambda root: make_provider(root, params=None), "'parameters.list' under path"),
    (lambda root: make_provider(root, skip=("verify",)), "'verify' under path"),
    (lambda root: make_provider(root, mode=0o644), "is not executable"),
    (lambda root: make_provider(root, params="bad-name x\n"), "Invalid parameter name"),
])
def test_invalid_or_missing_provider(root, setup, fragment):
    setup(root)
    with pytest.raises(es.ExtStorageError) as info:
        es.find(root, "prov")
    assert fragment in str(info.value)


def test_a_directory_instead_of_a_script_is_invalid(root):
    directory = make_provider(root, skip=("grow",))
    os.mkdir(os.path.join(directory, "grow"))
    with pytest.raises(es.ExtStorageError, match="not a regular file"):
        es.find(root, "prov")


def test_bad_provider_names_refused(root):
    for name in ("../x", "", "a/b", None, ".hidden"):
        with pytest.raises(es.ExtStorageError, match="Invalid ExtStorage provider name"):
            es.find(root, name)


def test_diagnose_lists_valid_and_invalid(root):
    make_provider(root)
    make_provider(root, name="broken", params=None)
    found = {entry[0]: entry for entry in es.diagnose(root)}
    assert found["prov"][2:] == [True, "", [["dir", "Where"], ["size_hint", "Hint"]]]
    assert found["broken"][2] is False and "parameters.list" in found["broken"][3]
    assert found["loopback"][2] is True


def test_check_params(root):
    provider = es.find(root, "loopback")
    assert es.check_params(provider, {"dir": "/x", "provider": "loopback", "access": "kernelspace"}) == {
        "dir": "/x", "provider": "loopback", "access": "kernelspace"}
    with pytest.raises(es.ExtStorageError, match="not supported by the ExtStorage provider loopback: pool"):
        es.check_params(provider, {"dir": "/x", "pool": "p"})


# --- environment and output -----------------------------------------------------------


def test_environment():
    env = es.environment("vol1", {"provider": "p", "dir": "/d"}, size=64, name="disk0", uuid="u-1", exclusive=True,
                         base={"PATH": "/bin", "LC_ALL": "en_US"})
    assert env == {"PATH": "/bin", "LC_ALL": "C", "VOL_NAME": "vol1", "EXTP_PROVIDER": "p", "EXTP_DIR": "/d",
                   "VOL_SIZE": "64", "VOL_CNAME": "disk0", "VOL_UUID": "u-1", "VOL_OPEN_EXCLUSIVE": "True"}
    grow = es.environment("v", {}, size=64, grow=128, metadata="m", base={})
    assert grow["VOL_SIZE"] == "64" and grow["VOL_NEW_SIZE"] == "128" and grow["VOL_METADATA"] == "m"
    assert "VOL_CNAME" not in grow and "VOL_OPEN_EXCLUSIVE" not in grow


def test_parse_attach():
    assert es.parse_attach("/dev/loop3\n") == ("/dev/loop3", [])
    assert es.parse_attach("\nrbd:p/v\nKVM:rbd:p/v\n") == (None, ["rbd:p/v", "KVM:rbd:p/v"])
    assert es.kvm_uri(["rbd:p/v", "KVM:rbd:p/v", "kvm:other"]) == "rbd:p/v"
    assert es.kvm_uri(["gluster://x"]) is None
    with pytest.raises(es.ExtStorageError, match="Neither a block device nor a userspace URI"):
        es.parse_attach("\n\n")
    with pytest.raises(es.ExtStorageError, match="not an absolute device path"):
        es.parse_attach("loop3\n")


def test_sanitize_metadata():
    assert es.sanitize_metadata("originstname+inst1.example.com") == "originstname+inst1.example.com"
    assert es.sanitize_metadata("-a b/c") == "_a_b_c"
    assert len(es.sanitize_metadata("x" * 300)) == es.MAX_METADATA


# --- running scripts ------------------------------------------------------------------


def test_runner_runs_in_the_provider_dir_without_arguments(root):
    make_provider(root)
    provider = es.find(root, "prov")
    clock = ProcessClock()
    runner = es.Runner(Paths(root), clock)
    d = defer.ensureDeferred(runner.run(provider, es.CREATE, "vol1", {"VOL_NAME": "vol1"}))
    spawn = clock.spawned[0]
    assert spawn["path"] == provider.path
    assert spawn["args"][-1] == os.path.join(provider.path, "create")  # the script, nothing after it
    assert spawn["env"] == {"VOL_NAME": "vol1"}
    spawn["protocol"].processEnded(Failure(ProcessDone(0)))
    assert result(d) == ""
    logs = os.listdir(os.path.join(root, "var/log/ganeti/extstorage"))
    assert len(logs) == 1 and logs[0].startswith("create-prov-vol1-")


def test_runner_failure_quotes_the_log(root):
    make_provider(root)
    provider = es.find(root, "prov")
    clock = ProcessClock()
    d = defer.ensureDeferred(es.Runner(Paths(root), clock).run(provider, es.REMOVE, "vol1", {}))
    log_dir = os.path.join(root, "var/log/ganeti/extstorage")
    with open(os.path.join(log_dir, os.listdir(log_dir)[0]), "w") as handle:
        handle.write("".join("line %d\n" % i for i in range(30)))
    clock.spawned[0]["protocol"].processEnded(Failure(ProcessTerminated(exitCode=3)))
    with pytest.raises(es.ExtStorageError) as info:
        result(d)
    text = str(info.value)
    assert "remove script failed (exit code 3)" in text and "line 29" in text and "line 10" in text
    assert "line 9\n" not in text


def test_runner_attach_answers_stdout_and_skips_absent_optional(root):
    make_provider(root, skip=("open",))
    provider = es.find(root, "prov")
    clock = ProcessClock()
    runner = es.Runner(Paths(root), clock)
    assert result(runner.run(provider, es.OPEN, "vol1", {})) is None
    assert clock.spawned == []
    d = defer.ensureDeferred(runner.run(provider, es.ATTACH, "vol1", {}))
    proto = clock.spawned[0]["protocol"]
    assert clock.spawned[0]["fds"][1] == "r"
    proto.childDataReceived(1, b"\nkvm:rbd:p/v\n")
    proto.processEnded(Failure(ProcessDone(0)))
    assert result(d) == "\nkvm:rbd:p/v\n"


# --- noded: ext and blockdev disks ------------------------------------------------------


def ext_disk(params=None, provider="prov"):
    return Disk(uuid="d-1", name="data", dev_type="ext", logical_id=[provider, "u.ext.disk0"], iv_name="disk/0",
                size=64, mode="rw", params=params if params is not None else {"provider": provider, "dir": "/x"})


def test_noded_refuses_unknown_provider_and_parameter_before_running_anything(root):
    make_provider(root)
    clock = ProcessClock()
    disks = noded_ext.ExtDisks(Paths(root), clock)
    with pytest.raises(RpcFailure, match="Provider nope not found"):
        result(disks.create(ext_disk(provider="nope", params={}), 64, ""))
    with pytest.raises(RpcFailure, match="not supported by the ExtStorage provider prov: pool"):
        result(disks.create(ext_disk(params={"pool": "x"}), 64, ""))
    with pytest.raises(RpcFailure, match="params name provider"):
        result(disks.create(ext_disk(params={"provider": "other"}), 64, ""))
    assert clock.spawned == []


def test_noded_create_runs_create_attach_open_setinfo(root):
    make_provider(root)
    clock = ProcessClock()
    disks = noded_ext.ExtDisks(Paths(root), clock)
    disk = ext_disk(params={"provider": "prov", "dir": "/x", "access": "userspace"})
    d = defer.ensureDeferred(disks.create(disk, 64, "originstname+inst1"))
    answers = {"attach": b"\nkvm:rbd:pool/u.ext.disk0\n"}
    for _step in range(4):
        spawn = clock.spawned[-1]
        action = os.path.basename(spawn["args"][-1])
        if action in answers:
            spawn["protocol"].childDataReceived(1, answers[action])
        spawn["protocol"].processEnded(Failure(ProcessDone(0)))
    assert result(d) == "u.ext.disk0"
    actions = [os.path.basename(s["args"][-1]) for s in clock.spawned]
    assert actions == ["create", "attach", "open", "setinfo"]
    create, _attach, opened, setinfo = (s["env"] for s in clock.spawned)
    assert create["VOL_SIZE"] == "64" and create["EXTP_DIR"] == "/x" and create["EXTP_PROVIDER"] == "prov"
    assert create["VOL_CNAME"] == "data" and create["VOL_UUID"] == "d-1" and create["LC_ALL"] == "C"
    assert create["EXTP_ACCESS"] == "userspace"
    assert opened["VOL_OPEN_EXCLUSIVE"] == "True"
    assert setinfo["VOL_METADATA"] == "originstname+inst1"
    assert disks.device(disk, "disk 0") == "rbd:pool/u.ext.disk0"


def test_noded_attach_of_a_non_block_device_fails_and_the_volume_is_removed(root):
    make_provider(root)
    clock = ProcessClock()
    disks = noded_ext.ExtDisks(Paths(root), clock)
    d = defer.ensureDeferred(disks.create(ext_disk(), 64, ""))
    for _step in range(5):  # create, attach (prints /dev/null), then close, detach, remove
        spawn = clock.spawned[-1]
        if os.path.basename(spawn["args"][-1]) == "attach":
            spawn["protocol"].childDataReceived(1, b"/dev/null\n")
        spawn["protocol"].processEnded(Failure(ProcessDone(0)))
    with pytest.raises(RpcFailure, match="/dev/null is not a block device"):
        result(d)
    assert [os.path.basename(s["args"][-1]) for s in clock.spawned] == ["create", "attach", "close", "detach",
                                                                        "remove"]


def test_blockdev_adoption_checks(root):
    disks = noded_ext.ExtDisks(Paths(root), ProcessClock())
    missing = Disk(dev_type="blockdev", logical_id=["manual", "/dev/does-not-exist-xyz"], size=1)
    with pytest.raises(RpcFailure, match="No such file"):
        result(disks.create(missing, 1, ""))
    with pytest.raises(RpcFailure, match="not a block device"):
        result(disks.create(Disk(dev_type="blockdev", logical_id=["manual", "/dev/null"], size=1), 1, ""))
    with pytest.raises(RpcFailure, match="logical_id must be"):
        noded_ext.check_adopted(Disk(dev_type="blockdev", logical_id=["manual", "/etc/passwd"]), "disk")
    with pytest.raises(RpcFailure, match="cannot grow"):
        result(disks.grow(missing, 1, False, True))
    assert result(disks.remove(missing)) is None  # never removed by the cluster
    assert noded_ext.bdev_sizes(["/dev/null", "/dev/does-not-exist-xyz", "/etc/passwd"]) == {}


# --- master: disk specs -----------------------------------------------------------------


def test_master_ext_disk_spec():
    spec = master_ext.check_disk("ext", {"size": "64M", "provider": "loopback", "dir": "/d", "access": "userspace"},
                                 0)
    assert spec == {"size": 64, "provider": "loopback", "ext_params": {"dir": "/d"}, "access": "userspace"}
    for bad, fragment in [({"size": 1}, "needs an ExtStorage provider"),
                          ({"size": 1, "provider": "p", "adopt": "/dev/x"}, "only possible with template blockdev"),
                          ({"size": 1, "provider": "p", "access": "weird"}, "invalid access mode"),
                          ({"size": 1, "provider": "p", "bad-key": "x"}, "invalid ExtStorage parameter name")]:
        with pytest.raises(errors.OpPrereqError, match=fragment):
            master_ext.check_disk("ext", bad, 0)
    with pytest.raises(errors.OpPrereqError, match="not supported"):
        master_ext.check_disk("file", {"size": 1, "provider": "p"}, 0)


def test_master_blockdev_disk_spec_and_records():
    spec = master_ext.check_disk("blockdev", {"adopt": "/dev/loop7"}, 0)
    assert spec == {"adopt": "/dev/loop7"}
    for bad in ({}, {"adopt": "relative"}, {"adopt": "/dev/../etc/x"}, {"adopt": "/tmp/x"}):
        with pytest.raises(errors.OpPrereqError, match="needs the block device to adopt"):
            master_ext.check_disk("blockdev", bad, 0)
    spec["size"] = 10
    (disk,) = master_ext.new_disks(None, "blockdev", [spec])
    assert disk.logical_id == ["manual", "/dev/loop7"] and disk.size == 10 and disk.nodes == []
    (ext,) = master_ext.new_disks(None, "ext", [{"size": 64, "provider": "p", "ext_params": {"dir": "/d"}}], 2)
    assert ext.logical_id[0] == "p" and ext.logical_id[1].endswith(".ext.disk2")
    assert ext.params == {"dir": "/d", "provider": "p"} and ext.iv_name == "disk/2"


# --- OP_EXT_STORAGE_DIAGNOSE and gnt-storage --------------------------------------------


def test_diagnose_rows_merge_nodes_and_groups():
    from ganeti.cmdlib import extstorage as lu
    from ganeti.config.bootstrap import initial_config

    cfg = initial_config("cluster.test", "node1.test", "127.0.1.1")
    (group,) = cfg.nodegroups.values()
    loop = ["loopback", "/p/loopback", True, "", [["dir", "Where"], ["x", "X"]]]
    other = ["loopback", "/q/loopback", True, "", [["dir", "Where"]]]
    broken = ["rec", "/p/rec", False, "File 'parameters.list' under path '/p/rec' is missing", []]
    answers = {"node1.test": [loop, broken], "node2.test": [other]}
    rows = lu.rows(cfg, answers, ["name", "node_status", "nodegroup_status", "parameters"], [])
    assert [r[0] for r in rows] == ["loopback", "rec"]
    assert rows[0][1] == {"node1.test": [loop[1:]], "node2.test": [other[1:]]}
    assert rows[0][2] == {group.name: True} and rows[0][3] == [["dir", "Where"]]
    assert rows[1][1] == {"node1.test": [broken[1:]], "node2.test": []}
    assert rows[1][2] == {group.name: False} and rows[1][3] == []
    assert lu.rows(cfg, answers, ["name"], ["rec"]) == [["rec"]]
    assert lu.rows(cfg, {"node1.test": [["malformed"], 3]}, ["name"], []) == []


def test_gnt_storage_node_lines():
    from ganeti.client import gnt_storage

    assert gnt_storage.node_line([["/p/l", True, "", [["dir", "Where"]]]]) == (
        True, "valid (path: /p/l) [parameters: dir]")
    assert gnt_storage.node_line([["/p/r", False, "missing", []]]) == (
        False, "invalid - missing (path: /p/r) [no parameters]")
    assert gnt_storage.node_line([]) == (False, "ExtStorage provider not found")


def test_noded_prepare_opens_shared_while_migrating(root):
    make_provider(root)
    clock = ProcessClock()
    disks = noded_ext.ExtDisks(Paths(root), clock)
    disk = ext_disk(params={"provider": "prov", "access": "userspace"})
    d = defer.ensureDeferred(disks.prepare([disk], "Cannot accept instance x", exclusive=False))
    clock.spawned[-1]["protocol"].childDataReceived(1, b"\nkvm:u\n")
    clock.spawned[-1]["protocol"].processEnded(Failure(ProcessDone(0)))
    clock.spawned[-1]["protocol"].processEnded(Failure(ProcessDone(0)))
    result(d)
    assert [os.path.basename(s["args"][-1]) for s in clock.spawned] == ["attach", "open"]
    assert clock.spawned[1]["env"]["VOL_OPEN_EXCLUSIVE"] == "False"
    assert disks.device(disk, "disk 0") == "u"


def test_noded_snapshot_runs_the_script_then_attaches_the_snapshot_volume(root):
    make_provider(root)
    clock = ProcessClock()
    disks = noded_ext.ExtDisks(Paths(root), clock)
    d = defer.ensureDeferred(disks.snapshot(ext_disk(), "u.ext.disk0.exp-1", None))
    for _step in range(5):  # snapshot, attach (prints /dev/null: no block device), then close, detach, remove
        spawn = clock.spawned[-1]
        if os.path.basename(spawn["args"][-1]) == "attach":
            spawn["protocol"].childDataReceived(1, b"/dev/null\n")
        spawn["protocol"].processEnded(Failure(ProcessDone(0)))
    with pytest.raises(RpcFailure, match="/dev/null is not a block device"):
        result(d)
    actions = [(os.path.basename(s["args"][-1]), s["env"]["VOL_NAME"]) for s in clock.spawned]
    assert actions == [("snapshot", "u.ext.disk0"), ("attach", "u.ext.disk0.exp-1"), ("close", "u.ext.disk0.exp-1"),
                       ("detach", "u.ext.disk0.exp-1"), ("remove", "u.ext.disk0.exp-1")]
    snapshot = clock.spawned[0]["env"]
    assert snapshot["VOL_SNAPSHOT_NAME"] == "u.ext.disk0.exp-1" and snapshot["VOL_SNAPSHOT_SIZE"] == "64"
    with pytest.raises(RpcFailure, match="not attached on this node"):
        disks.snapshot_device(ext_disk(), "u.ext.disk0.exp-1")


def test_noded_snapshot_refused_without_the_script_or_with_a_bad_name(root):
    make_provider(root, skip=("snapshot",))
    clock = ProcessClock()
    disks = noded_ext.ExtDisks(Paths(root), clock)
    with pytest.raises(RpcFailure, match="provider prov has no snapshot script"):
        result(disks.snapshot(ext_disk(), None, None))
    with pytest.raises(RpcFailure, match="invalid snapshot name"):
        result(disks.snapshot_remove(ext_disk(), "../etc"))
    assert clock.spawned == []
