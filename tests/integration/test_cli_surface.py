"""The rest of Ganeti's command line (issue 26), on a real 2-node loopback
cluster, side by side with Ganeti 3.0.2's own scripts: C{gnt-cluster
search-tags} (OP_TAGS_SEARCH), C{gnt-cluster show-ispecs-cmd},
C{gnt-group info} and C{gnt-group show-ispecs-cmd} print what Ganeti's do;
C{gnt-os modify} (per-OS parameters, hidden and blacklisted OSes) and
C{gnt-os info}.
"""

from __future__ import annotations

import shutil
import tempfile

import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok
from ganeti.testing.ganeti_tools import GanetiTools, unavailable_reason

N1, N2 = "node1.test", "node2.test"
UNAVAILABLE = unavailable_reason()
BOUNDS = ("min:cpu-count=1,disk-count=1,disk-size=1G,memory-size=128,nic-count=1,spindle-use=1"
          "/max:memory-size=4G,cpu-count=4,disk-count=4,disk-size=100G,nic-count=8,spindle-use=12")


def lines(text: str) -> list[str]:
    """The lines of an output, sorted, without their list marks: Ganeti orders
    some keys (min/max, the ratios) by a frozenset's hash, which differs
    from one run of its scripts to the next."""
    return sorted(line.strip().removeprefix("- ") for line in text.splitlines() if line.strip())


@pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")
@pytest_twisted.ensureDeferred
async def test_search_tags_group_info_and_ispecs_as_ganeti(root):
    workdir = tempfile.mkdtemp(prefix="gntcs")
    try:
        async with LoopbackCluster(reactor, root, loopback_config(2), prefix="gntcs") as _cluster:
            tools = GanetiTools.for_root(root.root, N1, workdir)
            ok(root, "gnt-cluster", "add-tags", "web:prod", "owner:ops")
            ok(root, "gnt-node", "add-tags", N2, "rack:b1", "web:edge")
            ok(root, "gnt-group", "add", "--ipolicy-bounds-specs", BOUNDS, "--ipolicy-vcpu-ratio", "2.5", "grp2")
            ok(root, "gnt-group", "add-tags", "grp2", "web:staging")
            ok(root, "gnt-instance", "add", "-t", "diskless", "-o", "noop", "-n", N1, "--no-name-check",
               "--no-ip-check", "--no-start", "inst1.test")
            ok(root, "gnt-instance", "add-tags", "inst1.test", "web:frontend")

            # search-tags: every object's matching tags, sorted, as Ganeti prints them
            ours = ok(root, "gnt-cluster", "search-tags", "^web:")
            assert ours == ("/cluster web:prod\n/instances/inst1.test web:frontend\n/nodegroup/grp2 web:staging\n"
                            "/nodes/%s web:edge\n" % N2), ours
            assert tools.ok("gnt-cluster", "search-tags", "^web:") == ours
            # nothing found: exit 1 and no output, as Ganeti
            none = gnt(root, "gnt-cluster", "search-tags", "^nothing")
            assert (none.returncode, none.stdout) == (1, ""), (none.returncode, none.stdout, none.stderr)
            assert tools.run("gnt-cluster", "search-tags", "^nothing").returncode == 1
            # a pattern that is no regular expression: a clear error, nothing submitted that changes anything
            bad = gnt(root, "gnt-cluster", "search-tags", "web:(")
            assert bad.returncode != 0 and "Invalid search pattern 'web:('" in bad.stderr, bad.stderr

            # show-ispecs-cmd: the options that re-create the policy
            cluster_cmd = ok(root, "gnt-cluster", "show-ispecs-cmd")
            assert cluster_cmd.startswith("gnt-cluster init --ipolicy-std-specs "), cluster_cmd
            assert " --ipolicy-bounds-specs min:" in cluster_cmd and "/max:" in cluster_cmd, cluster_cmd
            assert tools.ok("gnt-cluster", "show-ispecs-cmd") == cluster_cmd
            group_cmd = ok(root, "gnt-group", "show-ispecs-cmd", "grp2")
            assert group_cmd == ("gnt-group add --ipolicy-bounds-specs min:cpu-count=1,disk-count=1,disk-size=1024,"
                                 "memory-size=128,nic-count=1,spindle-use=1/max:cpu-count=4,disk-count=4,"
                                 "disk-size=102400,memory-size=4096,nic-count=8,spindle-use=12 grp2\n"), group_cmd
            assert tools.ok("gnt-group", "show-ispecs-cmd", "grp2") == group_cmd
            for args in ((), ("--include-defaults",), ("--include-defaults", "default")):
                assert ok(root, "gnt-group", "show-ispecs-cmd", *args) == \
                    tools.ok("gnt-group", "show-ispecs-cmd", *args), args

            # group info: the same text as Ganeti's (own values, "default (...)" for inherited ones)
            for args in (("grp2",), ()):
                ours = ok(root, "gnt-group", "info", *args)
                theirs = tools.ok("gnt-group", "info", *args)
                assert lines(ours) == lines(theirs), (ours, theirs)
            info = ok(root, "gnt-group", "info", "grp2")
            assert "Node group: grp2" in info and "memory-size: 4096" in info, info
            assert "allowed disk templates: default (" in info and "vcpu-ratio: 2.5" in info, info
            # an incomplete spec is refused before anything is submitted, as Ganeti does
            bad = gnt(root, "gnt-group", "add", "--ipolicy-bounds-specs", "min:cpu-count=1/max:cpu-count=2", "grp3")
            assert bad.returncode != 0 and "Missing parameters in ipolicy spec min" in bad.stderr, bad.stderr
            assert "grp3" not in ok(root, "gnt-group", "list", "--no-headers", "-o", "name")
            missing = gnt(root, "gnt-group", "info", "nosuchgroup")
            assert missing.returncode != 0 and "nosuchgroup" in missing.stderr, missing.stderr

            check_os_modify_and_info(root, tools)
            check_query_and_master_ip_opcodes(root, tools)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _param_os(root, name: str) -> None:
    """An OS on the master declaring the parameters colour and size."""
    import os
    import stat

    directory = os.path.join(root.root, "srv/ganeti/os", name)
    os.makedirs(directory)
    for script in ("create", "import", "export", "rename", "verify"):
        with open(os.path.join(directory, script), "w") as handle:
            handle.write("#!/bin/sh\nexit 0\n")
        os.chmod(os.path.join(directory, script), stat.S_IRWXU)
    with open(os.path.join(directory, "ganeti_api_version"), "w") as handle:
        handle.write("20\n")
    with open(os.path.join(directory, "parameters.list"), "w") as handle:
        handle.write("colour the colour\nsize the size\n")


