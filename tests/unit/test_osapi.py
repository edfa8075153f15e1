"""The OS API: definitions, search path, script environment, the script protocol (no processes)."""

from __future__ import annotations

import os
import signal
import stat

import pytest
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from ganeti.backend import osapi
from ganeti.objects import NIC, Disk, Instance

SCRIPTS = ("create", "import", "export", "rename", "verify")


def write_os(directory, name, api="20\n", scripts=SCRIPTS, variants=None, parameters=None, mode=0o755):
    path = os.path.join(directory, name)
    os.makedirs(path, exist_ok=True)
    if api is not None:
        with open(os.path.join(path, "ganeti_api_version"), "w") as handle:
            handle.write(api)
    for script in scripts:
        script_path = os.path.join(path, script)
        with open(script_path, "w") as handle:
            handle.write("#!/bin/sh\nexit 0\n")
        os.chmod(script_path, mode)
    for file_name, lines in (("variants.list", variants), ("parameters.list", parameters)):
        if lines is not None:
            with open(os.path.join(path, file_name), "w") as handle:
                handle.write("\n".join(lines) + "\n")
    return path


@pytest.fixture
def search(root):
    os.makedirs(root.os_search_dir)
    return root


def test_search_path_puts_the_node_first(root):
    assert osapi.search_path(root) == [os.path.join(root.root, "srv/ganeti/os"), osapi.SHIPPED_DIR]


def test_shipped_definitions_are_valid_and_executable():
    for name in ("noop", "image"):
        definition = osapi.load(osapi.SHIPPED_DIR, name)
        assert definition.api_version == 20 and definition.trusted
        for script in SCRIPTS:
            mode = os.stat(definition.scripts[script]).st_mode
            assert mode & stat.S_IXUSR, (name, script)
    assert osapi.load(osapi.SHIPPED_DIR, "image").parameters[0][0] == "image"


def test_load_reads_variants_and_parameters(search):
    write_os(search.os_search_dir, "deb", variants=["bookworm", "trixie"],
             parameters=["mirror   The Debian mirror", "proxy"])
    definition = osapi.load(search.os_search_dir, "deb")
    assert definition.variants == ("bookworm", "trixie")
    assert definition.parameters == (("mirror", "The Debian mirror"), ("proxy", ""))
    assert definition.script("create").endswith("/deb/create")


def test_api_15_has_variants_but_no_parameters_nor_verify(search):
    write_os(search.os_search_dir, "old", api="10\n15\n", scripts=SCRIPTS[:4], variants=["a"], parameters=["p x"])
    definition = osapi.load(search.os_search_dir, "old")
    assert definition.api_version == 15 and definition.variants == ("a",) and definition.parameters == ()
    with pytest.raises(osapi.InvalidOS):
        definition.script("verify")


def test_untrusted_os_creates_with_create_untrusted(search):
    write_os(search.os_search_dir, "u", scripts=("create_untrusted", "import", "export", "rename"))
    definition = osapi.load(search.os_search_dir, "u")
    assert not definition.trusted and definition.script("create").endswith("/u/create_untrusted")


@pytest.mark.parametrize("kwargs, fragment", [
    ({"api": None}, "ganeti_api_version is missing"),
    ({"api": "10\n"}, "API version mismatch"),
    ({"api": "twenty\n"}, "one integer per line"),
    ({"scripts": ("create", "import", "export")}, "missing script(s) rename"),
    ({"scripts": ("import", "export", "rename")}, "missing script(s) create"),
    ({"mode": 0o644}, "not executable"),
])
def test_invalid_definitions(search, kwargs, fragment):
    write_os(search.os_search_dir, "bad", **kwargs)
    with pytest.raises(osapi.InvalidOS) as info:
        osapi.load(search.os_search_dir, "bad")
    assert fragment in str(info.value)


