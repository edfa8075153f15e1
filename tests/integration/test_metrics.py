"""Prometheus metrics, checked by real consumers: C{promtool check metrics}
on the C{/metrics} of every MonD and of RAPI, and a real Prometheus server
(Debian's C{prometheus}, installed by scripts/install-prometheus) scraping a
3-node loopback cluster's MonDs and RAPI for about ten seconds, then
answering PromQL queries through its HTTP API."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import tempfile
import urllib.parse
import urllib.request
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.task import deferLater

from ganeti.daemons import free_port
from ganeti.rapi.testing import RapiDaemon
from ganeti.rapi.users import ha1
from ganeti.testing.cluster import LoopbackCluster, loopback_config, ok, ssconf_of
from ganeti.testing.mond import ConfdDaemon, MondDaemon

PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="prometheus/promtool not installed (scripts/install-prometheus installs Debian's package)",
)
USERS = "reader %s read\n" % ha1("reader", "pw")
SCRAPE_SECONDS = 10


def promtool_check(text: bytes) -> None:
    done = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, timeout=60)
    assert done.returncode == 0, (done.stdout, done.stderr, text.decode()[:3000])


def rapi_metrics(cluster: LoopbackCluster) -> bytes:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(cluster.url + "/metrics", context=context, timeout=30) as answer:
        assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
        return answer.read()


def query(port: int, promql: str) -> list[dict[str, Any]]:
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": promql}))
    with urllib.request.urlopen(url, timeout=10) as answer:
        body = json.load(answer)
    assert body["status"] == "success", body
    return body["data"]["result"]


def prometheus_config(monds: list[MondDaemon], rapi: str) -> str:
    targets = ", ".join('"%s:%d"' % (m.address, m.port) for m in monds)
    return """global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: ganeti-mond
    static_configs:
      - targets: [%s]
  - job_name: ganeti-rapi
    scheme: https
    tls_config:
      insecure_skip_verify: true
    static_configs:
      - targets: ["%s"]
