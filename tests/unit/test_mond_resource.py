"""MonD's HTTP API and /metrics, spoken over an in-memory transport (no sockets)."""

from __future__ import annotations

import json
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from ganeti.mond import metrics
from ganeti.mond.report import KIND_STATUS
from ganeti.mond.resource import Api, MondFactory
from ganeti.mond.service import encode_entry
from ganeti.promtext import Exposition, Histogram, format_value, labels_text
from tests.unit.test_mond_service import Counting, ServiceCase


def responses(data: bytes) -> list[tuple[int, dict[bytes, bytes], bytes]]:
    """The HTTP/1.1 responses in C{data}: C{(code, headers, body)} each."""
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        code = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
        length = int(headers.get(b"content-length", b"0"))
        out.append((code, headers, rest[:length]))
        data = rest[length:]
    return out


class Verbose(Counting):
    def present(self, data: Any, verbose: bool) -> Any:
        return data if verbose else {"status": data["status"]}


class ResourceTests(ServiceCase):
    def setUp(self) -> None:
        super().setUp()
        self.status = Verbose("probe", "storage", KIND_STATUS)
        self.status.behaviour = lambda view: {"status": {"code": 0, "message": ""}, "detail": 7}
        self.mond = self.service()
        self.api = Api(self.mond)
        self.factory = MondFactory(self.api, None, self.clock)

    def exchange(self, data: bytes) -> tuple[bytes, StringTransport]:
        channel = self.factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 40000))
        transport = StringTransport()
        channel.makeConnection(transport)
        channel.dataReceived(data)
        return transport.value(), transport

    def get(self, path: str, method: str = "GET") -> tuple[int, str, bytes]:
        raw, _transport = self.exchange(b"%s %s HTTP/1.1\r\nHost: mond\r\n\r\n" % (method.encode(), path.encode()))
        ((code, headers, body),) = responses(raw)
        return code, headers.get(b"content-type", b"").decode(), body

    def json(self, path: str) -> Any:
        code, ctype, body = self.get(path)
        self.assertEqual((code, ctype), (200, "application/json"), body)
        return json.loads(body)

    def test_api(self) -> None:
        self.assertEqual(self.json("/"), [1])
        self.assertEqual(self.json("/1"), None)
        self.assertEqual(self.json("/1/"), None)
        self.assertEqual(self.json("/1/list/collectors"),
                         [["cpu-avg-load", None, 0], ["diskstats", "storage", 0], ["probe", "storage", 1]])
        everything = self.json("/1/report/all")
        self.assertEqual([r["name"] for r in everything], ["cpu-avg-load", "diskstats", "probe"])
        one = self.json("/1/report/default/cpu-avg-load")
        self.assertEqual(one, {"name": "cpu-avg-load", "version": "B", "format_version": 1, "timestamp": 0,
                               "category": None, "kind": 0, "data": {"run": 1}})
        self.assertEqual(self.json("/1/report/storage/diskstats")["name"], "diskstats")

    def test_verbose(self) -> None:
        self.assertEqual(self.json("/1/report/storage/probe")["data"], {"status": {"code": 0, "message": ""}})
        self.assertEqual(self.json("/1/report/storage/probe?verbose=1")["data"]["detail"], 7)
        self.assertEqual(self.json("/1/report/all?verbose=1")[2]["data"]["detail"], 7)
        self.assertNotIn("detail", self.json("/1/report/all?verbose=0")[2]["data"])

    def test_not_found(self) -> None:
        for path in ("/x", "/2", "/1/list", "/1/list/collectors/x", "/1/x", "/metrics/x", "/%ff"):
            self.assertEqual(self.get(path)[0::2], (404, b"Resource not found"), path)
        for path in ("/1/report", "/1/report/nope/diskstats", "/1/report/default/diskstats",
                     "/1/report/storage/nope", "/1/report/all/x", "/1/report/a/b/c"):
            self.assertEqual(self.get(path)[0::2], (404, b"Unable to produce a report for the requested resource"),
                             path)

    def test_only_get(self) -> None:
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            code, _ctype, body = self.get("/1/report/all", method)
            self.assertEqual((code, body), (405, b"Method not allowed"), method)
        raw, _transport = self.exchange(b"HEAD / HTTP/1.1\r\nHost: mond\r\n\r\n")
        self.assertTrue(raw.startswith(b"HTTP/1.1 200 OK\r\n"), raw)
        self.assertTrue(raw.endswith(b"\r\n\r\n"), raw)  # no body

    def test_keep_alive_and_pipelining(self) -> None:
        raw, transport = self.exchange(b"GET / HTTP/1.1\r\nHost: m\r\n\r\nGET /1 HTTP/1.1\r\nHost: m\r\n\r\n"
                                       b"GET /1/report/default/cpu-avg-load HTTP/1.1\r\nHost: m\r\n\r\n")
        self.assertEqual([(code, body[:20]) for code, _h, body in responses(raw)],
                         [(200, b"[1]"), (200, b"null"), (200, b'{"name":"cpu-avg-loa')])
        self.assertFalse(transport.disconnecting)

    def test_garbage_gets_400_and_the_connection_closes(self) -> None:
        raw, transport = self.exchange(b"\x00\xffgarbage\r\n\r\n")
        self.assertTrue(raw.startswith(b"HTTP/1.1 400 "), raw)
        self.assertTrue(transport.disconnecting)

    def test_metrics(self) -> None:
        code, ctype, body = self.get("/metrics")
        self.assertEqual((code, ctype), (200, "text/plain; version=0.0.4; charset=utf-8"))
        text = body.decode()
        self.assertIn('ganeti_mond_collector_status_code{collector="probe"} 0\n', text)
        self.assertIn("ganeti_mond_config_stale 0\n", text)
        self.assertIn('ganeti_mond_config_source_info{source="confd"} 1\n', text)
        # rebuilt only when a report changed
        first = self.api.metrics()
        self.assertIs(self.api.metrics(), first)
        self.clock.advance(5)
        self.assertIsNot(self.api.metrics(), first)


