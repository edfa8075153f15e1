"""LU hooks on a real 3-node loopback cluster: real hook scripts in each node's
etc/ganeti/hooks that record their environment, run by each NodeD's
hooks_runner for the jobs of our gnt-* commands and of Ganeti 3.0.2's own
gnt-group script.  Checked: the phases ran on the nodes Ganeti chooses with
Ganeti's variables and nothing of NodeD's environment; a failing pre hook
aborts gnt-node modify and gnt-instance add with its output shown and nothing
changed; a failing post hook is a warning of a job that succeeds; the
config-update hooks; a hanging hook is killed at NodeD's --hooks-timeout and a
hooks directory that cannot be searched is a clear error."""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile

import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti.paths import Paths
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok
from ganeti.testing.ganeti_tools import GanetiTools, unavailable_reason

N1, N2, N3 = "node1.test", "node2.test", "node3.test"
NODES = (N1, N2, N3)
#: NodeD's hook timeout in this test (seconds)
TIMEOUT = 3


def hook(paths: Paths, hpath: str, phase: str, name: str, body: str, mode: int = 0o755) -> str:
    directory = os.path.join(paths.hooks_dir, "%s-%s.d" % (hpath, phase))
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, mode)
    return path


def recorder(paths: Paths, hpath: str, phase: str) -> None:
    """A hook that writes its environment (as JSON) to <root>/hooks-ran/<hpath>-<phase>.<n>."""
    out = os.path.join(paths.root, "hooks-ran")
    os.makedirs(out, exist_ok=True)
    hook(paths, hpath, phase, "10-record",
         "exec python3 -c 'import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], \"w\"))' "
         "%s/%s-%s.$$" % (out, hpath, phase))


def recorded(paths: Paths, hpath: str, phase: str) -> list[dict[str, str]]:
    found = []
    for path in sorted(glob.glob(os.path.join(paths.root, "hooks-ran", "%s-%s.*" % (hpath, phase)))):
        with open(path) as handle:
            found.append(json.load(handle))
    return found


def clear(roots: list[Paths]) -> None:
    for paths in roots:
        shutil.rmtree(os.path.join(paths.root, "hooks-ran"), ignore_errors=True)
        shutil.rmtree(paths.hooks_dir, ignore_errors=True)


def serial(root: Paths) -> int:
    """The config's serial as WConfD holds it (config.data may still be written a moment after the job that
    changed it has ended)."""
    return int(ok(root, "ganeti-wconfd-client", "serial").strip())


def drained(root: Paths, node: str) -> str:
    return ok(root, "gnt-node", "list", "--no-headers", "-o", "drained", node).strip()


