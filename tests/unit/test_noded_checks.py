"""NodeD's check, validation and small node procedures (L{ganeti.noded.checks},
L{ganeti.noded.restricted}): answers, refusals, nothing changed on bad input."""

from __future__ import annotations

import os
import stat
from typing import Any

import pytest
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import Clock

from ganeti import ssconf
from ganeti.heartbeat import pause as watcher
from ganeti.noded import restricted
from ganeti.noded.failure import RpcFailure
from ganeti.noded.procedures import NodeProcedures


def _node(root: Any) -> NodeProcedures:
    root.ensure_dirs()
    return NodeProcedures(root, Clock())


def _result(value: Any) -> Any:
    """The outcome of a coroutine or Deferred that needs no reactor turn."""
    out: list[Any] = []
    ensureDeferred(value).addBoth(out.append) if not hasattr(value, "addBoth") else value.addBoth(out.append)
    assert out, "did not finish"
    if hasattr(out[0], "raiseException"):
        out[0].raiseException()
    return out[0]


def write_os(root: Any, name: str, *, variants: list[str] | None = None, parameters: list[str] | None = None,
             verify: str | None = "#!/bin/sh\nexit 0\n") -> str:
    path = os.path.join(root.os_search_dir, name)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "ganeti_api_version"), "w") as handle:
        handle.write("20\n")
    scripts = {script: "#!/bin/sh\nexit 0\n" for script in ("create", "import", "export", "rename")}
    if verify is not None:
        scripts["verify"] = verify
    for script, text in scripts.items():
        with open(os.path.join(path, script), "w") as handle:
            handle.write(text)
        os.chmod(os.path.join(path, script), 0o755)
    for file_name, lines in (("variants.list", variants), ("parameters.list", parameters)):
        if lines is not None:
            with open(os.path.join(path, file_name), "w") as handle:
                handle.write("\n".join(lines) + "\n")
    return path


# --- os_validate ---------------------------------------------------------------------------


def test_os_validate_runs_the_verify_script_with_the_parameters(root):
    procs = _node(root)
    seen = os.path.join(root.root, "seen")
    write_os(root, "deb", variants=["bookworm"], parameters=["mirror URL of the mirror"],
             verify="#!/bin/sh\necho \"$OS_VARIANT $OSP_MIRROR $*\" > %s\n" % seen)
    assert _result(procs.checks.os_validate(True, "deb+bookworm", ["parameters"], {"mirror": "http://m"})) is True
    with open(seen) as handle:
        assert handle.read().split() == ["bookworm", "http://m", "parameters"]


def test_a_failing_verify_script_fails_with_its_output(root):
    procs = _node(root)
    write_os(root, "deb", parameters=["mirror x"], verify="#!/bin/sh\necho 'mirror unreachable' >&2\nexit 3\n")
    with pytest.raises(RpcFailure, match="exit code 3.*mirror unreachable"):
        _result(procs.checks.os_validate(True, "deb", ["parameters"], {"mirror": "http://m"}))


@pytest.mark.parametrize("name, params, checks, message", [
    ("deb", {}, ["parameters"], "must include a variant"),
    ("deb+sid", {}, ["parameters"], "does not support variant 'sid'"),
    ("deb+bookworm", {"size": "1"}, ["parameters"], "not supported by the OS deb: size"),
    ("deb+bookworm", {}, ["reboot"], "Unknown checks"),
    ("nosuch", {}, [], "OS nosuch not found"),
])
def test_os_validate_refuses_what_ganeti_refuses(root, name, params, checks, message):
    procs = _node(root)
    write_os(root, "deb", variants=["bookworm"], parameters=["mirror x"])
    with pytest.raises(RpcFailure, match=message):
        _result(procs.checks.os_validate(True, name, checks, params))


def test_an_absent_os_that_is_not_required_is_false_and_force_variant_skips_the_variant_check(root):
    procs = _node(root)
    write_os(root, "deb", variants=["bookworm"])
    assert _result(procs.checks.os_validate(False, "nosuch", [], {})) is False
    assert _result(procs.checks.os_validate(True, "deb", [], {}, True)) is True