class MetricsTests(SynchronousTestCase):
    """The Prometheus text of each collector's data."""

    def render(self, name: str, data: Any, category: str | None = None) -> str:
        collector = Counting(name, category)
        return metrics.render([encode_entry(collector, data, 12.5, True)], "", "confd").decode()

    def test_node(self) -> None:
        text = self.render("node-resources", {"cpus": 4, "memory": {"total": 100, "free": 10, "available": 50},
                                              "filesystems": [{"mountpoint": "/", "type": "ext4", "size": 9,
                                                               "free": 3, "used": 6}],
                                              "nics": [{"name": "eth0", "rx_bytes": 5, "tx_bytes": 6}]})
        for line in ("ganeti_node_cpus 4", "ganeti_node_memory_total_bytes 100",
                     'ganeti_node_filesystem_size_bytes{mountpoint="/",fstype="ext4"} 9',
                     'ganeti_node_network_receive_bytes_total{device="eth0"} 5',
                     "# TYPE ganeti_node_network_transmit_bytes_total counter",
                     'ganeti_mond_collector_last_run_timestamp_seconds{collector="node-resources"} 12.5'):
            self.assertIn(line + "\n", text)

    def test_cpu_disks_instances_storage_daemons(self) -> None:
        text = self.render("cpu-avg-load", {"cpu_number": 2, "cpus": [0.25, 0.5], "cpu_total": 0.75})
        self.assertIn('ganeti_node_cpu_load_ratio{cpu="total"} 0.75\n', text)
        self.assertIn('ganeti_node_cpu_load_ratio{cpu="1"} 0.5\n', text)
        text = self.render("diskstats", [{"name": "sda", "readsNum": 1, "writes": 2, "secRead": 2, "secWritten": 4,
                                          "timeIO": 1500}])
        self.assertIn('ganeti_node_disk_read_bytes_total{device="sda"} 1024\n', text)
        self.assertIn('ganeti_node_disk_io_time_seconds_total{device="sda"} 1.5\n', text)
        text = self.render("inst-status-fake", {"instances": [
            {"name": "vm1", "hypervisor": "fake", "actual_state": "running", "admin_state": "up", "memory": 2,
             "vcpus": 3, "uptime": "40", "status": {"code": 0}}], "status": {"code": 0, "message": ""}})
        for line in ('ganeti_instance_up{instance_name="vm1",hypervisor="fake"} 1',
                     'ganeti_instance_memory_bytes{instance_name="vm1",hypervisor="fake"} 2097152',
                     'ganeti_instance_uptime_seconds{instance_name="vm1",hypervisor="fake"} 40'):
            self.assertIn(line + "\n", text)
        text = self.render("storage-file", {"type": "file", "path": "/srv", "size": 3, "used": 2, "free": 1,
                                            "status": {"code": 0}})
        self.assertIn('ganeti_storage_free_bytes{storage_type="file",path="/srv"} 1\n', text)
        text = self.render("ganeti-noded", {"running": True, "memory": 5, "cpu_seconds": 1.5, "cpu_percent": 50.0,
                                            "open_fds": 9, "start_time": 3.0, "status": {"code": 0}}, "daemon")
        self.assertIn('ganeti_daemon_cpu_seconds_total{daemon="ganeti-noded"} 1.5\n', text)
        self.assertIn('ganeti_daemon_cpu_ratio{daemon="ganeti-noded"} 0.5\n', text)
        text = self.render("ganeti-luxid", {"running": False, "status": {"code": 4}}, "daemon")
        self.assertIn('ganeti_daemon_up{daemon="ganeti-luxid"} 0\n', text)
        self.assertNotIn("ganeti_daemon_resident_memory_bytes", text)

    def test_failed_collector_gives_only_its_status(self) -> None:
        entry = encode_entry(Counting("diskstats"), {"status": {"code": 4, "message": "x"}}, 1.0, False)
        text = metrics.render([entry], "confd did not answer", "cache").decode()
        self.assertIn('ganeti_mond_collector_status_code{collector="diskstats"} 4\n', text)
        self.assertNotIn("ganeti_node_disk", text)
        self.assertIn("ganeti_mond_config_stale 1\n", text)