@pytest_twisted.ensureDeferred
async def test_hooks_on_a_real_cluster(root):
    async with LoopbackCluster(reactor, root, loopback_config(3), prefix="gnth",
                               noded_args=["--hooks-timeout", str(TIMEOUT)]) as cluster:
        by_node = dict(zip(NODES, cluster.roots))

        # --- pre and post on the nodes Ganeti chooses, with Ganeti's variables ---------------
        for paths in cluster.roots:
            for phase in ("pre", "post"):
                recorder(paths, "node-modify", phase)
            recorder(paths, "config-update", "post")
        ok(root, "gnt-node", "modify", "--drained", "yes", N2)
        ran = {node: (len(recorded(p, "node-modify", "pre")), len(recorded(p, "node-modify", "post")))
               for node, p in by_node.items()}
        assert ran == {N1: (1, 1), N2: (1, 1), N3: (0, 0)}, "the master and the node: %s" % ran
        [pre] = recorded(by_node[N2], "node-modify", "pre")
        [post] = recorded(by_node[N2], "node-modify", "post")
        expected = {"GANETI_HOOKS_VERSION": "2", "GANETI_OP_CODE": "OP_NODE_SET_PARAMS",
                    "GANETI_HOOKS_PATH": "node-modify", "GANETI_OBJECT_TYPE": "NODE",
                    "GANETI_CLUSTER": "cluster.test", "GANETI_MASTER": N1, "GANETI_DATA_DIR": "/var/lib/ganeti",
                    "GANETI_OP_TARGET": N2, "GANETI_DRAINED": "True", "GANETI_OFFLINE": "None",
                    "PATH": "/sbin:/bin:/usr/sbin:/usr/bin"}
        assert {k: pre.get(k) for k in expected} == expected, pre
        assert pre["GANETI_HOOKS_PHASE"] == "pre" and post["GANETI_HOOKS_PHASE"] == "post"
        assert post["GANETI_POST_DRAINED"] == "True" and post["GANETI_DRAINED"] == "True", post
        # (the shell adds PWD, SHLVL and _, and the recording python LC_CTYPE: PEP 538)
        leaked = sorted(k for k in pre if k not in ("PATH", "PWD", "SHLVL", "_", "LC_CTYPE")
                        and not k.startswith("GANETI_"))
        assert leaked == [] and "GANETI_HEARTBEAT_PORT" not in pre, "nothing of NodeD's own environment"
        [update] = recorded(by_node[N1], "config-update", "post")
        assert (update["GANETI_HOOKS_PATH"], update["GANETI_HOOKS_PHASE"]) == ("config-update", "post")
        assert update["GANETI_DRAINED"] == "True" and "GANETI_POST_DRAINED" not in update, update
        assert recorded(by_node[N2], "config-update", "post") == [], "config-update runs on the master only"
        assert drained(root, N2) == "Y"

        # --- a failing pre hook aborts, with its output, and changes nothing -----------------
        hook(by_node[N2], "node-modify", "pre", "50-veto", "echo 'maintenance window closed'; exit 1")
        before = serial(root)
        done = gnt(root, "gnt-node", "modify", "--drained", "no", N2)
        assert done.returncode != 0
        text = done.stdout + done.stderr
        assert "Failure: hooks execution failed:" in text, text
        assert "node: %s, script: node-modify-pre.d/50-veto, output: maintenance window closed" % N2 in text, text
        assert serial(root) == before and drained(root, N2) == "Y", "nothing changed"
        os.unlink(os.path.join(by_node[N2].hooks_dir, "node-modify-pre.d", "50-veto"))

        # --- a failing post hook is reported, the job succeeds ------------------------------
        hook(by_node[N1], "node-modify", "post", "50-complain", "echo 'could not tell the CMDB' >&2; exit 2")
        out = ok(root, "gnt-node", "modify", "--drained", "no", N2)
        assert ("WARNING: On %s script node-modify-post.d/50-complain failed, output: could not tell the CMDB"
                % N1) in out, out
        assert drained(root, N2) == "N"

        # --- a hook that hangs is killed at the timeout: a clear error ----------------------
        clear(cluster.roots)
        hook(by_node[N3], "node-modify", "pre", "20-hangs", "echo waiting; sleep 613.25")
        before = serial(root)
        done = gnt(root, "gnt-node", "modify", "--drained", "yes", N3)
        text = done.stdout + done.stderr
        assert done.returncode != 0, text
        assert ("node: %s, script: node-modify-pre.d/20-hangs, output: waiting\n"
                "Hook script execution error: timed out after %d seconds (killed)" % (N3, TIMEOUT)) in text, text
        assert serial(root) == before
        assert not [line for line in os.popen("ps -eo args").read().splitlines() if "node-modify-pre.d/20-hangs" in line
                    or line.strip() == "sleep 613.25"], "the hook and its children are gone"

        # --- a hooks directory that cannot be searched ----------------------------------------
        clear(cluster.roots)
        hook(by_node[N3], "node-modify", "pre", "10-fine", "exit 0")
        os.chmod(os.path.join(by_node[N3].hooks_dir, "node-modify-pre.d"), 0o644)
        done = gnt(root, "gnt-node", "modify", "--drained", "yes", N3)
        text = done.stdout + done.stderr
        assert done.returncode != 0 and "node-modify-pre.d is not searchable (mode 644)" in text, text
        clear(cluster.roots)

        # --- gnt-instance add: pre on the master and the primary; a veto adds nothing ---------
        for paths in cluster.roots:
            recorder(paths, "instance-add", "pre")
        hook(by_node[N3], "instance-add", "pre", "50-no-room", "echo \"no room for $GANETI_INSTANCE_NAME\"; exit 1")
        args = ("gnt-instance", "add", "-t", "diskless", "-n", N3, "-o", "noop", "-H", "fake", "-B", "memory=64M",
                "--no-name-check", "--no-ip-check", "--no-start", "web1.test")
        done = gnt(root, *args)
        text = done.stdout + done.stderr
        assert done.returncode != 0 and "instance-add-pre.d/50-no-room, output: no room for web1.test" in text, text
        assert "web1.test" not in ok(root, "gnt-instance", "list", "--no-headers", "-o", "name")
        ran_on = sorted(node for node, p in by_node.items() if recorded(p, "instance-add", "pre"))
        assert ran_on == [N1, N3], ran_on
        [env] = recorded(by_node[N3], "instance-add", "pre")
        assert (env["GANETI_INSTANCE_PRIMARY"], env["GANETI_INSTANCE_DISK_TEMPLATE"], env["GANETI_ADD_MODE"],
                env["GANETI_INSTANCE_HYPERVISOR"], env["GANETI_OBJECT_TYPE"]) == (
            N3, "diskless", "create", "fake", "INSTANCE"), env
        os.unlink(os.path.join(by_node[N3].hooks_dir, "instance-add-pre.d", "50-no-room"))
        ok(root, *args)
        assert "web1.test" in ok(root, "gnt-instance", "list", "--no-headers", "-o", "name")

        # --- Ganeti 3.0.2's own gnt-group: the hooks run for its jobs too ------------------------
        if unavailable_reason() is None:
            clear(cluster.roots)
            for phase in ("pre", "post"):
                recorder(by_node[N1], "group-add", phase)
            workdir = tempfile.mkdtemp(prefix="gnth")
            try:
                tools = GanetiTools.for_root(root.root, N1, workdir)
                tools.ok("gnt-group", "add", "g2")
                [pre] = recorded(by_node[N1], "group-add", "pre")
                [post] = recorded(by_node[N1], "group-add", "post")
                assert (pre["GANETI_GROUP_NAME"], pre["GANETI_OP_CODE"], post["GANETI_POST_GROUP_NAME"]) == (
                    "g2", "OP_GROUP_ADD", "g2"), (pre, post)
                hook(by_node[N1], "group-add", "pre", "50-veto", "echo 'groups are frozen'; exit 1")
                failed = tools.run("gnt-group", "add", "g3")
                text = failed.stdout + failed.stderr
                assert failed.returncode != 0 and "groups are frozen" in text, text
                assert "g3" not in ok(root, "gnt-group", "list", "--no-headers", "-o", "name")
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
        else:
            pytest.skip(str(unavailable_reason()))
