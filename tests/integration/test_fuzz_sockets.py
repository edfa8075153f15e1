"""Fuzz every socket of a real 3-node loopback cluster: LUXI, WConfD's AMP,
confd's UDP, RAPI's HTTPS and NodeD's mutual TLS.

Random (seeded: C{GANETI_FUZZ_SEED}, printed on failure) and targeted bad
input; after every batch the daemon still answers a good request, and at
the end nothing changed (config serial, job files, drain flag, watcher
pause, every node's replicas), its file descriptors are back to where they
were and its memory did not grow beyond a bound.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any, Callable, Iterable

import pytest_twisted
from twisted.internet import reactor
from twisted.internet.threads import deferToThread

from ganeti import crypto
from ganeti.luxi.client import LuxiClient
from ganeti.testing import fuzz
from ganeti.testing.chaos import ChaosCluster, queue_files_count, tail

SEED = int(os.environ.get("GANETI_FUZZ_SEED", "20261124"))
RANDOM_CASES = int(os.environ.get("GANETI_FUZZ_CASES", "120"))
BATCH = 20


async def settled(cluster: ChaosCluster) -> None:
    """A few jobs ran and reached every candidate: the state to keep."""
    def jobs() -> None:
        with LuxiClient(cluster.master.luxi_socket, timeout=60) as client:
            ids = [client.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0.01}]) for _ in range(3)]
            while any(row[0] not in ("success", "error") for row in client.query_jobs(ids, ["status"])):
                time.sleep(0.05)

    await deferToThread(jobs)
    await cluster.cluster.until(lambda: len({queue_files_count(p) for p in cluster.roots}) == 1, timeout=30)


class _Stopped(Exception):
    """The daemon stopped answering: the run ends there."""


async def run_fuzz(cluster: ChaosCluster, daemon: str, cases: Iterable[tuple[str, bytes]],
                   send: Callable[[bytes], Any]) -> list[str]:
    """Send every case; after each batch the daemon must still answer and
    the state be unchanged (a batch that changed it is replayed case by
    case to name the culprits, the state restored after each).  The
    problems found, each naming the cases that caused it."""
    guard = await fuzz.Guard.take(cluster, daemon)
    problems: list[str] = []
    batch: list[tuple[str, bytes]] = []

    async def state_kept() -> bool:
        return await fuzz.State.of(cluster) == guard.state

    process = cluster.daemon(daemon).process
    previous: list[str] = []

    async def flush() -> None:
        for label, data in batch:
            began = time.monotonic()
            await deferToThread(send, data)
            if time.monotonic() - began > 1.0:
                print("slow case (%.1fs): %s" % (time.monotonic() - began, label))
            if process is not None and process.poll() is not None:
                problems.append("%s exited (status %s) at case %r or the one before it (%r): %s"
                                % (daemon, process.returncode, label, previous[-1:], tail(cluster.daemon(daemon).output())))
                raise _Stopped
            previous.append(label)
        if not await cluster.answers(daemon):
            problems.append("%s stopped answering after one of %s: %s"
                            % (daemon, previous[-BATCH - 2:], tail(cluster.daemon(daemon).output(), 30)))
            raise _Stopped
        if not await state_kept():
            await fuzz.restore(cluster, guard.state)
            for label, data in batch:
                before = await fuzz.State.of(cluster)
                await deferToThread(send, data)
                after = await fuzz.State.of(cluster)
                if after != before:
                    problems.append("%r changed the state: %s" % (label, fuzz.state_change(before, after)))
                    await fuzz.restore(cluster, guard.state)
            guard.state = await fuzz.State.of(cluster)

    try:
        for case in cases:
            batch.append(case)
            if len(batch) >= BATCH:
                await flush()
                batch = []
        await flush()
    except _Stopped:
        return ["%s (seed %d)" % (p, SEED) for p in problems]
    problems += await guard.problems(cluster)
    return ["%s (seed %d)" % (p, SEED) for p in problems]


@pytest_twisted.ensureDeferred
async def test_fuzz_luxi(root):
    rng = random.Random(SEED)
    async with ChaosCluster(reactor, root, prefix="gfzl") as cluster:
        await settled(cluster)
        path = cluster.master.luxi_socket
        problems = await run_fuzz(cluster, "luxid", fuzz.luxi_cases(rng, RANDOM_CASES),
                                  lambda data: fuzz.send_unix(path, data))
        assert problems == [], "\n".join(problems)


@pytest_twisted.ensureDeferred
async def test_fuzz_wconfd(root):
    rng = random.Random(SEED)
    async with ChaosCluster(reactor, root, prefix="gfzw") as cluster:
        await settled(cluster)
        path = cluster.master.wconfd_socket
        problems = await run_fuzz(cluster, "wconfd", fuzz.wconfd_cases(rng, RANDOM_CASES),
                                  lambda data: fuzz.send_unix(path, data, timeout=2))
        assert problems == [], "\n".join(problems)


@pytest_twisted.ensureDeferred
async def test_fuzz_confd(root):
    rng = random.Random(SEED)
    async with ChaosCluster(reactor, root, prefix="gfzc") as cluster:
        await settled(cluster)
        with open(cluster.master.hmac_key, "rb") as handle:
            key = handle.read()
        address, port = cluster.addresses[0], cluster.confd_port
        answered: list[str] = []
        refused = {"bad HMAC", "replayed (an hour old)", "from the future (an hour)", "bad magic", "empty"}

        def send(label: str, data: bytes) -> None:
            # loopback answers come within milliseconds; wait longer where an answer is the failure
            if fuzz.send_udp(address, port, data, timeout=0.5 if label in refused else 0.05):
                answered.append(label)

        cases = list(fuzz.confd_cases(rng, key, RANDOM_CASES))
        problems = await run_fuzz(cluster, "confd1", [(label, label.encode() + b"\0" + data) for label, data in cases],
                                  lambda tagged: send(*_untag(tagged)))
        assert problems == [], "\n".join(problems)
        assert sorted(refused & set(answered)) == [], "confd answered unsigned, replayed or malformed requests"
        assert "type 0 query 'None'" in answered, "confd did not answer a good PING: the refusals prove nothing"


def _untag(tagged: bytes) -> tuple[str, bytes]:
    label, _, data = tagged.partition(b"\0")
    return label.decode(), data


@pytest_twisted.ensureDeferred
async def test_fuzz_rapi(root):
    rng = random.Random(SEED)
    async with ChaosCluster(reactor, root, prefix="gfzr") as cluster:
        await settled(cluster)
        context = cluster.rapi_context()
        statuses: dict[str, int] = {}
        cases = list(fuzz.rapi_cases(rng, RANDOM_CASES))

        def send(tagged: bytes) -> None:
            label, data = _untag(tagged)
            statuses[label] = fuzz.http_status(fuzz.send_tls(cluster.rapi_address, context, data, timeout=3))

        problems = await run_fuzz(cluster, "rapi", [(label, label.encode() + b"\0" + data) for label, data in cases],
                                  send)
        plain = await deferToThread(_plain_http, cluster.rapi_address)
        assert problems == [], "\n".join(problems)
        for label in ("tags without auth", "tags, wrong password", "tags, unknown user", "malformed Basic",
                      "other scheme", "modify without auth"):
            assert statuses[label] in (401, 403), (label, statuses[label])
        assert not any(200 <= s < 300 for label, s in statuses.items() if label.startswith(("POST", "PUT"))), statuses
        assert not plain.startswith(b"HTTP/1.1 200"), "RAPI answered plain HTTP"


def _plain_http(address: tuple[str, int]) -> bytes:
    import socket

    with socket.create_connection(address, timeout=3) as sock:
        sock.sendall(b"GET /2/info HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            return sock.recv(100)
        except OSError:
            return b""


@pytest_twisted.ensureDeferred
async def test_fuzz_noded(root, tmp_path):
    rng = random.Random(SEED)
    async with ChaosCluster(reactor, root, prefix="gfzn") as cluster:
        await settled(cluster)
        node3 = (cluster.addresses[2], cluster.cluster.rpc_port)
        with_cert = fuzz.noded_context(cluster.roots[2].server_pem)
        answers: dict[str, bytes] = {}

        def send(tagged: bytes) -> None:
            label, data = _untag(tagged)
            answers[label] = fuzz.send_tls(node3, with_cert, data, timeout=3)

        # without the cluster certificate: refused before any procedure runs
        key_pem, cert_pem = crypto.generate_key_and_cert("intruder.test")
        foreign = str(tmp_path / "foreign.pem")
        crypto.write_pem_file(foreign, key_pem, cert_pem)
        version = fuzz.http(b"POST", b"/version", b"[]")
        no_cert = await deferToThread(fuzz.send_tls, node3, fuzz.noded_context(None), version)
        other_cert = await deferToThread(fuzz.send_tls, node3, fuzz.noded_context(foreign), version)
        first = await deferToThread(fuzz.send_tls, node3, with_cert, version)
        assert fuzz.http_status(first) == 200, first[:300]  # the harness's own client is a good one
        cases = list(fuzz.noded_cases(rng, RANDOM_CASES))
        problems = await run_fuzz(cluster, "noded3", [(label, label.encode() + b"\0" + data) for label, data in cases],
                                  send)
        good = await deferToThread(fuzz.send_tls, node3, with_cert, version)
        ran = [label for label, answer in answers.items()
               if label.endswith("empty body") and fuzz.http_status(answer) == 200 and b"[true" in answer]
        if ran:
            problems.append("NodeD ran procedures on an empty body: %s" % ran)
        if fuzz.http_status(good) != 200:
            problems.append("NodeD did not answer a good request after the fuzzing: %r" % good[:300])
        for what, answer in (("no certificate", no_cert), ("a foreign certificate", other_cert)):
            if 0 < fuzz.http_status(answer) < 400:
                problems.append("NodeD answered a client with %s: %r" % (what, answer[:300]))
        assert problems == [], "\n".join(problems)