class PromTextTests(SynchronousTestCase):
    def test_values_and_labels(self) -> None:
        self.assertEqual([format_value(v) for v in (3, 2.5, float("inf"), float("nan"), True)],
                         ["3", "2.5", "+Inf", "NaN", "1"])
        self.assertEqual(labels_text({"a": 'x"y\\z\n'}), '{a="x\\"y\\\\z\\n"}')

    def test_histograms(self) -> None:
        out = Exposition()
        out.histogram("h_seconds", "A histogram.", (1.0, 2.0), [0.5, 1.5, 1.0, 9.0], op="x")
        histogram = Histogram((1.0, 2.0))
        for value in (0.5, 3.0):
            histogram.observe(value)
        out.histogram_counts("k_seconds", "Kept.", histogram.buckets, histogram.counts, histogram.total,
                             histogram.count)
        out.family("empty", "gauge", "Nothing.")
        self.assertEqual(out.render().decode(), "\n".join([
            "# HELP h_seconds A histogram.", "# TYPE h_seconds histogram",
            'h_seconds_bucket{op="x",le="1.0"} 2', 'h_seconds_bucket{op="x",le="2.0"} 3',
            'h_seconds_bucket{op="x",le="+Inf"} 4', 'h_seconds_sum{op="x"} 12.0', 'h_seconds_count{op="x"} 4',
            "# HELP k_seconds Kept.", "# TYPE k_seconds histogram",
            'k_seconds_bucket{le="1.0"} 1', 'k_seconds_bucket{le="2.0"} 1', 'k_seconds_bucket{le="+Inf"} 2',
            "k_seconds_sum 3.5", "k_seconds_count 2", ""]))
