"""MonD on a master candidate reports the ganeti-rapi that runs there."""

from __future__ import annotations

from twisted.internet.task import Clock

from ganeti.mond.collectors import ClusterView
from ganeti.mond.collectors.daemons import DaemonStatus
from ganeti.mond.collectors.host import Host
from ganeti.mond.service import MondService
from ganeti.mond.tap import build_collectors
from tests.unit.test_mond_service import ServiceCase


class CandidateRapiTests(ServiceCase):
    def _service(self, candidates: str) -> MondService:
        with open(self.paths.ssconf("master_candidates"), "w") as handle:
            handle.write(candidates)
        rapi = DaemonStatus("ganeti-rapi", True, lambda: None, Host(), on_candidates=True)
        luxid = DaemonStatus("ganeti-luxid", True, lambda: None, Host())
        service = MondService(self.paths, self.clock, "node2.test", [rapi, luxid], confd=self.confd,
                              config_interval=15)
        service.startService()
        self.addCleanup(service.stopService)
        return service

    def test_candidate_reports_rapi_not_the_other_master_daemons(self) -> None:
        service = self._service("node1.test\nnode2.test\n")
        self.assertEqual(self.names(service), ["ganeti-rapi"])

    def test_other_node_reports_no_rapi(self) -> None:
        service = self._service("node1.test\n")
        self.assertEqual(self.names(service), [])

    def test_built_in_rapi_collector_is_reported_on_candidates(self) -> None:
        by_name = {c.name: c for c in build_collectors(self.paths, Clock())}
        self.assertTrue(by_name["ganeti-rapi"].available(ClusterView(candidate=True)))
        self.assertFalse(by_name["ganeti-luxid"].available(ClusterView(candidate=True)))
        self.assertFalse(by_name["ganeti-rapi"].available(ClusterView()))