def check_os_modify_and_info(root, tools: GanetiTools) -> None:
    # OS parameters are validated on the master as Ganeti does (os_validate): noop declares none
    refused = gnt(root, "gnt-os", "modify", "-O", "colour=blue", "noop")
    assert refused.returncode != 0 and ("OS Parameters validation failed on node %s: The following parameters are"
                                        " not supported by the OS noop: colour" % N1) in refused.stderr, refused.stderr
    _param_os(root, "paramos")
    ok(root, "gnt-os", "modify", "-O", "colour=blue,size=2", "paramos")
    ok(root, "gnt-os", "modify", "-H", "kvm:kernel_path=/boot/vmlinuz", "--hidden", "yes", "noop")
    assert "noop" not in ok(root, "gnt-os", "list", "--no-headers").split()  # hidden
    info = ok(root, "gnt-os", "info", "noop")
    assert "  - hidden: True\n  - blacklisted: False\n" in info and "  - valid: True" in info, info
    assert tools.ok("gnt-os", "info", "noop") == info
    cluster = ok(root, "gnt-cluster", "info")
    assert "OS parameters: \n  paramos: \n    colour: blue\n    size: 2\n" in cluster, cluster
    assert "OS-specific hypervisor parameters: \n  noop: \n    kvm: \n      kernel_path: /boot/vmlinuz" in cluster, cluster
    assert "Hidden OSes: noop\n" in cluster, cluster
    # a parameter set to "default" is removed; the last one removes the OS's entry
    ok(root, "gnt-os", "modify", "-O", "colour=default", "paramos")
    ok(root, "gnt-os", "modify", "--hidden", "no", "noop")
    assert "noop" in ok(root, "gnt-os", "list", "--no-headers").split()
    # blacklisted, with Ganeti's own script: no new instance of it, with Ganeti's message
    tools.ok("gnt-os", "modify", "--blacklisted", "yes", "noop")
    assert "  - blacklisted: True" in ok(root, "gnt-os", "info", "noop")
    refused = gnt(root, "gnt-instance", "add", "-t", "diskless", "-o", "noop", "-n", N1, "--no-name-check",
                  "--no-ip-check", "--no-start", "inst2.test")
    assert refused.returncode != 0 and "Guest OS 'noop' is not allowed for installation" in refused.stderr, \
        refused.stderr
    ok(root, "gnt-os", "modify", "--blacklisted", "no", "noop")
    # OSes the nodes do not have (one with parameters at cluster level), as Ganeti shows them
    ok(root, "gnt-os", "modify", "-O", "mirror=local", "notinstalled")
    ours = ok(root, "gnt-os", "info", "notinstalled", "nothing")
    assert ours == tools.ok("gnt-os", "info", "notinstalled", "nothing") == "notinstalled: \n\nnothing: \n\n", ours
    assert "  notinstalled: \n    mirror: local\n" in ok(root, "gnt-cluster", "info")
    # bad input: nothing to change; a hypervisor parameter that does not exist
    nothing = gnt(root, "gnt-os", "modify", "noop")
    assert nothing.returncode == 1 and "At least one of OS parameters" in nothing.stderr, nothing.stderr
    bad = gnt(root, "gnt-os", "modify", "-H", "kvm:no_such_param=1", "noop")
    assert bad.returncode != 0 and "no_such_param" in bad.stderr, bad.stderr


def check_query_and_master_ip_opcodes(root, tools: GanetiTools) -> None:
    """OP_QUERY (os, cluster) and OP_CLUSTER_CONFIG_QUERY as jobs; Ganeti's own gnt-cluster
    deactivate-master-ip / activate-master-ip, which submit OP_CLUSTER_(DE)ACTIVATE_MASTER_IP."""
    from ganeti.luxi.client import LuxiClient
    from ganeti.testing.fdcount import wait_final

    client = LuxiClient(root.luxi_socket, timeout=60)
    job = client.submit_job([{"OP_ID": "OP_QUERY", "what": "os", "fields": ["name", "valid"], "qfilter": None},
                             {"OP_ID": "OP_CLUSTER_CONFIG_QUERY", "output_fields": ["name", "master_node"]}])
    assert wait_final(client, [job], 120) == {job: "success"}
    ((os_answer, config_values),) = [row[0] for row in client.query_jobs([job], ["opresult"])]
    assert [[0, "noop"], [0, True]] in os_answer["data"], os_answer
    assert config_values == ["cluster.test", N1], config_values
    tools.ok("gnt-cluster", "deactivate-master-ip", "--yes")
    tools.ok("gnt-cluster", "activate-master-ip")
    ops = [op["OP_ID"] for row in client.query("job", ["ops"], None)["data"] for op in row[0][1]]
    assert "OP_CLUSTER_DEACTIVATE_MASTER_IP" in ops and "OP_CLUSTER_ACTIVATE_MASTER_IP" in ops, ops
