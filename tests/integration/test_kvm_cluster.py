"""KVM instances on a real 2-node loopback cluster, driven through the
gnt-* commands the way an admin would: enable kvm and its parameters with
C{gnt-cluster modify} (kvm's defaults fill in the rest), C{gnt-instance add} a diskless and a sharedfile
instance on node1, check them with C{gnt-instance list} and with qemu's
own QMP monitor, C{gnt-instance migrate} them live to node2, shut them
down and remove them; no qemu of the test may be left behind.

The guests have no NICs and no bootable disk: qemu only runs its firmware
(SeaBIOS looking for something to boot), which is enough for QMP, a live
migration and a shutdown (SeaBIOS ignores ACPI, so C{gnt-instance
shutdown} is given a short timeout before the hypervisor quits qemu).  The
sharedfile disk (16 MiB of zeros) is attached, not booted from.  The two
roots share their sharedfile directory, as nodes on a SAN would, so the
target's qemu opens the same disk file.

Skipped without qemu-system-x86_64 (scripts/install-qemu installs it).
Without a usable C{/dev/kvm}, qemu runs under TCG.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess

import attrs
import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti import crypto
from ganeti.backend.hypervisor.kvm import KVMHypervisor
from ganeti.backend.hypervisor.qmp import connect_qmp
from ganeti.config.bootstrap import initial_config
from ganeti.daemons import free_port
from ganeti.objects import ConfigData, Node, new_uuid
from ganeti.paths import Paths
from ganeti.testing import procs
from ganeti.testing.daemons import Daemon, make_root, remove_root, seed_config, share_file_storage
from tests.integration.test_nodes import ok

QEMU = shutil.which("qemu-system-x86_64")
NODES = {"node1.test": "127.0.1.1", "node2.test": "127.0.1.2"}
N1, N2 = NODES
NODISK, SHARED = "kvm1.test", "kvm2.test"
STAMP = {"serial_no": 1, "ctime": 1.0, "mtime": 1.0}



@pytest.fixture(autouse=True)
def qemu_installed() -> None:
    """Without qemu the tests fail and say so (never skipped)."""
    if QEMU is None:
        pytest.fail("qemu-system-x86_64 is not installed (scripts/install-qemu installs it)")


def two_nodes() -> ConfigData:
    """node1 (master) and node2 in one group; fake is the only hypervisor
    until the test enables kvm."""
    cfg = initial_config("cluster.test", N1, NODES[N1], candidate_pool_size=2)
    group = next(iter(cfg.nodegroups))
    uuid = new_uuid()
    node = Node(name=N2, uuid=uuid, primary_ip=NODES[N2], secondary_ip=NODES[N2], master_candidate=False,
                offline=False, drained=False, group=group, master_capable=True, vm_capable=True, powered=True,
                **STAMP)  # type: ignore[arg-type]
    return attrs.evolve(cfg, nodes={**cfg.nodes, uuid: node})


def qemu_pids(roots: list[Paths]) -> list[int]:
    """The qemu processes started under one of C{roots} (C{pgrep -f})."""
    pids = []
    for paths in roots:
        pattern = "^%s .*%s/" % (re.escape(QEMU or ""), re.escape(paths.root))
        found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
        pids += [int(pid) for pid in found.stdout.split()]
    return sorted(pids)


async def qmp_status(paths: Paths, name: str) -> str:
    """What qemu of instance C{name} on the node of C{paths} says its run state is."""
    socket_path = KVMHypervisor(paths, reactor).files(name).qmp_socket
    protocol = await connect_qmp(reactor, socket_path)
    try:
        answer = await protocol.query_status()
    finally:
        protocol.transport.loseConnection()
        await protocol.closed
    return str(answer["status"])


def table(root: Paths) -> dict[str, list[str]]:
    """C{gnt-instance list} rows by instance name: node, status, live state and memory."""
    out = ok(root, "gnt-instance", "list", "--no-headers", "--separator", "|",
             "-o", "name,pnode,status,oper_state,oper_ram")
    return {line.split("|")[0]: line.split("|")[1:] for line in out.splitlines()}


@pytest_twisted.ensureDeferred
async def test_kvm_instances_migrate(root, monkeypatch):
    roots = [root, make_root("gntk2")]
    crypto.bootstrap_secrets(roots[0], "cluster.test", node_name=N1)
    os.makedirs(roots[1].data_dir, exist_ok=True)
    shutil.copy(roots[0].server_pem, roots[1].server_pem)
    shared = share_file_storage(roots)
    seed_config(roots[0], two_nodes())
    port = free_port()
    nodeds = [
        Daemon(paths, "ganeti-noded", "--bind", address, "--port", str(port), tcp=(address, port))
        for paths, address in zip(roots, NODES.values())
    ]
    wconfd = Daemon(roots[0], "ganeti-wconfd", "--rpc-port", str(port))
    luxid = Daemon(roots[0], "ganeti-luxid", "--rpc-port", str(port))
    leftovers: list[int] = []
    try:
        for daemon in nodeds:
            daemon.start()
        for daemon in nodeds:
            await daemon.ready(reactor)
        wconfd.start()
        await wconfd.ready(reactor)
        luxid.start()
        await luxid.ready(reactor)

        migration_port = free_port(NODES[N2])
        ok(root, "gnt-cluster", "modify", "--enabled-hypervisors", "kvm,fake",
           "-H", "kvm:kvm_path=%s,vnc_bind_address=,migration_port=%d,migration_bandwidth=1000,"
                 "migration_downtime=300" % (QEMU, migration_port))

        add = ["gnt-instance", "add", "-H", "kvm", "-o", "noop", "--no-nics", "-B", "memory=64M", "-n", N1,
               "--no-name-check", "--no-ip-check"]
        ok(root, *add, "-t", "diskless", NODISK)
        ok(root, *add, "-t", "sharedfile", "--disk", "0:size=16M", SHARED)
        assert table(root) == {NODISK: [N1, "running", "Y", "64"], SHARED: [N1, "running", "Y", "64"]}
        # the parameters given to gnt-cluster modify, over kvm's defaults
        hv = ok(root, "gnt-instance", "list", "--no-headers", "--separator", "|",
                "-o", "hv/kvm_path,hv/vnc_bind_address,hv/acpi,hv/serial_console", NODISK)
        assert hv == "%s||Y|Y\n" % QEMU
        for name in (NODISK, SHARED):
            assert await qmp_status(roots[0], name) == "running"
        on_node1 = qemu_pids(roots[:1])
        assert len(on_node1) == 2 and qemu_pids(roots[1:]) == []
        argv = {line[line.index("-name") + 1]: line for line in map(procs.argv, on_node1)}
        assert argv[NODISK][0] == QEMU and argv[NODISK][argv[NODISK].index("-m") + 1] == "64"
        assert os.listdir(shared) == [SHARED]
        assert any(arg.startswith("file=%s/%s/" % (shared, SHARED)) for arg in argv[SHARED]), argv[SHARED]

        for name in (NODISK, SHARED):
            out = ok(root, "gnt-instance", "migrate", "-f", "-n", N2, name)
            assert "* done" in out, out
        assert table(root) == {NODISK: [N2, "running", "Y", "64"], SHARED: [N2, "running", "Y", "64"]}
        for name in (NODISK, SHARED):
            assert await qmp_status(roots[1], name) == "running"
        on_node2 = qemu_pids(roots[1:])
        assert qemu_pids(roots[:1]) == [] and len(on_node2) == 2
        for pid in on_node2:  # the cluster's migration_port reached the target
            assert "tcp:%s:%d" % (NODES[N2], migration_port) in procs.argv(pid)
        console = KVMHypervisor(roots[1], reactor).files(NODISK).serial_socket
        assert "the Unix socket %s on node" % console in ok(root, "gnt-instance", "console", NODISK)

        ok(root, "gnt-instance", "shutdown", "--timeout", "1", "--force-multiple", NODISK, SHARED)
        assert table(root) == {NODISK: [N2, "ADMIN_down", "N", "-"], SHARED: [N2, "ADMIN_down", "N", "-"]}
        assert qemu_pids(roots) == []
        for name in (NODISK, SHARED):
            ok(root, "gnt-instance", "remove", "-f", name)
        assert table(root) == {} and os.listdir(shared) == []
        assert qemu_pids(roots) == []
    finally:
        leftovers = qemu_pids(roots)
        for pid in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        luxid.stop()
        wconfd.stop()
        for daemon in nodeds:
            daemon.stop()
        remove_root(roots[1])
    assert leftovers == []
