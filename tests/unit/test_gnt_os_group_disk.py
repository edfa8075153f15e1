"""gnt-os list|diagnose, gnt-group assign-nodes|modify and gnt-instance
grow-disk: the opcodes their options become, and what they print (a fake
LUXI client; no daemons)."""

from __future__ import annotations

import io
from types import ModuleType
from typing import Any

import pytest

from ganeti import opcodes
from ganeti.client import gnt_group, gnt_instance, gnt_os
from ganeti.client.runner import run
from tests.unit.test_cli import FakeClient

GENERIC = ("debug_level", "dry_run", "priority", "reason")
TOOLS: dict[str, ModuleType] = {"gnt-os": gnt_os, "gnt-group": gnt_group, "gnt-instance": gnt_instance}


class NoClient(FakeClient):
    def _answer(self, method: str, *args: Any) -> Any:
        raise AssertionError("unexpected LUXI call %s%r" % (method, args))


def gnt(tool: str, *argv: str, fake: FakeClient | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    module = TOOLS[tool]
    client = fake if fake is not None else NoClient()
    code = run(tool, module.COMMANDS, list(argv), aliases=getattr(module, "ALIASES", None),
                   client_factory=lambda ctx: client, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def following(opresult: Any = None, status: str = "success") -> FakeClient:
    return FakeClient(SubmitJob=17, WaitForJobChange=[[["running"], []], [[status], []]],
                      QueryJobs=[[[status, [status], [opresult]]]])


def submitted(fake: FakeClient) -> dict[str, Any]:
    ((ops,),) = fake.args("SubmitJob")
    (op,) = ops
    assert opcodes.validate(op)["OP_ID"] == op["OP_ID"]
    return {key: value for key, value in op.items() if key not in GENERIC}


# --- gnt-os ---------------------------------------------------------------------------------------
def test_os_list() -> None:
    fake = following([["debootstrap", ["default", "minimal"]], ["noop", []]])
    assert gnt("gnt-os", "list", fake=fake) == (0, "Name\ndebootstrap+default\ndebootstrap+minimal\nnoop\n", "")
    assert submitted(fake) == {"OP_ID": "OP_OS_DIAGNOSE", "output_fields": ["name", "variants"], "names": []}
    fake = following([["noop", []]])
    assert gnt("gnt-os", "list", "--no-headers", fake=fake) == (0, "noop\n", "")


DIAGNOSED = [
    ["noop", True, [], {"node2.test": [["/os/noop", True, "", [], [], [20], True]],
                        "node10.test": [["/os/noop", True, "", [], [], [20], True],
                                        ["/usr/os/noop", False, "no create script", [], [], [], True]]},
     False, False],
    ["deb", False, ["default"], {"node2.test": [["/os/deb", True, "", ["default"], [["dhcp", "use dhcp"]], [20, 15],
                                                 True]],
                                 "node10.test": []}, True, False],
    ["old", False, [], {"node2.test": [["/os/old", False, "bad API version", [], [], [], False]]}, False, True],
]


def test_os_diagnose() -> None:
    fake = following(DIAGNOSED)
    code, out, err = gnt("gnt-os", "diagnose", fake=fake)
    assert (code, err) == (1, "")
    assert submitted(fake)["output_fields"] == ["name", "valid", "variants", "node_status", "hidden", "blacklisted"]
    assert out.splitlines() == [
        "OS: noop [global status: valid]",
        "  Node: node2.test, status: valid (path: /os/noop) [API versions: 20] [no variants] [no parameters]",
        "  Node: node10.test, status: valid (path: /os/noop) [API versions: 20] [no variants] [no parameters]",
        "    [hidden] path: /usr/os/noop, status: invalid - no create script",
        "",
        "OS: deb [global status: partial valid] [hidden]",
        "  Variants: [default]",
        "  Node: node2.test, status: valid (path: /os/deb) [API versions: 20, 15] [variants: default]"
        " [parameters: dhcp]",
        "  Node: node10.test, status: OS not found",
        "",
        "OS: old [global status: invalid] [blacklisted]",
        "  Node: node2.test, status: invalid - bad API version (path: /os/old) [no API versions declared]",
        "",
    ]
    code, out, _ = gnt("gnt-os", "diagnose", fake=following(DIAGNOSED[:1]))
    assert code == 0 and out.startswith("OS: noop [global status: valid]\n")


# --- gnt-group ----------------------------------------------------------------------------------
def test_group_assign_nodes() -> None:
    fake = following()
    assert gnt("gnt-group", "assign-nodes", "rack2", "node2", "node3", fake=fake) == (0, "", "")
    assert submitted(fake) == {"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": "rack2",
                               "nodes": ["node2", "node3"], "force": False}
    fake = following()
    gnt("gnt-group", "assign-nodes", "--force", "--dry-run", "rack2", "node2", fake=fake)
    ((ops,),) = fake.args("SubmitJob")
    assert (ops[0]["force"], ops[0]["dry_run"]) == (True, True)


def test_group_modify() -> None:
    result = [["alloc_policy", "last_resort"], ["ndparams", "{'ssh_port': 2222}"]]
    fake = following(result)
    code, out, err = gnt("gnt-group", "modify", "--alloc-policy", "last_resort", "-N", "ssh_port=2222", "rack2",
                         fake=fake)
    assert (code, err) == (0, "")
    assert out == "Modified node group rack2\n - alloc_policy -> last_resort\n - ndparams -> {'ssh_port': 2222}\n"
    assert submitted(fake) == {"OP_ID": "OP_GROUP_SET_PARAMS", "group_name": "rack2",
                               "alloc_policy": "last_resort", "ndparams": {"ssh_port": "2222"}}
    fake = following([])
    gnt("gnt-group", "modify", "-D", "plain:stripes=2", "--hypervisor-state", "fake:mem_total=1024",
        "--disk-state", "file/srv:disk_total=10", "--ipolicy-vcpu-ratio", "2", "--ipolicy-disk-templates",
        "file,sharedfile", "rack2", fake=fake)
    assert submitted(fake) == {
        "OP_ID": "OP_GROUP_SET_PARAMS", "group_name": "rack2", "diskparams": {"plain": {"stripes": "2"}},
        "hv_state": {"fake": {"mem_total": "1024"}}, "disk_state": {"file": {"srv": {"disk_total": "10"}}},
        "ipolicy": {"vcpu-ratio": "2", "disk-templates": ["file", "sharedfile"]}}


def test_group_modify_needs_a_change() -> None:
    assert gnt("gnt-group", "modify", "rack2") == (1, "", "Please give at least one of the parameters.\n")
    code, _, err = gnt("gnt-group", "modify", "--disk-state", "file:disk_total=1", "rack2")
    assert code == 1 and "STORAGE_TYPE/NAME" in err


@pytest.mark.parametrize("argv", [
    ("gnt-group", "assign-nodes", "rack2"),
    ("gnt-group", "modify", "--alloc-policy", "sometimes", "rack2"),
    ("gnt-group", "modify", "-N", "=1", "rack2"),
    ("gnt-instance", "grow-disk", "web1", "0"),
    ("gnt-os", "list", "extra"),
])
def test_bad_usage(argv: tuple[str, ...]) -> None:
    code, out, err = gnt(*argv)
    assert code == 2 and out == "" and err


# --- gnt-instance grow-disk ----------------------------------------------------------------------
def test_grow_disk() -> None:
    fake = following()
    assert gnt("gnt-instance", "grow-disk", "web1", "1", "1G", fake=fake) == (0, "", "")
    assert submitted(fake) == {"OP_ID": "OP_INSTANCE_GROW_DISK", "instance_name": "web1", "disk": 1,
                               "amount": 1024, "wait_for_sync": True, "absolute": False, "ignore_ipolicy": False}
    fake = following()
    gnt("gnt-instance", "grow-disk", "--absolute", "--no-wait-for-sync", "web1", "0", "10", fake=fake)
    op = submitted(fake)
    assert (op["amount"], op["absolute"], op["wait_for_sync"]) == (12, True, False)  # rounded up to 4 MiB


def test_grow_disk_bad_values() -> None:
    code, _, err = gnt("gnt-instance", "grow-disk", "web1", "first", "1G")
    assert code == 1 and "Invalid disk index" in err
    code, _, err = gnt("gnt-instance", "grow-disk", "web1", "0", "lots")
    assert code == 1 and "Can't parse the given amount 'lots'" in err


@pytest.mark.parametrize("tool,command", [("gnt-os", "list"), ("gnt-os", "diagnose"), ("gnt-group", "assign-nodes"),
                                          ("gnt-group", "modify"), ("gnt-instance", "grow-disk")])
def test_help(tool: str, command: str) -> None:
    code, out, err = gnt(tool, command, "--help")
    assert (code, err) == (0, "")
    assert out.startswith("usage: %s %s" % (tool, command))
    assert TOOLS[tool].COMMANDS[command].help.split()[0] in out
