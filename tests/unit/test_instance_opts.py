"""The option values of gnt-instance (sizes, key=value lists, typed
parameters, disk and NIC modifications) and the list commands' filter
language."""

from __future__ import annotations

from typing import Any

import pytest

from ganeti import errors
from ganeti.client import instance_opts as iopts
from ganeti.client import qfilter


# --- value parsing ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, mib",
    [("512", 512), ("512M", 512), ("513", 516), ("1G", 1024), ("1.5g", 1536), ("2T", 2 * 1024 * 1024),
     ("10GiB", 10240), ("0.1", 4), ("1 gb", 1024)],
)
def test_sizes(text: str, mib: int) -> None:
    assert iopts.parse_size(text) == mib


@pytest.mark.parametrize("text", ["", "abc", "1X", "-1G", "1.2.3M"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(ValueError):
        iopts.parse_size(text)


def test_key_values() -> None:
    assert iopts.key_values("a=1,b,no_c,-d,e=x\\,y,f=") == {"a": "1", "b": True, "c": False, "d": None,
                                                            "e": "x,y", "f": ""}
    assert iopts.key_values("") == {}
    assert iopts.ident_key_values("0:size=1G,mode=ro") == ("0", {"size": "1G", "mode": "ro"})
    assert iopts.ident_key_values("kvm") == ("kvm", {})
    assert iopts.ident_key_values("no_1") == ("1", False)
    assert iopts.ident_key_values("-1") == ("-1", {})
    assert iopts.ident_key_values("-x") == ("x", None)


def test_typed_parameters() -> None:
    assert iopts.be_params({"memory": "1G", "maxmem": "512", "vcpus": "2", "auto_balance": "false",
                            "always_failover": True}) == {"memory": 1024, "maxmem": 512, "vcpus": 2,
                                                          "auto_balance": False, "always_failover": True}
    assert iopts.be_params({"maxmem": "default", "vcpus": None}, allow_reset=True) == {"maxmem": "default",
                                                                                      "vcpus": None}
    assert iopts.hv_params({"acpi": "false", "cpu_cores": "2", "kernel_path": "", "boot_order": "disk",
                            "vnc_bind_address": False, "new_param": "x"}) == {
        "acpi": False, "cpu_cores": 2, "kernel_path": "", "boot_order": "disk", "vnc_bind_address": "",
        "new_param": "x"}
    for bad in ({"vcpus": "two"}, {"maxmem": "lots"}, {"auto_balance": "maybe"}, {"colour": "red"},
                {"maxmem": None}, {"vcpus": True}):
        with pytest.raises(iopts.TypeEnforcementError):
            iopts.be_params(bad)


def test_modifications() -> None:
    mods = iopts.modifications([("add", {"size": "1G", "mode": "ro"}), ("1", {"remove": True}),
                                ("data", {"name": "new"}), ("2", {"add": True, "size": "8"}),
                                ("remove", {})], "disk")
    assert mods == [["add", -1, {"size": 1024, "mode": "ro"}], ["remove", 1, {}], ["modify", "data", {"name": "new"}],
                    ["add", 2, {"size": 8}], ["remove", -1, {}]]
    assert iopts.modifications([("add", {"mac": "generate", "link": "br0"}), ("0", {"ip": "192.0.2.9"}),
                                ("-1", {"remove": True})], "nic") == [
        ["add", -1, {"mac": "generate", "link": "br0"}], ["modify", 0, {"ip": "192.0.2.9"}], ["remove", -1, {}]]


@pytest.mark.parametrize(
    "items, what, message",
    [
        ([("add", {})], "disk", "Missing size of the new disk"),
        ([("0", {"remove": True, "size": "1G"})], "disk", "No parameters allowed when removing"),
        ([("0", {"remove": True, "add": True})], "disk", "Cannot do more than one of add, remove"),
        ([("0", {"colour": "red"})], "nic", "Unknown parameter 'colour'"),
        ([("0", {"mode": "bridge"})], "nic", "Invalid mode 'bridge'"),
        ([("0", False)], "nic", "Invalid nic modification '0'"),
        ([("add", {"size": "big"})], "disk", "Invalid disk size for disk add"),
    ],
)
def test_bad_modifications(items: Any, what: str, message: str) -> None:
    with pytest.raises(errors.OpPrereqError, match=message):
        iopts.modifications(items, what)


# --- filters ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        ('status == "running"', ["==", "status", "running"]),
        ("admin_up", ["?", "admin_up"]),
        ("not admin_up", ["!", ["?", "admin_up"]]),
        ("oper_ram >= 512 and be/vcpus < 4", ["&", [">=", "oper_ram", 512], ["<", "be/vcpus", 4]]),
        ("a or b and c", ["|", ["?", "a"], ["&", ["?", "b"], ["?", "c"]]]),
        ("(a or b) and not c", ["&", ["|", ["?", "a"], ["?", "b"]], ["!", ["?", "c"]]]),
        ("'prod' in tags", ["=[]", "tags", "prod"]),
        ("\"prod\" not in tags", ["!", ["=[]", "tags", "prod"]]),
        ("name =~ /^web[0-9]+$/", ["=~", "name", "^web[0-9]+$"]),
        ("name =~ m#a/b#i", ["=~", "name", "(?i)a/b"]),
        ("name !~ /x/", ["!", ["=~", "name", "x"]]),
        ('pnode =* "node1*"', ["=~", "pnode", "^node1[^.]*(\\..*)?$"]),
        ("pnode !* 'n?'", ["!", ["=~", "pnode", "^n[^.](\\..*)?$"]]),
        ("disk.count != -1", ["!=", "disk.count", -1]),
        ("android and orchid", ["&", ["?", "android"], ["?", "orchid"]]),
    ],
)
def test_filter_language(text: str, expected: Any) -> None:
    assert qfilter.parse_filter(text) == expected


@pytest.mark.parametrize("text", ["", "status ==", "(a", "a b", "'x' in", "name =~ /x", "name =~ /x/q",
                                  "== 1", "'unterminated", "a and", "1 tags"])
def test_bad_filters(text: str) -> None:
    with pytest.raises(errors.QueryFilterParseError):
        qfilter.parse_filter(text)


def test_names_and_globs_make_filters() -> None:
    assert qfilter.make_filter([]) is None
    assert qfilter.make_filter(["web1", "db*"]) == ["|", ["==", "name", "web1"], ["=~", "name", "^db[^.]*(\\..*)?$"]]
    assert qfilter.make_filter(["status == 'running'"]) == ["==", "status", "running"]
    assert qfilter.make_filter(["web1"], force_filter=True) == ["?", "web1"]
    with pytest.raises(errors.OpPrereqError):
        qfilter.make_filter(["a", "b"], force_filter=True)
