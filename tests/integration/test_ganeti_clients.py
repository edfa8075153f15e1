"""Ganeti 3.0.2's own LUXI and confd clients against our daemons.

The clients come from Debian's ganeti-3.0 package, extracted (not installed)
by scripts/install-ganeti-clients; they run in a subprocess with that package
first on the path (it is also called "ganeti").
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import crypto
from ganeti.config.bootstrap import initial_config
from ganeti.daemons import free_port
from ganeti.testing.daemons import Daemon, MasterNoded, seed_config

CHECKOUT = Path(__file__).resolve().parents[2]
GANETI_LIB = CHECKOUT / ".venv" / "ganeti-3.0" / "usr" / "share" / "ganeti" / "3.0"
SCRIPT = CHECKOUT / "tests" / "compat" / "ganeti_clients.py"

pytestmark = pytest.mark.skipif(
    not (GANETI_LIB / "ganeti" / "luxi.py").exists(),
    reason="Ganeti 3.0.2's Python package is not available (scripts/install-ganeti-clients fetches it)",
)


def confd_answers_ping(daemon: Daemon, address: str, port: int, key_file: str, timeout: float = 30) -> None:
    """Wait until our confd answers (Ganeti's client sends only once)."""
    from ganeti.confd import wire

    with open(key_file, "rb") as handle:
        key = handle.read()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert daemon.process is not None and daemon.process.poll() is None, daemon.output()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(0.2)
            request = wire.request(wire.REQ_PING, None, str(uuid.uuid4()))
            sock.sendto(wire.pack_request(key, request, time.time()), (address, port))
            try:
                sock.recv(65536)
                return
            except TimeoutError:
                continue
    raise AssertionError("confd did not answer:\n" + daemon.output())


def ganeti_clients(*args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(GANETI_LIB))
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env, cwd="/"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest_twisted.ensureDeferred
async def test_ganeti_luxi_and_confd_clients_get_correct_answers(root):
    root.ensure_dirs()
    crypto.write_hmac_key(root.hmac_key, crypto.generate_hmac_key())
    seed_config(root, initial_config("cluster.test", "node1.test", "127.0.1.1"))
    port = free_port(udp=True)
    noded = MasterNoded(root)  # the test delay sleeps there (on_master, as in Ganeti)
    daemons = [
        noded.daemon,
        Daemon(root, "ganeti-wconfd"),
        Daemon(root, "ganeti-luxid", *noded.luxid_args, env=noded.env),
    ]
    crypto.bootstrap_secrets(root, "cluster.test", node_name="node1.test")
    confd = Daemon(root, "ganeti-confd", "--bind", "127.0.1.1", "--port", str(port))
    try:
        for daemon in daemons:
            daemon.start()
            await daemon.ready(reactor)
        confd.start()
        await threads.deferToThread(confd_answers_ping, confd, "127.0.1.1", port, root.hmac_key)
        got = await threads.deferToThread(ganeti_clients, root.luxi_socket, "127.0.1.1", str(port), root.hmac_key)
    finally:
        confd.stop()
        for daemon in reversed(daemons):
            daemon.stop()
    assert got["status"] == "success"
    assert got["log"] == [" - INFO: Test delay iteration 0/1", " - INFO: Test delay iteration 1/1"]
    assert got["query_jobs"] == [[got["job_id"], "success", [None], ["TEST_DELAY(1.0e-2)"]]]
    assert got["cluster_name"] == "cluster.test"
    assert got["nodes"] == [["node1.test", "M"]]
    assert got["config_values"] == ["cluster.test", False]
    assert got["confd"]["timed_out"] is False and got["confd"]["received"] == 1
    assert (got["confd"]["status"], got["confd"]["answer"]) == (0, "node1.test")