# --- hypervisor_validate_params --------------------------------------------------------------


def test_hypervisor_params_are_typed_and_their_files_must_exist_on_the_node(root):
    procs = _node(root)
    procs.checks.hypervisor_validate_params("fake", {"migration_mode": "live"})
    kernel = os.path.join(root.root, "vmlinuz")
    open(kernel, "w").close()
    procs.checks.hypervisor_validate_params("kvm", {"kernel_path": "/vmlinuz", "acpi": True})
    with pytest.raises(RpcFailure, match="kernel_path.*not a file: /boot/nothing"):
        procs.checks.hypervisor_validate_params("kvm", {"kernel_path": "/boot/nothing"})
    with pytest.raises(RpcFailure, match="acpi"):
        procs.checks.hypervisor_validate_params("kvm", {"acpi": "maybe"})
    with pytest.raises(RpcFailure, match="SPICE"):
        procs.checks.hypervisor_validate_params("kvm", {"spice_bind": "0.0.0.0"})
    with pytest.raises(RpcFailure, match="xen-pvm"):
        procs.checks.hypervisor_validate_params("xen-pvm", {})


# --- small node facts ----------------------------------------------------------------------


def test_watcher_pause_is_the_nodes_pause_file(root):
    procs = _node(root)
    procs.checks.clock = lambda: 1000.0
    assert procs.checks.get_watcher_pause() is None
    procs.checks.set_watcher_pause(1500)
    assert procs.checks.get_watcher_pause() == 1500
    assert watcher.read_pause(watcher.pause_file(root.data_dir), 1000.0) == 1500
    with pytest.raises(RpcFailure, match="numeric"):
        procs.checks.set_watcher_pause("soon")
    assert procs.checks.get_watcher_pause() == 1500
    procs.checks.set_watcher_pause(None)
    assert procs.checks.get_watcher_pause() is None


def test_file_info_and_ip_address(root):
    procs = _node(root)
    with open(os.path.join(root.root, "f"), "w") as handle:
        handle.write("12345")
    assert procs.checks.get_file_info("/f") == [True, {"size": 5}]
    assert procs.checks.get_file_info("/missing") == [False, {}]
    with pytest.raises(RpcFailure, match="'..'"):
        procs.checks.get_file_info("/../etc/passwd")
    assert procs.checks.node_has_ip_address("127.0.0.1") is True
    assert procs.checks.node_has_ip_address("192.0.2.77") is False
    with pytest.raises(RpcFailure, match="Invalid IP"):
        procs.checks.node_has_ip_address("node1")


def test_storage_units_here_have_nothing_to_modify_or_execute(root):
    procs = _node(root)
    with pytest.raises(RpcFailure, match="type 'file' can not be modified"):
        procs.checks.storage_modify("file", [["/srv"]], "/srv", {"allocatable": False})
    with pytest.raises(RpcFailure, match="'fix-consistency' is not supported.*'file'"):
        procs.checks.storage_execute("file", [["/srv"]], "/srv", "fix-consistency")
    with pytest.raises(RpcFailure, match="Unknown storage type 'lvm-vg'"):
        procs.checks.storage_modify("lvm-vg", [["xenvg"]], "xenvg", {})


# --- file storage directories --------------------------------------------------------------