def test_find_takes_the_first_directory_and_the_variant(search):
    write_os(search.os_search_dir, "noop", variants=["one", "two"])  # shadows the shipped one
    definition, variant = osapi.find(search, "noop")
    assert definition.path == os.path.join(search.os_search_dir, "noop") and variant == "one"
    assert osapi.find(search, "noop+two")[1] == "two"
    with pytest.raises(osapi.InvalidOS, match="no variant"):
        osapi.find(search, "noop+three")
    assert osapi.find(search, "image+whatever")[1] == ""  # no variants: ignored
    for name in ("nosuch", "../etc", "", None, "a/b"):
        with pytest.raises(osapi.InvalidOS):
            osapi.find(search, name)


def test_an_invalid_first_match_is_not_skipped(search):
    write_os(search.os_search_dir, "image", api="5\n")
    with pytest.raises(osapi.InvalidOS, match="API version mismatch"):
        osapi.find(search, "image")


def test_diagnose_shape(search):
    write_os(search.os_search_dir, "deb", variants=["bookworm"], parameters=["mirror The mirror"])
    write_os(search.os_search_dir, "broken", api="99\n")
    entries = osapi.diagnose(search)
    assert [e[0] for e in entries][:2] == ["broken", "deb"]
    broken, deb = entries[:2]
    assert broken[2] is False and "API version mismatch" in broken[3]
    assert deb == ["deb", os.path.join(search.os_search_dir, "deb"), True, "", ["bookworm"],
                   [["mirror", "The mirror"]], [20], True]
    assert {e[0] for e in entries if e[1].startswith(osapi.SHIPPED_DIR)} == {"noop", "image"}


def test_script_environment(search):
    write_os(search.os_search_dir, "deb", variants=["bookworm"])
    definition, variant = osapi.find(search, "deb")
    instance = Instance(
        name="i1.test", uuid="u-1", os="deb", hypervisor="kvm",
        hvparams={"disk_type": "paravirtual", "nic_type": "e1000", "kernel_path": ""},
        beparams={"maxmem": 512, "auto_balance": True},
        osparams={"mirror": "http://m", "some-param": 3}, osparams_private={"secret": "s3"},
        nics=[NIC(mac="aa:00:00:00:00:01", nicparams={"mode": "bridged", "link": "br0", "vlan": ""}),
              NIC(mac="aa:00:00:00:00:02", ip="192.0.2.2", nicparams={"mode": "routed", "link": "rt"})],
    )
    disks = [(Disk(dev_type="sharedfile", logical_id=["loop", "/x/d0"], mode="ro", uuid="d-0", name="root"), "/r/x/d0"),
             (Disk(dev_type="plain", logical_id=["vg", "lv"]), "/dev/vg/lv")]
    env = osapi.script_environment(definition, variant, instance, disks, 2, {"OLD_INSTANCE_NAME": "i0.test"})
    expected = {
        "OS_API_VERSION": "20", "OS_NAME": "deb", "OS_VARIANT": "bookworm", "DEBUG_LEVEL": "2",
        "INSTANCE_NAME": "i1.test", "INSTANCE_OS": "deb", "HYPERVISOR": "kvm", "INSTANCE_UUID": "u-1",
        "DISK_COUNT": "2", "DISK_0_PATH": "/r/x/d0", "DISK_0_ACCESS": "ro", "DISK_0_UUID": "d-0",
        "DISK_0_NAME": "root", "DISK_0_FRONTEND_TYPE": "paravirtual", "DISK_0_BACKEND_TYPE": "file:loop",
        "DISK_1_PATH": "/dev/vg/lv", "DISK_1_ACCESS": "rw", "DISK_1_BACKEND_TYPE": "block",
        "DISK_1_FRONTEND_TYPE": "paravirtual",
        "NIC_COUNT": "2", "NIC_0_MAC": "aa:00:00:00:00:01", "NIC_0_MODE": "bridged", "NIC_0_LINK": "br0",
        "NIC_0_BRIDGE": "br0", "NIC_0_FRONTEND_TYPE": "e1000",
        "NIC_1_MAC": "aa:00:00:00:00:02", "NIC_1_IP": "192.0.2.2", "NIC_1_MODE": "routed", "NIC_1_LINK": "rt",
        "NIC_1_FRONTEND_TYPE": "e1000",
        "INSTANCE_BE_maxmem": "512", "INSTANCE_BE_auto_balance": "True",
        "INSTANCE_HV_disk_type": "paravirtual", "INSTANCE_HV_nic_type": "e1000", "INSTANCE_HV_kernel_path": "",
        "OSP_MIRROR": "http://m", "OSP_SOME_PARAM": "3", "OSP_SECRET": "s3",
        "OLD_INSTANCE_NAME": "i0.test", "PATH": osapi.SCRIPT_PATH,
    }
    assert env == expected


