"""Ganeti 3.0.2's own gnt-* scripts against our daemons: every subcommand
whose opcode exists here, each checked on its output and the state it left.

A 3-node loopback cluster (fake hypervisor, sharedfile storage shared by
the nodes); Ganeti's scripts (Debian's ganeti-3.0, extracted) reach the
master's root through Ganeti's virtual-cluster paths
(L{ganeti.testing.ganeti_tools}).  Our own CLI and node RPC are used only
to check what the scripts did.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time

import attrs
import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti import daemons
from ganeti.testing.cluster import LoopbackCluster, file_tail, loopback_config, ok, serial_of
from ganeti.testing.ganeti_tools import GanetiTools, unavailable_reason
from tests.integration.test_failover import cluster_config, master_of, ready_cluster, stop_master_daemons

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))

N1, N2, N3 = "node1.test", "node2.test", "node3.test"
SHARED, NODISK = "shared1.test", "nodisk1.test"


def rows(out: str) -> list[list[str]]:
    """The rows of a C{--no-headers --separator=|} listing."""
    return [line.split("|") for line in out.splitlines() if line]


def listing(tools: GanetiTools, tool: str, fields: str, *args: str) -> dict[str, list[str]]:
    """C{TOOL list -o FIELDS} by the first field."""
    out = tools.ok(tool, "list", "--no-headers", "--separator=|", "-o", fields, *args)
    return {row[0]: row[1:] for row in rows(out)}


def submit(tools: GanetiTools, *args: str) -> str:
    """C{gnt-debug delay --submit ARGS}: the job id (Ganeti prints it on stderr)."""
    done = tools.run("gnt-debug", "delay", "--submit", *args)
    assert done.returncode == 0, (done.stdout, done.stderr)
    found = re.search(r"JobID: (\d+)", done.stdout + done.stderr)
    assert found, (done.stdout, done.stderr)
    return found.group(1)


def check_cluster(tools: GanetiTools, cluster: LoopbackCluster) -> None:
    out = tools.ok("gnt-cluster", "version")
    assert "Software version: 3.0" in out and "Internode protocol: 3000000" in out, out
    assert tools.ok("gnt-cluster", "getmaster") == N1 + "\n"
    tools.ok("gnt-cluster", "master-ping")
    info = tools.ok("gnt-cluster", "info")
    assert "Cluster name: cluster.test" in info and "Master node: %s" % N1 in info, info
    assert "Enabled hypervisors: fake" in info, info

    # modify sends {} for what it leaves alone: accepted as "no change"
    tools.ok("gnt-cluster", "modify", "--candidate-pool-size", "2")
    assert re.search(r"candidate pool size: 2\b", tools.ok("gnt-cluster", "info"))
    refused = tools.run("gnt-cluster", "modify", "--candidate-pool-size", "0")
    assert refused.returncode != 0

    tools.ok("gnt-cluster", "add-tags", "ctag1", "ctag2")
    tools.ok("gnt-cluster", "remove-tags", "ctag1")
    assert tools.ok("gnt-cluster", "list-tags") == "ctag2\n"

    assert tools.ok("gnt-cluster", "queue", "info") == "The drain flag is unset\n"
    tools.ok("gnt-cluster", "queue", "drain")
    assert tools.ok("gnt-cluster", "queue", "info") == "The drain flag is set\n"
    assert tools.run("gnt-debug", "delay", "0.01").returncode != 0  # a drained queue takes no job
    tools.ok("gnt-cluster", "queue", "undrain")
    assert tools.ok("gnt-cluster", "watcher", "info") == "The watcher is not paused.\n"
    tools.ok("gnt-cluster", "redist-conf")


def check_nodes_groups_os(tools: GanetiTools) -> None:
    nodes = listing(tools, "gnt-node", "name,pip,master_candidate,drained,offline")
    assert nodes == {N1: ["127.0.1.1", "Y", "N", "N"], N2: ["127.0.1.2", "N", "N", "N"],
                     N3: ["127.0.1.3", "N", "N", "N"]}, nodes
    info = tools.ok("gnt-node", "info", N2)
    assert "Node name: %s" % N2 in info and "primary ip: 127.0.1.2" in info, info
    assert "Modified node %s" % N3 in tools.ok("gnt-node", "modify", "--drained=yes", N3)
    assert listing(tools, "gnt-node", "name,drained")[N3] == ["Y"]
    tools.ok("gnt-node", "modify", "--drained=no", N3)
    tools.ok("gnt-node", "add-tags", N2, "ntag")
    assert tools.ok("gnt-node", "list-tags", N2) == "ntag\n"
    tools.ok("gnt-node", "remove-tags", N2, "ntag")
    assert tools.ok("gnt-node", "list-tags", N2) == ""

    tools.ok("gnt-group", "add", "grp2")
    tools.ok("gnt-group", "assign-nodes", "grp2", N3)
    assert listing(tools, "gnt-group", "name,node_cnt") == {"default": ["2"], "grp2": ["1"]}
    assert "Node group: grp2" in tools.ok("gnt-group", "info", "grp2")
    # modify sends {} for what it leaves alone: only the policy changes
    out = tools.ok("gnt-group", "modify", "--alloc-policy=last_resort", "grp2")
    assert out == "Modified node group grp2\n - alloc_policy -> last_resort\n", out
    assert listing(tools, "gnt-group", "name,alloc_policy")["grp2"] == ["last_resort"]
    tools.ok("gnt-group", "rename", "grp2", "grp3")
    tools.ok("gnt-group", "assign-nodes", "default", N3)
    tools.ok("gnt-group", "remove", "grp3")
    assert listing(tools, "gnt-group", "name,node_cnt") == {"default": ["3"]}

    assert set(tools.ok("gnt-os", "list", "--no-headers").split()) >= {"noop", "image"}
    diagnose = tools.ok("gnt-os", "diagnose")
    assert "OS: noop [global status: valid]" in diagnose, diagnose
    assert all("Node: %s, status: valid" % n in diagnose for n in (N1, N2, N3)), diagnose
    assert "valid: True" in tools.ok("gnt-os", "info", "noop")


async def check_instances(tools: GanetiTools, cluster: LoopbackCluster) -> None:
    tools.ok("gnt-instance", "add", "-t", "sharedfile", "--disk", "0:size=64M", "-o", "noop", "-n", N1,
             "--no-name-check", "--no-ip-check", "-B", "maxmem=256,minmem=128", SHARED)
    out = tools.ok("gnt-instance", "add", "-t", "diskless", "--no-nics", "-o", "noop", "-I", "builtin",
                   "--no-name-check", "--no-ip-check", "-B", "memory=64", NODISK)
    assert "Selected node" in out, out
    found = listing(tools, "gnt-instance", "name,pnode,status,disk_template,be/maxmem")
    nodisk_node = found[NODISK][0]
    assert found == {NODISK: [nodisk_node, "running", "diskless", "64"],
                     SHARED: [N1, "running", "sharedfile", "256"]}, found
    running = await cluster.running()
    assert SHARED in running[N1] and NODISK in running[nodisk_node], running
    info = tools.ok("gnt-instance", "info", SHARED)
    assert "Instance name: %s" % SHARED in info and "State: configured to be up, actual state is up" in info

    # runtime memory (ballooning) of a running instance
    tools.ok("gnt-instance", "modify", "-m", "160", SHARED)
    assert listing(tools, "gnt-instance", "name,oper_ram")[SHARED] == ["160"]
    refused = tools.run("gnt-instance", "modify", "-m", "512", SHARED)
    assert refused.returncode != 0 and "must have memory between 128 and 256 MB" in refused.stderr, refused.stderr

    tools.ok("gnt-instance", "shutdown", SHARED)
    assert SHARED not in (await cluster.running())[N1]
    assert listing(tools, "gnt-instance", "name,status")[SHARED] == ["ADMIN_down"]
    tools.ok("gnt-instance", "reinstall", "-f", SHARED)
    refused = tools.run("gnt-instance", "reinstall", "-f", NODISK)  # running, and without disks
    assert refused.returncode != 0, refused.stdout
    tools.ok("gnt-instance", "startup", SHARED)
    tools.ok("gnt-instance", "reboot", SHARED)
    assert SHARED in (await cluster.running())[N1]

    out = tools.ok("gnt-instance", "modify", "-B", "vcpus=2", SHARED)
    assert "be/vcpus -> 2" in out, out
    assert "to 96M" in tools.ok("gnt-instance", "grow-disk", SHARED, "0", "32M")
    assert listing(tools, "gnt-instance", "name,disk.size/0,be/vcpus")[SHARED] == ["96", "2"]
    assert tools.ok("gnt-instance", "console", SHARED) == "Console not available for fake hypervisor\n"
    tools.ok("gnt-instance", "add-tags", SHARED, "itag")
    assert tools.ok("gnt-instance", "list-tags", SHARED) == "itag\n"

    tools.ok("gnt-instance", "migrate", "-f", "-n", N2, SHARED)
    other = N3 if nodisk_node != N3 else N2
    tools.ok("gnt-instance", "failover", "-f", "-n", other, NODISK)
    running = await cluster.running()
    assert SHARED in running[N2] and NODISK in running[other], running

    # node migrate and evacuate follow their jobs
    tools.ok("gnt-node", "migrate", "-f", N2)
    assert listing(tools, "gnt-instance", "name,pnode")[SHARED] != [N2]
    source = listing(tools, "gnt-instance", "name,pnode")[NODISK][0]
    out = tools.ok("gnt-node", "evacuate", "-f", "-p", "-I", "builtin", source)
    assert "All instances evacuated successfully." in out, out
    assert listing(tools, "gnt-instance", "name,pnode")[NODISK] != [source]

    tools.ok("gnt-instance", "shutdown", NODISK)
    out = tools.ok("gnt-instance", "rename", "--no-name-check", "--no-ip-check", NODISK, "nodisk2.test", answer="y")
    assert "renamed to 'nodisk2.test'" in out, out
    tools.ok("gnt-instance", "remove", "-f", "nodisk2.test")
    assert sorted(listing(tools, "gnt-instance", "name")) == [SHARED]


def check_jobs(tools: GanetiTools) -> None:
    jobs = listing(tools, "gnt-job", "id,status,summary")
    assert len(jobs) > 10 and all(status in ("success", "error") for status, _ in jobs.values()), jobs
    first = min(jobs, key=int)
    assert "Job ID: %s" % first in tools.ok("gnt-job", "info", first)
    job_id = submit(tools, "0.2")
    tools.ok("gnt-job", "wait", job_id)
    assert listing(tools, "gnt-job", "id,status")[job_id] == ["success"]
    assert "Output from job %s follows" % job_id in tools.ok("gnt-job", "watch", job_id)
    out = tools.ok("gnt-job", "autoarchive", "0")
    assert re.match(r"Archived \d+ jobs, 0 unchecked left", out), out
    assert listing(tools, "gnt-job", "id") == {}


def check_debug(tools: GanetiTools, workdir: str) -> None:
    for args in (("0.1",), ("--no-master", "0.1"), ("-n", N2, "-n", N3, "--repeat", "2", "0.1")):
        tools.ok("gnt-debug", "delay", *args)
    refused = tools.run("gnt-debug", "delay", "0")
    assert refused.returncode != 0 and "Duration must be greater than zero" in refused.stderr, refused.stderr

    # an interruptible delay: the job names its socket, a client ends it early
    started = time.monotonic()
    proc = tools.start("gnt-debug", "delay", "--interruptible", "60")
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        path = re.search(r"'(/[^']+)'", line)
        assert path, line
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(path.group(1))
            client.sendall(b"x")
        out = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "Interrupted, time spent waiting" in out, out
    assert time.monotonic() - started < 30

    out = tools.ok("gnt-debug", "test-jobqueue")
    assert out.rstrip().endswith("Job queue test successful"), out

    opfile = os.path.join(workdir, "ops.json")
    with open(opfile, "w") as handle:
        json.dump([{"OP_ID": "OP_TEST_DELAY", "duration": 0.01}, {"OP_ID": "OP_TAGS_GET", "kind": "cluster"}], handle)
    out = tools.ok("gnt-debug", "submit-job", "--timing-stats", "--job-repeat", "2", "--op-repeat", "2", opfile)
    assert "C:op        8" in out and "C:job       2" in out, out

    request = ("--mode", "allocate", "--memory", "128", "--disks", "1G", "-t", "sharedfile", "-o", "noop",
               "--nics", "aa:00:00:00:00:01//", "new1.test")
    data = json.loads(tools.ok("gnt-debug", "iallocator", "--dir", "in", *request))
    assert sorted(data["nodes"]) == [N1, N2, N3] and data["request"]["type"] == "allocate", data["request"]
    assert (data["request"]["name"], data["request"]["memory"], data["request"]["disk_space_total"]) == (
        "new1.test", 128, 1024)
    answer = json.loads(tools.ok("gnt-debug", "iallocator", "--dir", "out", "-I", "builtin", *request))
    assert answer["success"] is True and answer["result"][0] in (N1, N2, N3), answer
    # an external allocator gets the same input and its output is shown as printed
    script = os.path.join(tools.vroot, "usr", "lib", "ganeti", "iallocators", "pick3")
    os.makedirs(os.path.dirname(script), exist_ok=True)
    with open(script, "w") as handle:
        handle.write("#!/bin/sh\ngrep -q '\"name\":\"new1.test\"' \"$1\" && "
                     "echo '{\"success\": true, \"info\": \"picked\", \"result\": [\"%s\"]}'\n" % N3)
    os.chmod(script, os.stat(script).st_mode | stat.S_IXUSR)
    answer = json.loads(tools.ok("gnt-debug", "iallocator", "--dir", "out", "-I", "pick3", *request))
    assert answer == {"success": True, "info": "picked", "result": [N3]}, answer
    relocate = json.loads(tools.ok("gnt-debug", "iallocator", "--dir", "in", "--mode", "relocate", SHARED))
    assert relocate["request"]["type"] == "relocate" and relocate["request"]["name"] == SHARED

    # a delay on node2 holds the BGL (shared) and node locks while it sleeps: long enough
    # for a listing (a Python start of Ganeti's, seconds on a loaded machine) to fall inside it
    job_id = submit(tools, "-n", N2, "8")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        held = {row[0]: row[1:] for row in rows(tools.ok("gnt-debug", "locks", "--no-headers", "--separator=|",
                                                       "-o", "name,mode,owner"))}
        if held:
            break
    assert held.get("cluster/BGL") == ["shared", job_id], held
    assert sum(1 for name, (mode, owner) in held.items() if name.startswith("node/") and owner == job_id) == 2, held
    tools.ok("gnt-job", "wait", job_id)


@pytest_twisted.ensureDeferred
async def test_ganeti_gnt_tools_against_our_daemons(root):
    workdir = tempfile.mkdtemp(prefix="gntt")
    try:
        cfg = loopback_config(3)
        async with LoopbackCluster(reactor, root, cfg, shared_file_storage=True, prefix="gntt") as cluster:
            tools = GanetiTools.for_root(root.root, N1, workdir)
            check_cluster(tools, cluster)
            check_nodes_groups_os(tools)
            await check_instances(tools, cluster)
            check_debug(tools, workdir)
            check_jobs(tools)
            # what the scripts did is what our own tools see
            assert ok(root, "gnt-instance", "list", "--no-headers", "-o", "name").split() == [SHARED]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def daemon_util_missing(vroot: str) -> str:
    """What Ganeti 3.0's gnt-cluster master-failover says without a daemon-util:
    it runs /usr/lib/ganeti/daemon-util (GANETI_ROOTDIR does not move it; a
    package of ours provides it as ganeti-daemon-util), which
    tests/compat/ganeti_failover.py moves under the virtual root C{vroot} so
    that a host's own Ganeti is never run."""
    path = os.path.join(vroot, "usr", "lib", "ganeti", "daemon-util")
    return ("Failure: command execution error:\nCan't execute '%s stop ganeti-wconfd': not found"
            " ([Errno 2] No such file or directory: '%s')\n" % (path, path))


