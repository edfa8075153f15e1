"""The master IP: node_activate_master_ip / node_deactivate_master_ip run
`ip address` for real, inside a user and network namespace the test creates
(`unshare -rn`: nothing outside it is touched), on its loopback device as
master_netdev.  Skipped where such namespaces cannot be made."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

SCRIPT = r'''
import json, subprocess, sys
from twisted.internet import defer, task
from ganeti.ha.epoch import EpochGuard
from ganeti.noded.master import MasterProcedures
from ganeti.paths import Paths

def addresses():
    out = subprocess.run(["ip", "-o", "address", "show", "dev", "lo"], capture_output=True, text=True).stdout
    return [line.split()[3] for line in out.splitlines() if " inet " in line]

async def main(reactor):
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    paths = Paths(sys.argv[1])
    paths.ensure_dirs()
    procs = MasterProcedures(paths, reactor, EpochGuard(paths))
    params = {"ip": "192.0.2.10", "netmask": 32, "netdev": "lo", "ip_family": 2, "uuid": "x"}
    seen = {}
    await procs.node_activate_master_ip(params, False)
    await procs.node_activate_master_ip(params, False)  # already up: fine
    seen["up"] = addresses()
    await procs.node_deactivate_master_ip(params, False)
    await procs.node_deactivate_master_ip(params, False)  # already down: fine
    seen["down"] = addresses()
    assert await procs.node_activate_master_ip(dict(params, netdev="none"), False) is None  # no netdev: nothing
    seen["none"] = addresses()
    print(json.dumps(seen))

task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
'''


def test_master_ip_added_and_removed_in_a_namespace(tmp_path):
    unshare = shutil.which("unshare")
    if unshare is None or shutil.which("ip") is None:
        pytest.skip("unshare or ip missing")
    probe = subprocess.run([unshare, "-rn", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot create a user and network namespace here")
    done = subprocess.run([unshare, "-rn", sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert "192.0.2.10/32" in seen["up"]
    assert "192.0.2.10/32" not in seen["down"] and "127.0.0.1/8" in seen["down"]
    assert seen["none"] == seen["down"]
