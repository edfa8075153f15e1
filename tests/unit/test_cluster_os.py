"""The OS parts of OP_CLUSTER_SET_PARAMS (gnt-os modify), as Ganeti changes them."""

from __future__ import annotations

import pytest

from ganeti import errors
from ganeti.cmdlib import cluster_os as c


def test_os_hvp_merges_per_hypervisor_and_drops_empty_oses():
    current = {"debian": {"kvm": {"kernel_path": "/a", "serial_console": True}}}
    changed = c.os_hvp_changed(current, {"debian": {"kvm": {"kernel_path": "/b"}, "xen-pvm": None},
                                         "alpine": {"kvm": {"kernel_path": "/c"}}})
    assert changed == {"debian": {"kvm": {"kernel_path": "/b", "serial_console": True}},
                       "alpine": {"kvm": {"kernel_path": "/c"}}}
    assert current["debian"]["kvm"]["kernel_path"] == "/a"  # the current value is not changed in place
    assert c.os_hvp_changed(changed, {"alpine": {"kvm": None}}) == {"debian": changed["debian"]}


def test_osparams_default_or_null_removes_a_parameter_and_the_last_the_os():
    current = {"debian": {"mirror": "local", "suite": "bookworm"}}
    assert c.osparams_changed(current, {"debian": {"mirror": "default", "arch": "amd64"}}) == \
        {"debian": {"suite": "bookworm", "arch": "amd64"}}
    assert c.osparams_changed(current, {"debian": {"mirror": None, "suite": "default"}}) == {}
    with pytest.raises(errors.OpPrereqError, match="Invalid OS parameters of OS debian"):
        c.osparams_changed(current, {"debian": "mirror=local"})


def test_os_lists_add_remove_and_say_what_was_ignored():
    said: list[str] = []
    out = c.os_list_changed(["debian"], [["add", "alpine"], ["add", "debian"], ["remove", "gentoo"],
                                         ["remove", "debian"]], "hidden", said.append)
    assert out == ["alpine"]
    assert said == ["OS debian already in hidden OS list, ignoring", "OS gentoo not found in hidden OS list, ignoring"]
    with pytest.raises(errors.OpPrereqError, match="Invalid modification 'toggle'"):
        c.check_os_mods([["toggle", "debian"]], "hidden")


def test_os_hvp_parameters_are_typed():
    with pytest.raises(errors.OpPrereqError):
        c.check_os_hvp({"debian": {"kvm": {"no_such_param": "1"}}})
    with pytest.raises(errors.OpPrereqError, match="a dict of hypervisor"):
        c.check_os_hvp({"debian": ["kvm"]})
    assert c.check_os_hvp({"debian": {"kvm": None}}) == {"debian": {"kvm": None}}