def test_file_storage_dirs_below_the_storage_directory_only(root):
    procs = _node(root)
    ssconf.write_files(root, {"file_storage_dir": "/srv/ganeti/file-storage",
                                        "shared_file_storage_dir": "/srv/ganeti/shared-file-storage"})
    real = os.path.join(root.root, "srv/ganeti/file-storage/inst1")
    procs.checks.file_storage_dir_create("/srv/ganeti/file-storage/inst1")
    procs.checks.file_storage_dir_create("/srv/ganeti/file-storage/inst1")
    assert os.path.isdir(real)
    procs.checks.file_storage_dir_rename("/srv/ganeti/file-storage/inst1", "/srv/ganeti/file-storage/inst2")
    procs.checks.file_storage_dir_rename("/srv/ganeti/file-storage/inst1", "/srv/ganeti/file-storage/inst2")
    assert not os.path.exists(real) and os.path.isdir(real[:-1] + "2")
    open(os.path.join(real[:-1] + "2", "disk0"), "w").close()
    with pytest.raises(RpcFailure, match="Cannot remove"):
        procs.checks.file_storage_dir_remove("/srv/ganeti/file-storage/inst2")
    os.unlink(os.path.join(real[:-1] + "2", "disk0"))
    procs.checks.file_storage_dir_remove("/srv/ganeti/file-storage/inst2")
    assert not os.path.exists(real[:-1] + "2")
    for bad in ("/etc/ganeti", "/srv/ganeti/file-storage", "/srv/ganeti/file-storage/../../x", "relative"):
        with pytest.raises(RpcFailure):
            procs.checks.file_storage_dir_create(bad)
    assert not os.path.exists(os.path.join(root.root, "x"))


# --- restricted_command --------------------------------------------------------------------


def _command(root: Any, name: str, text: str, mode: int = 0o755) -> str:
    directory = restricted.commands_dir(root)
    os.makedirs(directory, exist_ok=True)
    os.chmod(directory, 0o755)
    path = os.path.join(directory, name)
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, mode)
    return path


def test_a_restricted_command_runs_with_an_empty_environment_and_answers_its_output(root):
    procs = _node(root)
    _command(root, "hello", "#!/bin/sh\necho hello from $(pwd) ${HOME:-nohome}\n")
    assert _result(procs.restricted.restricted_command("hello")) == "hello from / nohome\n"
    _command(root, "broken", "#!/bin/sh\necho oops\nexit 2\n")
    with pytest.raises(RpcFailure, match="'broken' failed: exited with exit code 2; output: oops"):
        _result(procs.restricted.restricted_command("broken"))


@pytest.mark.parametrize("name, setup", [
    ("../../bin/sh", None),
    ("missing", None),
    ("writable", lambda root: _command(root, "writable", "#!/bin/sh\ntrue\n", 0o777)),
    ("notexec", lambda root: _command(root, "notexec", "#!/bin/sh\ntrue\n", 0o644)),
    ("opendir", lambda root: (_command(root, "opendir", "#!/bin/sh\ntrue\n"),
                              os.chmod(restricted.commands_dir(root), 0o777))),
])
def test_a_refused_command_answers_after_the_delay_without_saying_why(root, name, setup):
    procs = _node(root)
    clock = procs.restricted._reactor
    if setup is not None:
        setup(root)
    out: list[Any] = []
    ensureDeferred(procs.restricted.restricted_command(name)).addBoth(out.append)
    assert out == []
    clock.advance(restricted.INVALID_DELAY)
    assert len(out) == 1 and out[0].check(RpcFailure)
    assert str(out[0].value) == "Executing command '%s' failed" % name


def test_the_directory_must_be_the_daemons_own(root):
    directory = restricted.commands_dir(root)
    os.makedirs(directory)
    os.chmod(directory, 0o755)
    ok, why = restricted.prepare(directory, "x", (os.geteuid() + 1, os.getegid()))
    assert not ok and "is not owned by" in why
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o755


# --- instance_migratable -------------------------------------------------------------------


def test_an_instance_is_migratable_from_here_only_while_it_runs_here(root):
    from tests.unit.test_noded_instances import create_disks, encoded, initial_config, make_instance

    procs = _node(root)
    cfg = initial_config("cluster.test", "node1.test", "127.0.1.1")
    inst, records = make_instance(cfg)
    data = encoded(cfg, inst, records)
    create_disks(procs.instances, records)
    with pytest.raises(RpcFailure, match="is not running"):
        _result(procs.checks.instance_migratable(data))
    _result(procs.instances.instance_start(data, False, []))
    assert _result(procs.checks.instance_migratable(data)) is None