def test_api_15_environment_has_no_os_parameters(search):
    write_os(search.os_search_dir, "old", api="15\n", scripts=SCRIPTS[:4])
    definition, variant = osapi.find(search, "old")
    env = osapi.script_environment(definition, variant, Instance(name="i", osparams={"a": "b"}), [], 0)
    assert env["OS_API_VERSION"] == "15" and env["OS_VARIANT"] == "" and "OSP_A" not in env
    assert env["DISK_COUNT"] == "0" and env["NIC_COUNT"] == "0"


class FakeProcess(StringTransport):
    def __init__(self, pid):
        super().__init__()
        self.pid = pid
        self.signals = []

    def signalProcess(self, name):
        self.signals.append(name)


def test_protocol_kills_the_session_after_the_timeout():
    clock, killed = Clock(), []
    protocol = osapi.ScriptProtocol(clock, 30, kill_group=lambda pid, sig: killed.append((pid, sig)))
    protocol.makeConnection(FakeProcess(4242))
    clock.advance(29)
    assert killed == []
    clock.advance(1)
    assert killed == [(4242, signal.SIGKILL)]
    protocol.processEnded(Failure(ProcessTerminated(signal=9)))
    failure = []
    protocol.ended.addErrback(failure.append)
    assert "timed out after 30 seconds" in str(failure[0].value)


def test_protocol_falls_back_to_the_process_when_the_group_is_gone():
    def gone(pid, sig):
        raise ProcessLookupError()

    clock, process = Clock(), FakeProcess(4242)
    protocol = osapi.ScriptProtocol(clock, 5, kill_group=gone)
    protocol.makeConnection(process)
    clock.advance(5)
    assert process.signals == ["KILL"]


def test_protocol_outcomes():
    outcomes = []
    for reason in (ProcessDone(0), ProcessTerminated(exitCode=2), ProcessTerminated(signal=15)):
        clock = Clock()
        protocol = osapi.ScriptProtocol(clock, 5, kill_group=lambda pid, sig: None)
        protocol.makeConnection(FakeProcess(1))
        protocol.processEnded(Failure(reason))
        protocol.ended.addBoth(outcomes.append)
        assert clock.getDelayedCalls() == []  # the timer is gone
    assert outcomes[0] is None
    assert str(outcomes[1].value) == "exit code 2" and str(outcomes[2].value) == "killed by signal 15"


def test_log_files_are_unique_and_tail_reads_the_end(tmp_path):
    log_dir = str(tmp_path / "os")
    first, fd1 = osapi.open_log(log_dir, "create", "image+v", "i1.test", clock=lambda: 0)
    second, fd2 = osapi.open_log(log_dir, "create", "image+v", "i1.test", clock=lambda: 0)
    os.write(fd1, b"".join(b"line %d\n" % i for i in range(100)))
    os.close(fd1)
    os.close(fd2)
    assert first != second and os.path.basename(first).startswith("create-image+v-i1.test-")
    assert osapi.log_tail(first, 3) == "line 97\nline 98\nline 99"
    assert osapi.log_tail(second) == "" and osapi.log_tail(str(tmp_path / "none")) == ""
