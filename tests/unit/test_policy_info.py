"""The instance-policy output of gnt-group info / show-ispecs-cmd and the
--ipolicy-bounds-specs option (ganeti.client.policy_info), as Ganeti lays them out."""

from __future__ import annotations

import argparse

import pytest

from ganeti.client import policy_info as p

SPEC = "cpu-count=1,disk-count=1,disk-size=1G,memory-size=128,nic-count=1,spindle-use=1"


def test_bounds_specs_parse_units_and_pairs():
    (pair,) = p.bounds_specs("min:%s/max:%s" % (SPEC, SPEC.replace("1G", "2G")))
    assert pair["min"]["disk-size"] == 1024 and pair["max"]["disk-size"] == 2048
    assert pair["min"]["memory-size"] == 128 and pair["min"]["cpu-count"] == 1
    assert len(p.bounds_specs("min:%s/max:%s//min:%s/max:%s" % (SPEC, SPEC, SPEC, SPEC))) == 2


@pytest.mark.parametrize("text, error", [
    ("min:cpu-count=1/max:%s" % SPEC, "Missing parameters in ipolicy spec min: disk-count"),
    ("low:%s/max:%s" % (SPEC, SPEC), "Invalid key in bounds instance specifications: low"),
    ("min:%s" % SPEC, "needs both min and max"),
    ("min:%s,colour=red/max:%s" % (SPEC, SPEC), "Invalid parameter 'colour=red' in min"),
    ("min:%s/max:%s" % (SPEC.replace("nic-count=1", "nic-count=x"), SPEC), "Invalid parameter nic-count (x)"),
])
def test_bounds_specs_refuse_bad_input(text, error):
    with pytest.raises(argparse.ArgumentTypeError, match=error.replace("(", r"\(").replace(")", r"\)")):
        p.bounds_specs(text)


def test_ispecs_options_as_ganeti():
    policy = {"std": {"memory-size": 128, "cpu-count": 1},
              "minmax": [{"min": {"memory-size": 64}, "max": {"memory-size": 256}},
                         {"min": {"memory-size": 512}, "max": {"memory-size": 1024}}]}
    assert p.ispecs_options(policy, False) == (" --ipolicy-std-specs cpu-count=1,memory-size=128"
                                               " --ipolicy-bounds-specs min:memory-size=64/max:memory-size=256"
                                               "//min:memory-size=512/max:memory-size=1024")
    assert p.ispecs_options(policy, True).startswith(" --ipolicy-bounds-specs ")  # no std for a group
    assert p.ispecs_options({}, True) == ""


def test_policy_info_marks_inherited_values():
    effective = {"minmax": [{"min": {"cpu-count": 1}, "max": {"cpu-count": 8}}], "disk-templates": ["file", "rbd"],
                 "vcpu-ratio": 4.0, "spindle-ratio": 32.0}
    info = dict(p.policy_info({"vcpu-ratio": 2.5}, effective, False))
    assert info["bounds specs"] == [[("min/0", {"cpu-count": "default (1)"}),
                                     ("max/0", {"cpu-count": "default (8)"})]]
    assert info["allowed disk templates"] == "default (file, rbd)"
    assert (info["vcpu-ratio"], info["spindle-ratio"]) == ("2.5", "default (32.0)")
    assert p.params_info({"a": 1}, {"a": 1, "b": 2, "c": {"d": 3}}) == {"a": "1", "b": "default (2)",
                                                                      "c": {"d": "default (3)"}}
