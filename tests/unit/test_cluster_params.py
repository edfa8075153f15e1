"""The cluster parameters of OP_CLUSTER_SET_PARAMS beyond the basic ones, as Ganeti checks and applies them."""

from __future__ import annotations

import argparse

import pytest

from ganeti import errors, uidpool
from ganeti.client import cluster_opts
from ganeti.client.formatting import to_roman
from ganeti.cmdlib import cluster_params as cp


def test_uid_pool_parse_format_add_remove():
    pool = uidpool.check_uid_pool(uidpool.parse_uid_pool("3000,1000-2000, 5000-5001"))
    assert pool == [[1000, 2000], [3000, 3000], [5000, 5001]]
    assert uidpool.format_uid_pool(pool) == "1000-2000, 3000, 5000-5001"
    assert uidpool.uid_pool_changed(pool, [[4000, 4000], [3000, 3000]], [[1000, 2000]], None) == \
        [[3000, 3000], [4000, 4000], [5000, 5001]]
    assert uidpool.uid_pool_changed(pool, [[1, 1]], None, [[7, 8]]) == [[7, 8]]  # a new pool replaces it
    with pytest.raises(errors.OpPrereqError, match="not found in the current user-id pool"):
        uidpool.uid_pool_changed(pool, None, [[9, 9]], None)
    with pytest.raises(errors.OpPrereqError, match="Only one hyphen allowed"):
        uidpool.parse_uid_pool("1-2-3")
    with pytest.raises(errors.OpPrereqError, match="larger than UIDPOOL_UID_MAX"):
        uidpool.check_uid_pool([[1, 2 ** 32]])


def test_cluster_policy_std_must_fit_a_bounds_pair_and_templates_be_enabled():
    current = {"minmax": [{"min": {"memory-size": 128}, "max": {"memory-size": 1024}}], "std": {"memory-size": 256},
               "disk-templates": ["file"]}
    changes = cp.check_cluster_ipolicy({"std": {"memory-size": "512"}, "vcpu-ratio": "2"})
    assert changes == {"std": {"memory-size": 512}, "vcpu-ratio": 2.0}
    assert cp.ipolicy_changed(current, changes, ["file"])["std"] == {"memory-size": 512}
    with pytest.raises(errors.OpPrereqError, match="Invalid std specifications"):
        cp.ipolicy_changed(current, {"std": {"memory-size": 4096}}, ["file"])
    with pytest.raises(errors.OpPrereqError, match="not enabled on the cluster: plain"):
        cp.ipolicy_changed(current, {"disk-templates": ["plain"]}, ["file"])
    with pytest.raises(errors.OpPrereqError, match="no default above the cluster"):
        cp.check_cluster_ipolicy({"vcpu-ratio": "default"})


def test_tools_images_and_netmask():
    assert cp.check_compression_tools(["gzip", "lzop"]) == ["gzip", "lzop"]
    for tools, message in ((["lzop"], "gzip utility must be present"), (["gzip", "x;y"], "illegal characters"),
                           (["gzip", "none"], "reserved value")):
        with pytest.raises(errors.OpPrereqError, match=message):
            cp.check_compression_tools(tools)
    cp.check_image("/srv/img", "Install")
    cp.check_image("https://example.test/img", "Install")
    cp.check_image("", "Install")  # none
    with pytest.raises(errors.OpPrereqError, match="Install image must be an absolute path or a URL"):
        cp.check_image("img", "Install")
    cp.check_netmask(128, 10)
    with pytest.raises(errors.OpPrereqError, match="CIDR netmask"):
        cp.check_netmask(33, 2)


def test_the_communication_network_jobs_add_and_connect_what_is_missing():
    class Group:
        def __init__(self, name: str, networks: dict) -> None:
            self.name, self.networks = name, networks

    class Cfg:
        networks: dict = {}
        nodegroups = {"g1": Group("default", {}), "g2": Group("other", {})}

    (job,) = cp.communication_jobs(Cfg(), "comm")
    assert [op["OP_ID"] for op in job] == ["OP_NETWORK_ADD", "OP_NETWORK_CONNECT", "OP_NETWORK_CONNECT"]
    assert job[0]["network"] == "169.254.0.0/16" and job[1]["network_mode"] == "routed"


def _init_opts(*args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cluster_opts.add_init_options(parser)
    parser.add_argument("--primary-ip", default="127.0.0.1")
    return parser.parse_args(list(args))


def test_split_specs_fill_the_default_policy():
    from ganeti.config.bootstrap import initial_config

    cluster = initial_config("c", "n", "127.0.0.1").cluster
    changes = cluster_opts.init_changes(_init_opts("--specs-mem-size", "min=64,std=1G", "--specs-nic-count",
                                                   "max=4"), cluster)
    (pair,) = changes["ipolicy"]["minmax"]
    assert pair["min"]["memory-size"] == 64 and pair["max"]["nic-count"] == 4 and pair["max"]["cpu-count"] == 8
    assert changes["ipolicy"]["std"]["memory-size"] == 1024
    with pytest.raises(errors.OpPrereqError, match="Invalid key 'avg'"):
        cluster_opts.init_changes(_init_opts("--specs-mem-size", "avg=64"), cluster)


def test_roman_numerals_as_ganeti():
    assert [to_roman(n) for n in (1, 4, 9, 14, 256, 1994)] == ["I", "IV", "IX", "XIV", "CCLVI", "MCMXCIV"]
    assert to_roman(0) == 0 and to_roman(True) is True and to_roman("x") == "x" and to_roman(5, False) == 5


def test_upgrade_versions_and_refusals():
    from ganeti.client import cluster_upgrade as up

    assert up.parse_version("3.0.2") == (3, 0, 2) and up.parse_version("2.16") == (2, 16, 0)
    assert up.parse_version("3.x") is None and up.parse_version("") is None
    assert up.config_version_tuple(3000000) == (3, 0, 0) and up.config_version_tuple(2160000) == (2, 16, 0)
    current, config = (3, 0, 2), (3, 0, 0)
    assert up.refusal((3, 0, 3), current, config) is None
    assert "from 2.10 onwards" in up.refusal((2, 9, 0), current, config)
    assert "only supported between 2.16 and 3.0" in up.refusal((4, 0, 0), current, config)
    assert "cannot write an older configuration format" in up.refusal((2, 16, 0), current, config)
    assert up.refusal((2, 16, 0), current, (2, 16, 0)) is None  # Ganeti's range allows it; the config too
    assert "one minor version at a time" in up.refusal((3, 1, 0), (3, 3, 0), (3, 1, 0))


def test_missing_bridges_as_the_node_sees_them(tmp_path):
    from ganeti.noded import checks

    (tmp_path / "br0" / "bridge").mkdir(parents=True)
    (tmp_path / "eth0").mkdir()
    assert checks.missing_bridges(["br0", "eth0", "nosuch", "../br0", ""], str(tmp_path)) == \
        ["eth0", "nosuch", "../br0", ""]
    assert checks.missing_bridges([], str(tmp_path)) == []
    with pytest.raises(Exception, match="bridges_list must be a list"):
        checks.missing_bridges("br0", str(tmp_path))