#: Ganeti's check that the master IP went down (C{TcpPing} to port 1811, where "connection
#: refused" counts as reachable): on loopback every address answers, so it waits 30 s and
#: warns, and the command exits 1 after doing everything else
MASTER_IP_WARNING = ("The master IP is still reachable after 30 seconds, continuing but activating the master IP"
                     " on the current node will probably fail\n")


def ganeti_gnt_cluster(tools: GanetiTools, rpc_port: int, *args: str,
                       daemon_util: str | None = None) -> subprocess.CompletedProcess[str]:
    """Ganeti's gnt-cluster with its node RPC sent to our NodeDs' port and, given
    C{daemon_util}, that as its daemon-util (tests/compat/ganeti_failover.py)."""
    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "compat", "ganeti_failover.py")
    env = dict(tools.env(), GANETI_RPC_PORT=str(rpc_port))
    if daemon_util is not None:
        env["GANETI_DAEMON_UTIL"] = daemon_util
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=180, cwd="/",
                          env=env)


def our_daemon_util(workdir: str) -> str:
    """Our ganeti-daemon-util, run without the PYTHONPATH of Ganeti's package."""
    path = os.path.join(workdir, "daemon-util")
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\nunset PYTHONPATH\nexec %s \"$@\"\n"
                     % os.path.join(os.path.dirname(sys.executable), "ganeti-daemon-util"))
    os.chmod(path, 0o755)
    return path


