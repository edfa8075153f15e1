"""OS scripts really run (tiny shell scripts, the real reactor): environment, log, failure, timeout, noop, image."""

from __future__ import annotations

import os
import time

import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti.config.bootstrap import initial_config
from ganeti.noded.failure import RpcFailure
from ganeti.noded.instances import InstanceProcedures
from ganeti.objects import NIC, Disk, Instance, new_uuid
from ganeti.rpc.instances import disk_path, encode_instance

NAME = "inst1.example.test"
MIB = 1024 * 1024


def write_os(paths, name, create_body, api="20"):
    path = os.path.join(paths.os_search_dir, name)
    os.makedirs(path)
    with open(os.path.join(path, "ganeti_api_version"), "w") as handle:
        handle.write(api + "\n")
    for script in ("create", "import", "export", "rename", "verify"):
        body = create_body if script == "create" else "exit 0\n"
        with open(os.path.join(path, script), "w") as handle:
            handle.write("#!/bin/sh\n" + body)
        os.chmod(os.path.join(path, script), 0o755)
    return path


@pytest.fixture
def setup(root):
    root.ensure_dirs()
    cfg = initial_config("cluster.test", "node1.test", "127.0.1.1")
    node = InstanceProcedures(root, reactor, os_timeouts={"create": 3})
    return root, cfg, node


def instance(cfg, os_name, disks=1, osparams=None, name=NAME):
    records = [Disk(uuid=new_uuid(), dev_type="file", iv_name="disk/%d" % i, size=4, mode="rw",
                    logical_id=["loop", disk_path(cfg.cluster.file_storage_dir, name, i)])
               for i in range(disks)]
    inst = Instance(name=name, uuid=new_uuid(), os=os_name, hypervisor="fake", osparams=osparams or {},
                    beparams={"maxmem": 128}, nics=[NIC(mac="aa:00:00:00:00:07", nicparams={"mode": "bridged"})],
                    disks=[d.uuid for d in records], disk_template="file" if disks else "diskless")
    return records, encode_instance(cfg, inst, disks=records)


def create_disks(node, records, size=4):
    return [node.blockdev_create(d.to_dict(), size, NAME, True, "", False) for d in records]


def read_log(paths, prefix):
    (name,) = [n for n in os.listdir(paths.os_log_dir) if n.startswith(prefix)]
    with open(os.path.join(paths.os_log_dir, name)) as handle:
        return handle.read()


@pytest_twisted.ensureDeferred
async def test_create_gets_the_environment_and_its_output_is_logged(setup):
    paths, cfg, node = setup
    write_os(paths, "envdump", 'echo "cwd=$(pwd)"\nenv | sort\necho to-stderr >&2\n')
    records, data = instance(cfg, "envdump", osparams={"color": "blue"})
    (disk,) = create_disks(node, records)
    await node.instance_os_add(data, True, 2)
    log = read_log(paths, "create-envdump-%s-" % NAME)
    for line in ("cwd=%s" % os.path.join(paths.os_search_dir, "envdump"), "OS_API_VERSION=20", "OS_NAME=envdump",
                 "INSTANCE_NAME=%s" % NAME, "DISK_COUNT=1", "DISK_0_PATH=%s" % os.path.realpath(disk),
                 "DISK_0_ACCESS=rw", "NIC_0_MAC=aa:00:00:00:00:07", "OSP_COLOR=blue", "DEBUG_LEVEL=2",
                 "INSTANCE_REINSTALL=1", "HYPERVISOR=fake", "to-stderr"):
        assert line in log.splitlines(), line
    assert "HOME=" not in log  # a clean environment, not noded's


@pytest_twisted.ensureDeferred
async def test_failure_quotes_the_last_lines(setup):
    paths, cfg, node = setup
    write_os(paths, "failing", 'for i in $(seq 1 40); do echo "output $i"; done\nexit 7\n')
    records, data = instance(cfg, "failing", disks=0)
    with pytest.raises(RpcFailure) as info:
        await node.instance_os_add(data, False, 0)
    message = str(info.value)
    assert "exit code 7" in message and "output 40" in message and "output 21" in message
    assert "output 20\n" not in message and paths.os_log_dir in message


@pytest_twisted.ensureDeferred
async def test_timeout_kills_the_script_and_its_children(setup, tmp_path):
    paths, cfg, node = setup
    pid_file = tmp_path / "child.pid"
    write_os(paths, "hanging", "sleep 300 &\necho $! > %s\nsleep 300\n" % pid_file)
    records, data = instance(cfg, "hanging", disks=0)
    started = time.monotonic()
    with pytest.raises(RpcFailure, match="timed out after 3 seconds"):
        await node.instance_os_add(data, False, 0)
    assert time.monotonic() - started < 30
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        with open("/proc/%d/stat" % child) as handle:  # a zombie waiting for its new parent counts as gone
            if handle.read().split(") ")[-1].startswith("Z"):
                break
        time.sleep(0.05)
    else:
        raise AssertionError("the script's child %d survived the timeout" % child)


@pytest_twisted.ensureDeferred
async def test_noop_and_rename(setup):
    paths, cfg, node = setup
    records, data = instance(cfg, "noop", disks=0)
    await node.instance_os_add(data, False, 0)
    write_os(paths, "renamer", "exit 0\n")
    rename = os.path.join(paths.os_search_dir, "renamer", "rename")
    with open(rename, "w") as handle:
        handle.write('#!/bin/sh\necho "from $OLD_INSTANCE_NAME to $INSTANCE_NAME"\n')
    records, data = instance(cfg, "renamer", disks=0)
    await node.instance_run_rename(data, "old.example.test", 0)
    assert "from old.example.test to %s" % NAME in read_log(paths, "rename-renamer-")


@pytest_twisted.ensureDeferred
async def test_image_copies_the_file_onto_the_first_disk(setup, tmp_path):
    paths, cfg, node = setup
    image = tmp_path / "disk.img"
    image.write_bytes(b"BOOT" * 1000 + b"\0" * MIB)
    records, data = instance(cfg, "image", disks=2, osparams={"image": str(image)})
    first, second = create_disks(node, records)
    await node.instance_os_add(data, False, 0)
    with open(first, "rb") as handle:
        assert handle.read(4000) == b"BOOT" * 1000
    assert os.path.getsize(first) == 4 * MIB  # the disk keeps its size
    with open(second, "rb") as handle:
        assert handle.read(4) == b"\0" * 4


@pytest_twisted.ensureDeferred
async def test_image_errors(setup, tmp_path):
    paths, cfg, node = setup
    big = tmp_path / "big.img"
    big.write_bytes(b"x" * (5 * MIB))
    cases = [({}, "'image' is not set"), ({"image": str(tmp_path / "none.img")}, "does not exist"),
             ({"image": "http://example.test/x.img"}, "only local image files"),
             ({"image": str(big)}, "is larger than disk 0")]
    for osparams, fragment in cases:
        records, data = instance(cfg, "image", osparams=osparams)
        create_disks(node, records)
        with pytest.raises(RpcFailure) as info:
            await node.instance_os_add(data, False, 0)
        assert fragment in str(info.value), str(info.value)
        for record in records:
            node.blockdev_remove(record.to_dict())
    records, data = instance(cfg, "image", disks=0, osparams={"image": str(big)})
    with pytest.raises(RpcFailure, match="has no disk"):
        await node.instance_os_add(data, False, 0)
