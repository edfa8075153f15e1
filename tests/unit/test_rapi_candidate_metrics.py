"""A candidate's RAPI serves its own /metrics, not the master's: a sum()
over every RAPI target counts each job once."""

from __future__ import annotations

from treq.testing import StubTreq
from twisted.internet.task import Clock

from ganeti.rapi import metrics
from ganeti.rapi.forward import ForwardingResource
from tests.unit.test_rapi_forward import Agent, Response
from tests.unit.test_rapi_metrics import MetricsLuxi
from tests.unit.test_rapi_server import BASE, RapiTestCase, auth


class CandidateMetricsTests(RapiTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.luxi = MetricsLuxi()
        self.resource.luxi = self.luxi
        self.master: str | None = "127.0.1.1"
        self.agent = Agent(Response())
        self.resource.forwarding = lambda: self.master is not None
        self.stub = StubTreq(ForwardingResource(self.resource, lambda: self.master, 5080, self.agent, Clock()))

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
        d = self.stub.request("GET", BASE + path, headers=headers or {})
        self.stub.flush()
        response = self.successResultOf(d)
        body = self.successResultOf(response.content())
        self.stub.flush()
        return response.code, body.decode()

    def test_candidate_serves_its_own_figures_only(self) -> None:
        code, text = self.get("/metrics")
        self.assertEqual(code, 200)
        self.assertEqual(self.agent.requests, [], "not forwarded to the master")
        self.assertEqual(self.luxi.methods(), [], "no cluster figures from LuxiD")
        self.assertIn("ganeti_rapi_forwarding 1\n", text)
        for family in ("ganeti_jobs", "ganeti_nodes", "ganeti_config_serial", "ganeti_job_run_seconds"):
            self.assertNotIn(family, text)
        self.assertEqual(self.get("/2/info")[0], 201)  # forwarded: the master's answer
        self.assertEqual(len(self.agent.requests), 1)
        text = self.get("/metrics")[1]
        self.assertIn('ganeti_rapi_forwarded_request_duration_seconds_count{resource="/2/info",method="GET",'
                      'code="201"} 1\n', text)
        self.assertIn('ganeti_rapi_request_duration_seconds_count{resource="/metrics",method="GET",code="200"} 1\n',
                      text)
        self.assertNotIn('ganeti_rapi_request_duration_seconds_count{resource="/2/info"', text)

    def test_authentication_rules_are_the_same(self) -> None:
        self.resource.require_authentication = True
        self.assertEqual(self.get("/metrics")[0], 401)
        self.assertEqual(self.get("/metrics", auth("reader", "pw"))[0], 200)

    def test_the_master_serves_the_cluster(self) -> None:
        self.master = None
        code, text = self.get("/metrics")
        self.assertEqual(code, 200)
        self.assertIn("ganeti_config_serial 17\n", text)
        self.assertNotIn("ganeti_rapi_forwarding", text)

    def test_render_candidate_is_pure(self) -> None:
        requests, forwarded = metrics.RequestMetrics(), metrics.RequestMetrics()
        forwarded.observe("/2/jobs/[job_id]", "GET", 200, 0.02)
        text = metrics.render_candidate(requests, forwarded).decode()
        self.assertIn('ganeti_rapi_forwarded_request_duration_seconds_count{resource="/2/jobs/[job_id]",'
                      'method="GET",code="200"} 1\n', text)
