"""Out-of-band management against real daemons: OP_OOB_COMMAND run by the
master's NodeD on a real OOB helper that the test writes (a shell script
that records its calls and answers JSON), driven with our gnt-node and
gnt-cluster and with Ganeti 3.0.2's own gnt-node script.

The cluster is the master (NodeD, WConfD, LuxiD of one node root) and two
more nodes in its configuration only: the helper runs on the master, as in
Ganeti, and never needs the node it manages to answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import attrs
import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti import crypto, daemons
from ganeti.config.bootstrap import grow, initial_config
from ganeti.rapi.testing import RapiDaemon
from ganeti.testing.cluster import gnt, ok
from ganeti.testing.daemons import seed_config
from ganeti.testing.ganeti_tools import GANETI_LIB, GanetiTools, unavailable_reason
from tests.integration.test_luxid import Cluster

MASTER, N2, N3 = "node1.test", "node2.example.test", "node3.example.test"
INST2 = "inst2.example.test"

HELPER = """#!/bin/sh
dir=$(dirname "$0")
echo "$1 $2" >> "$dir/calls"
case "$1" in
  power-status) if [ -e "$dir/off-$2" ]; then echo '{"powered": false}'; else echo '{"powered": true}'; fi ;;
  power-off) touch "$dir/off-$2" ;;
  power-on) rm -f "$dir/off-$2" ;;
  power-cycle) ;;
  health) echo '[["disk", "OK"], ["fan", "WARNING"]]' ;;
