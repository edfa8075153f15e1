"""RAPI's /metrics: the text from LUXI answers, who may read it, request
latencies; WConfD's config write latency and the LUXI values behind them."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from ganeti.promtext import Histogram
from ganeti.query.cluster import config_values
from ganeti.rapi import metrics
from ganeti.rapi.server import RapiResource
from ganeti.rapi.users import UsersFile
from ganeti.wconfd import commands as c
from tests.unit.test_rapi_server import BASE, FakeLuxi, RapiTestCase, auth
from tests.unit.test_wconfd_protocol import ProtocolTestCase
from tests.unit.wconfd_helpers import make_config


def ts(seconds: float) -> list[int]:
    return [int(seconds), int(round((seconds - int(seconds)) * 1e6))]


JOBS = [
    [1, "success", [{"OP_ID": "OP_TEST_DELAY"}], ts(100), ts(100.5), ts(103.5), [{"cluster": 0.25}]],
    [2, "error", [{"OP_ID": "OP_INSTANCE_CREATE"}], ts(100), ts(102), ts(102.25),
     [{"cluster": 0.002, "instance": 0.02, "node": 1.5}]],
    [3, "queued", [{"OP_ID": "OP_TEST_DELAY"}], ts(104), None, None, [{}]],
]
NODES = [["n1", False, False, True, "M"], ["n2", True, False, False, "O"], ["n3", False, False, False, "R"]]
LATENCY = {"buckets": [0.001, 0.01], "counts": [2, 3], "sum": 0.013, "count": 4}


class RenderTests(SynchronousTestCase):
    def test_text(self) -> None:
        requests = metrics.RequestMetrics()
        requests.observe("/2/info", "GET", 200, 0.003)
        text = metrics.render(JOBS, 17, NODES, LATENCY, requests).decode()
        for line in (
            'ganeti_jobs{status="queued",opcode="OP_TEST_DELAY"} 1',
            'ganeti_jobs{status="success",opcode="OP_TEST_DELAY"} 1',
            'ganeti_jobs{status="error",opcode="OP_INSTANCE_CREATE"} 1',
            'ganeti_job_queue_wait_seconds_bucket{opcode="OP_TEST_DELAY",le="0.5"} 1',
            'ganeti_job_queue_wait_seconds_bucket{opcode="OP_INSTANCE_CREATE",le="1.0"} 0',
            'ganeti_job_queue_wait_seconds_sum{opcode="OP_INSTANCE_CREATE"} 2.0',
            'ganeti_job_run_seconds_sum{opcode="OP_TEST_DELAY"} 3.0',
            'ganeti_job_run_seconds_count{opcode="OP_INSTANCE_CREATE"} 1',
            'ganeti_lock_wait_seconds_bucket{level="cluster",le="0.005"} 1',
            'ganeti_lock_wait_seconds_count{level="cluster"} 2',
            'ganeti_lock_wait_seconds_sum{level="instance"} 0.02',
            'ganeti_lock_wait_seconds_bucket{level="node",le="1.0"} 0',
            'ganeti_lock_wait_seconds_bucket{level="node",le="5.0"} 1',
            "ganeti_config_serial 17",
            'ganeti_wconfd_config_write_seconds_bucket{le="0.01"} 3',
            "ganeti_wconfd_config_write_seconds_count 4",
            'ganeti_nodes{role="M",state="online"} 1',
            'ganeti_nodes{role="O",state="offline"} 1',
            'ganeti_rapi_request_duration_seconds_bucket{resource="/2/info",method="GET",code="200",le="0.005"} 1',
            "# TYPE ganeti_rapi_request_duration_seconds histogram",
        ):
            self.assertIn(line + "\n", text)
        self.assertEqual(text.count("ganeti_job_run_seconds_count"), 2)  # the queued job has not run

    def test_unknown_values_are_left_out(self) -> None:
        text = metrics.render([None, [1, "x"]], None, [], None, metrics.RequestMetrics()).decode()
        self.assertNotIn("ganeti_config_serial", text)
        self.assertNotIn("ganeti_wconfd", text)
        self.assertNotIn("ganeti_jobs{", text)
        self.assertNotIn("ganeti_nodes_liveness", text)  # no roster (LuxiD without heartbeats)


class MetricsLuxi(FakeLuxi):
    def __init__(self) -> None:
        super().__init__()
        self.answers["QueryJobs"] = lambda ids, fields: JOBS if fields == metrics.JOB_FIELDS else None
        self.answers["QueryConfigValues"] = lambda names: [17, LATENCY]
        self.answers["QueryNodes"] = lambda names, fields, lock: [["up"], ["unreachable"], ["up"]] \
            if fields == ["liveness"] else NODES

    read = FakeLuxi.call


class EndpointTests(RapiTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.luxi = MetricsLuxi()
        self.resource.luxi = self.luxi

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
        d = self.stub.request("GET", BASE + path, headers=headers or {})
        self.stub.flush()
        response = self.successResultOf(d)
        body = self.successResultOf(response.content())
        self.stub.flush()
        return response.code, response.headers.getRawHeaders("content-type")[0], body

    def test_metrics_as_a_read(self) -> None:
        code, ctype, body = self.get("/metrics")
        self.assertEqual((code, ctype), (200, "text/plain; version=0.0.4; charset=utf-8"))
        self.assertIn(b"ganeti_config_serial 17\n", body)
        self.assertEqual(self.luxi.methods(), ["QueryJobs", "QueryConfigValues", "QueryNodes", "QueryNodes"])
        self.assertIn(b'ganeti_nodes_liveness{liveness="unreachable"} 1\n', body)
        self.assertIn(b'ganeti_nodes_liveness{liveness="up"} 2\n', body)
        self.assertEqual(self.luxi.calls[1], ("QueryConfigValues", ["config_serial", "config_write_latency"]))
        self.ok("GET", "/2/info")
        self.error(404, "GET", "/2/nowhere")
        text = self.get("/metrics")[2].decode()
        for line in ('ganeti_rapi_request_duration_seconds_count{resource="/metrics",method="GET",code="200"} 1',
                     'ganeti_rapi_request_duration_seconds_count{resource="/2/info",method="GET",code="200"} 1',
                     'ganeti_rapi_request_duration_seconds_count{resource="unmatched",method="GET",code="404"} 1'):
            self.assertIn(line + "\n", text)

    def test_authentication_rules(self) -> None:
        """With --require-authentication /metrics is a read like the others,
        unless --public-metrics makes it public."""
        self.resource.require_authentication = True
        self.assertEqual(self.get("/metrics")[0], 401)
        self.assertEqual(self.get("/metrics", auth("reader", "pw"))[0], 200)
        self.assertEqual(self.get("/metrics", auth("reader", "wrong"))[0], 401)
        self.resource.public_metrics = True
        self.assertEqual(self.get("/metrics")[0], 200)
        self.assertEqual(self.get("/2/info")[0], 401)

    def test_option(self) -> None:
        from ganeti.rapi.tap import Options

        options = Options()
        options.parseOptions(["--bind", "127.0.0.1", "--public-metrics"])
        self.assertTrue(options["public-metrics"])
        resource = RapiResource(self.luxi, UsersFile(self.users_path), public_metrics=True)
        self.assertTrue(resource.public_metrics)


class ConfigValueTests(SynchronousTestCase):
    def test_extensions(self) -> None:
        config = make_config()
        self.assertEqual(config_values(config, ["config_serial", "config_write_latency", "nope"], False, None,
                                       LATENCY), [config.serial_no, LATENCY, None])


class WriteLatencyTests(ProtocolTestCase):
    def test_memory_storage_has_none(self) -> None:
        self.assertIsNone(self.run_ok(self.client.read_write_latency()))

    def test_histogram_of_the_storage(self) -> None:
        histogram = Histogram((0.001, 0.01))
        histogram.observe(0.005)
        self.service.storage.write_latency = histogram
        self.assertEqual(self.run_ok(self.client.read_write_latency()),
                         {"buckets": [0.001, 0.01], "counts": [0, 1], "sum": 0.005, "count": 1})
        self.assertTrue(c.ReadWriteLatency.commandName)