""" % (targets, rapi)


@pytest_twisted.ensureDeferred
async def test_prometheus_scrapes_monds_and_rapi(root):
    async with LoopbackCluster(reactor, root, loopback_config(3), rapi_users=USERS, prefix="gntpm") as cluster:
        confd = ConfdDaemon(cluster.master, "127.0.1.1", free_port("127.0.1.1", udp=True))
        monds = [MondDaemon(paths, name, address, free_port(address), confd.port, "--config-interval", "1")
                 for paths, (name, address) in zip(cluster.roots, cluster.nodes.items())]
        storage = tempfile.mkdtemp(prefix="gntprom")
        prometheus = None
        try:
            confd.start()
            await confd.ready(reactor)
            for mond in monds:
                mond.start()
            for mond in monds:
                await mond.ready(reactor)
            ok(cluster.master, "gnt-debug", "delay", "--no-locks", "0.1")  # the lock waits are the creation's
            ok(cluster.master, "gnt-instance", "add", "-t", "diskless", "-o", "noop", "--no-nics",
               "--no-name-check", "--no-ip-check", "-B", "memory=128", "-n", "node2.test", "vm1.test")

            # every endpoint passes promtool, and says what it should
            for mond in monds:
                await cluster.until(lambda: b"ganeti_daemon_up" in mond.get("/metrics")[2], timeout=20)
                status, headers, body = mond.get("/metrics")
                assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
                promtool_check(body)
            await cluster.until(lambda: b'instance_name="vm1.test"' in monds[1].get("/metrics")[2], timeout=20)
            text = monds[1].get("/metrics")[2].decode()
            assert 'ganeti_instance_up{instance_name="vm1.test",hypervisor="fake"} 1' in text
            assert 'ganeti_instance_memory_bytes{instance_name="vm1.test",hypervisor="fake"} 134217728' in text
            assert 'ganeti_daemon_up{daemon="ganeti-noded"} 1' in text
            rapi = rapi_metrics(cluster)
            promtool_check(rapi)
            text = rapi.decode()
            assert 'ganeti_jobs{status="success",opcode="OP_TEST_DELAY"} 1' in text
            assert 'ganeti_job_run_seconds_count{opcode="OP_INSTANCE_CREATE"} 1' in text
            assert 'ganeti_lock_wait_seconds_count{level="instance"} 1' in text  # the creation's locks
            assert 'ganeti_lock_wait_seconds_count{level="node"} 1' in text
            assert "ganeti_config_serial " in text and "ganeti_wconfd_config_write_seconds_count " in text
            assert 'ganeti_nodes{role="M",state="online"} 1' in text
            assert 'ganeti_nodes_liveness{liveness="up"} ' in text  # the heartbeat roster
            # the first scrape counted itself only once it was answered: the second sees it
            assert 'ganeti_rapi_request_duration_seconds_count{resource="/metrics",method="GET",code="200"} 1' \
                in rapi_metrics(cluster).decode()

            # a real Prometheus scrapes them all for ten seconds
            config = os.path.join(storage, "prometheus.yml")
            with open(config, "w") as handle:
                handle.write(prometheus_config(monds, cluster.url.split("//", 1)[1]))
            port = free_port("127.0.0.1")
            log = open(os.path.join(storage, "prometheus.log"), "wb")
            prometheus = subprocess.Popen(
                [PROMETHEUS, "--config.file=" + config, "--storage.tsdb.path=" + os.path.join(storage, "data"),
                 "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, cwd=storage)
            log.close()
            await deferLater(reactor, SCRAPE_SECONDS, lambda: None)

            def scraped() -> bool:
                try:
                    return float(query(port, "sum(up)")[0]["value"][1]) == 4
                except (OSError, IndexError, ValueError):
                    return False
            await cluster.until(scraped, timeout=60)
            noded = query(port, 'count(ganeti_daemon_up{daemon="ganeti-noded"} == 1)')
            assert noded[0]["value"][1] == "3", noded
            per_node = query(port, 'ganeti_node_cpus')
            assert len(per_node) == 3 and all(float(r["value"][1]) >= 1 for r in per_node)
            running = query(port, 'ganeti_instance_up{instance_name="vm1.test"}')
            assert [r["metric"]["instance"] for r in running] == ["%s:%d" % (monds[1].address, monds[1].port)]
            jobs = query(port, 'sum by (opcode) (ganeti_jobs{status="success"})')
            assert {r["metric"]["opcode"]: r["value"][1] for r in jobs} == {"OP_TEST_DELAY": "1",
                                                                            "OP_INSTANCE_CREATE": "1"}
            def scrapes() -> int:
                try:
                    return int(query(port, 'count_over_time(ganeti_config_serial[1m])')[0]["value"][1])
                except (OSError, IndexError, ValueError):
                    return 0
            # (the first scrapes above may all have come at once: Prometheus then scrapes at its interval)
            await cluster.until(lambda: scrapes() >= 3, timeout=60)
            samples = query(port, 'count_over_time(ganeti_config_serial[1m])')
            assert int(samples[0]["value"][1]) >= 3, samples  # scraped again and again
        finally:
            if prometheus is not None:
                prometheus.terminate()
                try:
                    prometheus.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    prometheus.kill()
                    prometheus.wait()
            for mond in monds:
                mond.stop()
            confd.stop()
            shutil.rmtree(storage, ignore_errors=True)


@pytest_twisted.ensureDeferred
async def test_prometheus_sums_jobs_over_every_rapi_once(root):
    """Every candidate runs RAPI, and an admin scrapes them all: a candidate's
    /metrics has its own figures, not the master's, so a sum() is right."""
    config = loopback_config(3, candidate_pool_size=3, candidates=("node2.test", "node3.test"))
    async with LoopbackCluster(reactor, root, config, rapi_users=USERS, prefix="gntpr") as cluster:
        ok(cluster.master, "gnt-debug", "delay", "--no-locks", "0.05")
        ok(cluster.master, "gnt-cluster", "redist-conf")  # ssconf on every node: it says who the master is
        master_name = next(iter(cluster.nodes))
        candidates = []
        storage = tempfile.mkdtemp(prefix="gntpromr")
        prometheus = None
        try:
            for paths, address in list(zip(cluster.roots, cluster.nodes.values()))[1:]:
                await cluster.until(lambda p=paths: (ssconf_of(p, "master_node") or "").strip() == master_name)
                shutil.copy(cluster.master.rapi_pem, paths.rapi_pem)
                os.makedirs(os.path.dirname(paths.rapi_users), exist_ok=True)
                shutil.copy(cluster.master.rapi_users, paths.rapi_users)
                candidates.append(RapiDaemon(paths, address, free_port(address)))
            for rapi in candidates:
                await cluster.start_daemon(rapi)
            targets = [cluster.url.split("//", 1)[1]] + ["%s:%d" % (r.host, r.port) for r in candidates]
            config = os.path.join(storage, "prometheus.yml")
            with open(config, "w") as handle:
                handle.write(prometheus_config([], targets[0])
                             .replace('["%s"]' % targets[0], "[%s]" % ", ".join('"%s"' % t for t in targets)))
            port = free_port("127.0.0.1")
            log = open(os.path.join(storage, "prometheus.log"), "wb")
            prometheus = subprocess.Popen(
                [PROMETHEUS, "--config.file=" + config, "--storage.tsdb.path=" + os.path.join(storage, "data"),
                 "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, cwd=storage)
            log.close()

            def scraped() -> bool:
                try:
                    return float(query(port, 'sum(up{job="ganeti-rapi"})')[0]["value"][1]) == 3
                except (OSError, IndexError, ValueError):
                    return False
            await cluster.until(scraped, timeout=60)
            jobs = query(port, 'sum(ganeti_jobs{status="success",opcode="OP_TEST_DELAY"})')
            assert jobs[0]["value"][1] == "1", jobs
            forwarding = query(port, "ganeti_rapi_forwarding")
            assert sorted(r["metric"]["instance"] for r in forwarding) == sorted(targets[1:]), forwarding
            serials = query(port, "count(ganeti_config_serial)")
            assert serials[0]["value"][1] == "1", serials
        finally:
            if prometheus is not None:
                prometheus.terminate()
                try:
                    prometheus.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    prometheus.kill()
                    prometheus.wait()
            for rapi in candidates:
                rapi.stop()
            shutil.rmtree(storage, ignore_errors=True)