esac
"""
#: helpers that misbehave, by name
BAD = {
    "hang": "#!/bin/sh\nsleep 600\n",
    "badjson": "#!/bin/sh\necho 'power is on'\n",
    "fails": "#!/bin/sh\necho 'BMC unreachable' >&2\nexit 3\n",
    "wrongshape": "#!/bin/sh\necho '{\"state\": \"on\"}'\n",
}


class OobCluster(Cluster):
    """L{Cluster} whose configuration holds two more nodes with the helper as their C{oob_program}."""

    def __init__(self, root, helper_dir: str) -> None:
        super().__init__(root, "--no-voting", "--yes-do-it")  # the other nodes run no daemons: nobody to vote
        # inst1 on the master, inst2 on node2 (fake hypervisor, diskless, stopped)
        config = grow(initial_config("cluster.test", MASTER, "127.0.1.1"), nodes=2, instances=2,
                      disks_per_instance=0)
        helper = os.path.join(helper_dir, "oob")
        # their address is the master's: epo --on, waiting for their NodeD, finds one
        nodes = {u: attrs.evolve(n, ndparams={"oob_program": helper}, primary_ip="127.0.1.1",
                                 secondary_ip="127.0.1.1") if n.name != MASTER else n
                 for u, n in config.nodes.items()}
        seed_config(root, attrs.evolve(config, nodes=nodes))


def write(path: str, text: str, mode: int = 0o755) -> str:
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, mode)
    return path


def calls(helper_dir: str) -> list[str]:
    try:
        with open(os.path.join(helper_dir, "calls")) as handle:
            return handle.read().splitlines()
    except FileNotFoundError:
        return []


def powered(root, name: str) -> bool | None:
    out = ok(root, "gnt-node", "list", "--no-headers", "-o", "powered", name).strip()
    return {"Y": True, "N": False}.get(out)


def instance_state(root, name: str) -> str:
    return ok(root, "gnt-instance", "list", "--no-headers", "-o", "status", name).strip()


@pytest.fixture
def helper_dir():
    directory = tempfile.mkdtemp(prefix="oob-")
    os.chmod(directory, 0o755)
    write(os.path.join(directory, "oob"), HELPER)
    yield directory
    for name in os.listdir(directory):
        os.unlink(os.path.join(directory, name))
    os.rmdir(directory)


@pytest_twisted.ensureDeferred
async def test_power_and_health_with_our_cli(root, helper_dir):
    cluster = await OobCluster(root, helper_dir).start()
    try:
        out = ok(root, "gnt-node", "power", "status", N2, N3)
        assert out == "Node               Status\n%s powered\n%s powered\n" % (N2, N3), out
        assert calls(helper_dir) == ["power-status %s" % N2, "power-status %s" % N3]

        # power off: refused while the node is online, then with --ignore-status it runs
        done = gnt(root, "gnt-node", "power", "-f", "--ignore-status", "off", N2)
        assert done.returncode == 0, done
        assert done.stdout.splitlines()[-1] == "%s invoked" % N2
        assert powered(root, N2) is False
        assert ok(root, "gnt-node", "power", "--no-headers", "status", N2) == "%s unpowered\n" % N2
        ok(root, "gnt-node", "power", "--power-delay", "0", "on", N2, N3)
        assert powered(root, N2) is True and powered(root, N3) is True
        assert "power-on %s" % N2 in calls(helper_dir) and "power-on %s" % N3 in calls(helper_dir)

        # without --ignore-status, power off marks the node offline first (same job)
        ok(root, "gnt-node", "power", "-f", "off", N3)
        row = ok(root, "gnt-node", "list", "--no-headers", "--separator=|", "-o", "offline,powered", N3)
        assert row == "Y|N\n", row

        # the master: refused for power-off/cycle, with the command to run by hand (it has no helper here)
        done = gnt(root, "gnt-node", "power", "-f", "cycle", MASTER)
        assert done.returncode != 0 and "Operating on the master node %s is not allowed" % MASTER in done.stderr
        # a node without a helper is "(unavail)"
        done = gnt(root, "gnt-node", "health", MASTER, N2)
        assert done.returncode == 1, done
        lines = done.stdout.splitlines()
        assert lines[-4:] == ["Node               Status", "%s         (unavail)" % MASTER, "%s disk=OK" % N2,
                              "                   fan=WARNING"], done.stdout
        assert "WARNING: Item 'fan' on node '%s' has status 'WARNING'" % N2 in lines[0], done.stdout
        # powercycle: the master only with -f; a node under a temporary root refuses to reboot its machine
        done = gnt(root, "gnt-node", "powercycle", "--yes", MASTER)
        assert done.returncode != 0 and "The node is the master and the force parameter was not set" in done.stderr
        done = gnt(root, "gnt-node", "powercycle", "--yes", N2)
        assert done.returncode != 0 and "Failed to schedule the reboot" in done.stderr, done
        assert "shares its machine with other nodes" in done.stderr, done
        # power off/cycle need nodes
        done = gnt(root, "gnt-node", "power", "off")
        assert done.returncode == 1 and "Please provide at least one node" in done.stderr
        done = gnt(root, "gnt-node", "power", "reboot", N2)
        assert done.returncode != 0 and "invalid choice" in done.stderr
    finally:
        cluster.stop()


@pytest_twisted.ensureDeferred
async def test_bad_helpers_give_clear_errors_and_change_nothing(root, helper_dir):
    cluster = await OobCluster(root, helper_dir).start()
    try:
        for name, text in BAD.items():
            write(os.path.join(helper_dir, name), text)
        write(os.path.join(helper_dir, "notexec"), HELPER, mode=0o644)
        cases = {
            "hang": "failed with reason 'timeout'",
            "badjson": "its output is not valid JSON",
            "fails": "failed with reason 'exit code 3'; output: BMC unreachable",
            "wrongshape": "power-off is expected to not return payload",
            "notexec": "is not executable",
            "missing": "does not exist",
        }
        for name, message in cases.items():
            program = os.path.join(helper_dir, name)
            ok(root, "gnt-node", "modify", "--node-parameters", "oob_program=%s" % program, N2)
            done = gnt(root, "gnt-node", "power", "-f", "--ignore-status", "--oob-timeout", "2", "off", N2)
            assert done.returncode == 1, (name, done)
            assert done.stdout.splitlines()[-1] == "%s (nodata)" % N2, (name, done.stdout)
            assert message in done.stdout + done.stderr, (name, message, done.stdout, done.stderr)
            assert powered(root, N2) is True, name
        # bad input on the command line: refused before anything runs
        done = gnt(root, "gnt-node", "power", "--oob-timeout", "0", "status", N2)
        assert done.returncode != 0 and "timeout" in done.stderr, done
        done = gnt(root, "gnt-node", "health", "nosuchnode")
        assert done.returncode != 0 and "nosuchnode" in done.stderr, done
        assert calls(helper_dir) == []
    finally:
        cluster.stop()


@pytest_twisted.ensureDeferred
async def test_epo_with_and_without_oob(root, helper_dir):
    cluster = await OobCluster(root, helper_dir).start()
    try:
        # the master is refused unless --all
        done = gnt(root, "gnt-cluster", "epo", "-f", MASTER, N2)
        assert done.returncode == 1 and "%s is the master node" % MASTER in done.stderr, done
        # node 3 has no helper: reported, not powered; node 2's instance is shut down first (not remembered)
        ok(root, "gnt-node", "modify", "--node-parameters", "oob_program=", N3)
        ok(root, "gnt-instance", "startup", INST2)
        assert instance_state(root, INST2) == "running"
        out = ok(root, "gnt-cluster", "epo", "-f", "--power-delay", "0", N2, N3)
        assert "Node %s does not support out-of-band handling" % N3 in out, out
        assert "Submit shutdown of instance %s" % INST2 in out and "All instances have been stopped successfully" in out
        assert calls(helper_dir) == ["power-off %s" % N2]
        assert powered(root, N2) is False
        assert instance_state(root, INST2) == "ERROR_down", "still up for the admin, stopped"
        # again: N2 is already off
        out = ok(root, "gnt-cluster", "epo", "-f", N2)
        assert "Node %s is already in desired power state, skipping" % N2 in out
        # --on powers it on (not off, as 3.0.2 would) and waits for the nodes' NodeD to answer
        os.unlink(os.path.join(helper_dir, "calls"))
        out = ok(root, "gnt-cluster", "epo", "-f", "--on", "--groups", "--rpc-port", str(cluster.noded.port),
                 "default")
        assert calls(helper_dir) == ["power-on %s" % N2], calls(helper_dir)
        assert powered(root, N2) is True
        assert "Waiting until all nodes are available again" in out
        assert "Submit startup of instance %s" % INST2 in out, out
        assert instance_state(root, INST2) == "running"
    finally:
        cluster.stop()


RAPI_SCRIPT = r'''
import json, sys, time
from ganeti.rapi import client as rapi

host, port, node = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c = rapi.GanetiRapiClient(host, port=port, username="jack", password="abc123")
job = c.PowercycleNode(node)
for _ in range(600):
    info = c.GetJobStatus(job)
    if info["status"] in ("success", "error", "canceled"):
        break
    time.sleep(0.1)
print(json.dumps({"status": info["status"], "result": info["opresult"]}))
'''


@pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
@pytest_twisted.ensureDeferred
async def test_ganeti_gnt_node_power_and_health(root, helper_dir):
    cluster = await OobCluster(root, helper_dir).start()
    workdir = tempfile.mkdtemp(prefix="gt-")
    key_pem, cert_pem = crypto.generate_key_and_cert("cluster.test")
    crypto.write_pem_file(root.rapi_pem, key_pem, cert_pem)
    os.makedirs(os.path.dirname(root.rapi_users), exist_ok=True)
    with open(root.rapi_users, "w") as handle:
        handle.write("jack abc123 write\n")
    port = daemons.free_port("127.0.0.1")
    rapi = RapiDaemon(root, "127.0.0.1", port)
    try:
        rapi.start()
        await rapi.ready(reactor, timeout=120)
        tools = GanetiTools.for_root(root.root, MASTER, workdir)
        out = tools.ok("gnt-node", "power", "status", N2)
        # (Ganeti pads its header's last cell to the column's width)
        assert [line.rstrip() for line in out.splitlines()] == ["Node               Status", "%s powered" % N2], out
        out = tools.ok("gnt-node", "power", "-f", "--ignore-status", "off", N3)
        assert out.splitlines()[-1] == "%s invoked" % N3
        assert powered(root, N3) is False
        out = tools.ok("gnt-node", "health", N2)
        assert out.splitlines()[-2:] == ["%s disk=OK" % N2, "                   fan=WARNING"], out
        listed = tools.ok("gnt-node", "list", "--no-headers", "--separator=|", "-o", "name,powered")
        assert "%s|N" % N3 in listed.splitlines() and "%s|Y" % N2 in listed.splitlines(), listed
        assert calls(helper_dir) == ["power-status %s" % N2, "power-off %s" % N3, "health %s" % N2]
        # issue 26: Ganeti's gnt-group evacuate of an empty group submits no job (SubmitManyJobs([]))
        ok(root, "gnt-group", "add", "spare")
        done = tools.run("gnt-group", "evacuate", "--to", "default", "spare")
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert "All instances evacuated successfully." in done.stdout
        # Ganeti's gnt-cluster epo: shuts node 2's instance down (a stopped one here), powers the node off
        out = tools.ok("gnt-cluster", "epo", "-f", N2)
        assert "Submit shutdown of instance %s" % INST2 in out, out
        assert powered(root, N2) is False
        assert calls(helper_dir)[-1] == "power-off %s" % N2
        # powercycle through Ganeti's gnt-node and its RAPI client: the node (a temporary root) refuses
        done = tools.run("gnt-node", "powercycle", "--yes", N2)
        assert done.returncode != 0 and "shares its machine with other nodes" in done.stdout + done.stderr, done
        done = subprocess.run([sys.executable, "-c", RAPI_SCRIPT, "127.0.0.1", str(port), N2], capture_output=True,
                              text=True, timeout=120, cwd=tempfile.gettempdir(),
                              env=dict(os.environ, PYTHONPATH=str(GANETI_LIB)))
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out["status"] == "error" and "shares its machine" in json.dumps(out["result"]), out
    finally:
        rapi.stop()
        cluster.stop()
        os.unlink(os.path.join(workdir, MASTER))
        os.rmdir(workdir)
