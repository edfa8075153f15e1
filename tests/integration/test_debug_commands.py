"""gnt-node restricted-command and gnt-debug's job and daemon tests
(test-jobqueue, submit-job, iallocator, test-osparams, wconfd) against a
real master (NodeD, WConfD, LuxiD of one node root), with our CLI and with
Ganeti 3.0.2's own gnt-node and gnt-debug scripts.
"""

from __future__ import annotations

import json
import os
import tempfile

import pytest
import pytest_twisted

from ganeti import ssconf
from ganeti.noded import restricted
from ganeti.testing.cluster import gnt, ok
from ganeti.testing.ganeti_tools import GanetiTools, unavailable_reason
from tests.integration.test_luxid import Cluster

MASTER = "node1.test"
RULE = "-" * 48


def command(root, name: str, text: str, mode: int = 0o755) -> None:
    directory = restricted.commands_dir(root)
    os.makedirs(directory, exist_ok=True)
    os.chmod(directory, 0o755)
    path = os.path.join(directory, name)
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, mode)


@pytest_twisted.ensureDeferred
async def test_restricted_commands_and_debug_tests(root):
    cluster = await Cluster(root).start()
    try:
        command(root, "hello", "#!/bin/sh\necho hello\necho world\n")
        command(root, "broken", "#!/bin/sh\necho disk on fire\nexit 4\n")
        assert ok(root, "gnt-node", "restricted-command", "hello", MASTER) == "%s\nNode: %s\nhello\nworld\n\n" % (
            RULE, MASTER)
        assert ok(root, "gnt-node", "restricted-command", "-M", "-g", "default", "hello") == (
            "%s\n%s: hello\n%s: world\n" % (RULE, MASTER, MASTER))
        done = gnt(root, "gnt-node", "restricted-command", "broken", MASTER)
        assert done.returncode == 1, done
        assert ("Command 'broken' on node '%s' failed: Restricted command 'broken' failed: exited with exit code 4;"
                " output: disk on fire" % MASTER) in done.stdout, done.stdout
        # a name outside the directory: refused without saying why (after Ganeti's delay)
        done = gnt(root, "gnt-node", "restricted-command", "..", MASTER)
        assert done.returncode == 1 and "Executing command '..' failed" in done.stdout, done
        done = gnt(root, "gnt-node", "restricted-command", "hello")
        assert done.returncode != 0 and "Node group or node names must be given" in done.stderr

        # secret OS parameters reach the job
        out = ok(root, "gnt-debug", "test-osparams", "--os-parameters-secret", "password=s3cret")
        assert "Secret OS parameters: {'password': 's3cret'}" in out, out
        done = gnt(root, "gnt-debug", "test-osparams")
        assert done.returncode == 1 and "Opcode needs secret parameters" in done.stderr, done

        # Ganeti's job queue test, our client
        out = ok(root, "gnt-debug", "test-jobqueue")
        assert out.splitlines()[-1] == "Job queue test successful", out
        for step in ("Job submission tests were successful", "Job dependency tests were successful",
                     "Testing partial job failure"):
            assert step in out, out

        # submit-job: a file of opcodes, run twice in one job
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump([{"OP_ID": "OP_TEST_DELAY", "duration": 0.1}], handle)
        try:
            out = ok(root, "gnt-debug", "submit-job", "--op-repeat", "2", "--timing-stats", handle.name)
            assert "C:op        2" in out and "C:job       1" in out, out
            with open(handle.name, "w") as bad:
                bad.write('{"OP_ID": "OP_TEST_DELAY"}')
            done = gnt(root, "gnt-debug", "submit-job", handle.name)
            assert done.returncode != 0 and "must hold a JSON list of opcodes" in done.stderr, done
        finally:
            os.unlink(handle.name)

        # the allocator's input for a new instance
        out = ok(root, "gnt-debug", "iallocator", "--dir", "in", "-m", "allocate", "--disks", "1G", "-t", "diskless",
                 "-o", "noop", "new1.test")
        request = json.loads(out)["request"]
        assert request["type"] == "allocate" and request["name"] == "new1.test", request
        assert [(d["size"], d["mode"]) for d in request["disks"]] == [(1024, "rw")] and request["memory"] == 128

        # WConfD directly
        assert ok(root, "gnt-debug", "wconfd", "echo", "hi") == "Answer: hi\n"
        assert ok(root, "gnt-debug", "wconfd", "flushconfig") == "Configuration flushed.\n"
        assert ok(root, "gnt-debug", "wconfd", "listalllocks").startswith("Answer: [")
        done = gnt(root, "gnt-debug", "wconfd", "frobnicate")
        assert done.returncode == 1 and "Command 'frobnicate' not supported" in done.stderr

        # -F/--filter on the list commands (Ganeti's: node, group, job, instance); names with globs
        assert ok(root, "gnt-node", "list", "--no-headers", "-o", "name", "-F", 'name == "%s"' % MASTER) == MASTER + "\n"
        assert ok(root, "gnt-node", "list", "--no-headers", "-o", "name", "node*") == MASTER + "\n"
        assert ok(root, "gnt-node", "list", "--no-headers", "-o", "name", "-F", 'not master_candidate') == ""
        assert ok(root, "gnt-group", "list", "--no-headers", "-o", "name", "-F", 'name =~ /^def/') == "default\n"
        jobs = ok(root, "gnt-job", "list", "--no-headers", "-o", "id,status", "-F", 'status == "error"')
        assert jobs and all(line.split()[1] == "error" for line in jobs.splitlines()), jobs
        assert ok(root, "gnt-job", "list", "--no-headers", "-o", "id", "-F", "id == 1") == "1\n"
        done = gnt(root, "gnt-job", "list", "-F", "id ==")
        assert done.returncode != 0 and "Traceback" not in done.stderr, done

        # cluster rename: the new name must resolve; then name and master IP are the new name's
        done = gnt(root, "gnt-cluster", "rename", "-f", "nosuch.invalid")
        assert done.returncode != 0 and "Cannot resolve the new cluster name 'nosuch.invalid'" in done.stderr, done
        assert ssconf.SimpleStore(root).get_cluster_name() == "cluster.test"
        out = ok(root, "gnt-cluster", "rename", "-f", "localhost")
        assert out.splitlines()[-1] == "Cluster renamed from 'cluster.test' to 'localhost'", out
        assert ok(root, "gnt-cluster", "info").splitlines()[0] == "Cluster name: localhost"
        done = gnt(root, "gnt-cluster", "rename", "-f", "localhost")
        assert done.returncode != 0 and "Neither the name nor the IP address of the cluster has changed" in done.stderr
    finally:
        cluster.stop()


@pytest_twisted.ensureDeferred
async def test_ganeti_tools_restricted_command_and_test_osparams(root):
    why = unavailable_reason()
    if why:
        pytest.skip(why)
    cluster = await Cluster(root).start()
    workdir = tempfile.mkdtemp(prefix="gt-")
    try:
        command(root, "hello", "#!/bin/sh\necho hello\n")
        tools = GanetiTools.for_root(root.root, MASTER, workdir)
        out = tools.ok("gnt-node", "restricted-command", "hello", MASTER)
        assert out.splitlines() == [RULE, "Node: %s" % MASTER, "hello", ""], out
        out = tools.ok("gnt-debug", "test-osparams", "--os-parameters-secret", "password=s3cret")
        assert "Secret OS parameters: {'password': 's3cret'}" in out, out
    finally:
        cluster.stop()
        os.unlink(os.path.join(workdir, MASTER))
        os.rmdir(workdir)
