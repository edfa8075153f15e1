"""ganeti-local-cluster: a node joins with a one-time token; the cluster works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

BIN = os.path.dirname(sys.executable)


def run(*argv: str, root: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if root:
        env["GANETI_ROOT"] = root
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)


def imported_by(argv: tuple[str, ...], root: str) -> set[str]:
    """The modules a gnt-* command imports (C{python -X importtime}), run as a user runs it."""
    traced = run(sys.executable, "-X", "importtime", os.path.join(BIN, argv[0]), *argv[1:], root=root)
    assert traced.returncode == 0, traced.stdout + traced.stderr
    return {line.rsplit("|", 1)[-1].strip() for line in traced.stderr.splitlines() if "|" in line}


def test_two_nodes_joined_by_token_share_the_config():
    directory = tempfile.mkdtemp(prefix="gntlc", dir="/tmp")
    tool = os.path.join(BIN, "ganeti-local-cluster")
    try:
        up = run(tool, "up", "--nodes", "2", "--dir", directory)
        assert up.returncode == 0, up.stdout + up.stderr
        assert "node2.local (127.0.1.2) joined the cluster" in up.stdout
        master = os.path.join(directory, "node1")
        listing = run(os.path.join(BIN, "gnt-node"), "list", "--no-headers", "-o", "name,role", root=master)
        assert listing.stdout.split() == ["node1.local", "M", "node2.local", "C"]
        node2 = os.path.join(directory, "node2", "var", "lib", "ganeti")
        assert os.path.exists(os.path.join(node2, "server.pem")), "the certificate came through the join"
        serials = []
        for node in ("node1", "node2"):
            with open(os.path.join(directory, node, "var", "lib", "ganeti", "config.data")) as handle:
                serials.append(json.load(handle)["serial_no"])
        assert serials[0] == serials[1]
        with open(os.path.join(directory, "node1", "var", "lib", "ganeti", "ssconf_master_ip")) as handle:
            assert handle.read().strip() == "127.0.1.254", "the master IP is the cluster's own, no node's"
        delay = run(os.path.join(BIN, "gnt-debug"), "delay", "-n", "node2.local", "0.05", root=master)
        assert delay.returncode == 0, delay.stdout + delay.stderr
        # the commands admins type most import neither typing (a tenth of their start: ganeti.lighttyping)
        # nor the json package (ganeti.lightjson)
        for argv in (("gnt-instance", "list"), ("gnt-debug", "delay", "0.01"), ("gnt-job", "list")):
            imported = imported_by(argv, master)
            assert "ganeti.luxi.client" in imported, (argv, sorted(imported))
            assert not imported & {"typing", "json"}, (argv, sorted(imported))
        # nor do these load Twisted, attrs or orjson (the daemons' libraries: 474-754 M instructions, now about 100)
        for argv in (("gnt-cluster", "info"), ("gnt-os", "list"), ("gnt-cluster", "version")):
            heavy = {name for name in imported_by(argv, master) if name.split(".")[0] in ("twisted", "attrs", "attr",
                                                                                          "orjson")}
            assert not heavy, (argv, sorted(heavy))
        status = run(tool, "status", "--dir", directory)
        assert status.returncode == 0 and "ganeti-confd: running" in status.stdout
    finally:
        run(tool, "down", "--dir", directory, "--purge")
    assert not os.path.exists(directory)