@pytest_twisted.ensureDeferred
async def test_ganeti_master_failover_against_our_nodes(root):
    """Ganeti's own gnt-cluster master-failover moves the master to node2: its
    voting (master_node_name), our daemon-util starting WConfD, Ganeti's WConfD
    client changing master_node, node_stop_master on node1,
    node_start_master_daemons on node2; getmaster and master-ping follow."""
    workdir = tempfile.mkdtemp(prefix="gntf")
    config = cluster_config()
    # a master IP of its own (Ganeti's config check refuses one shared with a node's primary IP)
    config = attrs.evolve(config, cluster=attrs.evolve(config.cluster, master_ip="127.0.1.254"))
    async with LoopbackCluster(reactor, root, config, prefix="gntf") as cluster:
        roots = cluster.roots
        try:
            await ready_cluster(cluster)
            tools = [GanetiTools.for_root(paths.root, name, workdir) for paths, name in zip(roots, cluster.nodes)]
            assert tools[1].ok("gnt-cluster", "getmaster") == N1 + "\n"
            assert [t.run("gnt-cluster", "master-ping").returncode for t in tools[:2]] == [0, 1]
            serial = serial_of(roots[0])

            # without a daemon-util, after the voting: Ganeti's own error, nothing changed
            done = ganeti_gnt_cluster(tools[1], cluster.rpc_port, "master-failover")
            assert (done.returncode, done.stderr) == (1, daemon_util_missing(tools[1].vroot)), (done.stdout, done.stderr)
            assert [master_of(p) for p in roots] == [N1] * 3 and serial_of(roots[0]) == serial

            done = ganeti_gnt_cluster(tools[1], cluster.rpc_port, "master-failover",
                                      daemon_util=our_daemon_util(workdir))
            assert (done.returncode, done.stderr) == (1, MASTER_IP_WARNING), (done.stdout, done.stderr)
            try:
                await cluster.until(lambda: all(master_of(p) == N2 for p in roots), timeout=30)
            except AssertionError:  # (seen once under the full suite's load: say where it stood)
                raise AssertionError("ssconf master_node %s; node2's WConfD log ends:\n%s" % (
                    [master_of(p) for p in roots], file_tail(roots[1].log_file("wconf-daemon")))) from None
            assert serial_of(roots[1]) == serial + 1
            wconfd, luxid = daemons.BY_NAME["ganeti-wconfd"], daemons.BY_NAME["ganeti-luxid"]
            assert daemons.running_pid(roots[1], wconfd) and daemons.running_pid(roots[1], luxid)
            cluster.wconfd.process.wait(timeout=30)  # node_stop_master ended the old master's
            cluster.luxid.process.wait(timeout=30)
            assert [t.ok("gnt-cluster", "getmaster") for t in (tools[0], tools[2])] == [N2 + "\n"] * 2
            assert "Master node: %s" % N2 in tools[1].ok("gnt-cluster", "info")
            tools[1].ok("gnt-debug", "delay", "0.01")  # the new master runs jobs
        finally:
            for paths in roots:
                stop_master_daemons(paths)
            shutil.rmtree(workdir, ignore_errors=True)
