"""Ganeti 3.0's own WConfD client protocol on WConfD's socket
(L{ganeti.wconfd.ganeti_front}): JSON + ETX requests as Ganeti's
C{ganeti.wconfd.Client} sends them, through L{WConfdProtocol} on a
StringTransport."""

from __future__ import annotations

import json
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from ganeti import serializer
from ganeti.wconfd.protocol import WConfdProtocol
from tests.unit.wconfd_helpers import make_config, make_service

ETX = b"\x03"


class GanetiFrontTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.service = make_service(make_config(), clock=self.clock)
        self.protocol = WConfdProtocol(self.service)
        self.transport = StringTransport()
        self.protocol.makeConnection(self.transport)

    def call(self, method: str, *args: Any) -> tuple[bool, Any]:
        """Ganeti's client: one request, its answer."""
        self.transport.clear()
        self.protocol.dataReceived(json.dumps({"method": method, "args": list(args), "version": 3000000}).encode()
                                   + ETX)
        self.clock.advance(1)
        value = self.transport.value()
        self.assertTrue(value.endswith(ETX), value)
        answer = json.loads(value[:-1])
        return answer["success"], answer["result"]

    def stored(self) -> Any:
        return serializer.loads(self.service.read_config()[0])

    def test_read_and_shared_lock_answer_the_config(self) -> None:
        self.assertEqual(self.call("readConfig"), (True, self.stored()))
        cid = [None, "/var/run/ganeti/livelocks/bootstrap_failover"]
        self.assertEqual(self.call("lockConfig", cid, True), (True, self.stored()))
        self.assertEqual(self.call("unlockConfig", cid), (True, None))
        self.assertEqual(self.call("dropAllReservations", cid), (True, None))
        self.assertEqual(self.call("verifyConfig"), (True, self.service.config_store.verify()))

    def test_update_cluster_changes_the_master_as_ganeti_failover_does(self) -> None:
        config = self.stored()
        cluster = dict(config["cluster"])
        other = next(uuid for uuid in config["nodes"] if uuid != cluster["master_node"])
        cluster["master_node"] = other
        ok, result = self.call("updateCluster", cluster)
        self.assertTrue(ok, result)
        self.assertEqual(result[0], cluster["serial_no"] + 1)
        self.assertEqual(self.stored()["cluster"]["master_node"], other)
        # the same (now stale) cluster again: refused, nothing changes
        cluster["master_node"] = config["cluster"]["master_node"]
        ok, result = self.call("updateCluster", cluster)
        self.assertFalse(ok)
        self.assertEqual(result[0], "ConfigurationError")
        self.assertIn("was changed since it was read", result[1][0])
        self.assertEqual(self.stored()["cluster"]["master_node"], other)

    def test_other_methods_and_exclusive_locks_are_refused_and_change_nothing(self) -> None:
        before = self.service.read_config()
        ok, result = self.call("writeConfig", [None, "x"], self.stored())
        self.assertEqual((ok, result[0]), (False, "ProgrammerError"))
        self.assertIn("writeConfig with 2 argument(s) is not served here", result[1][0])
        ok, result = self.call("lockConfig", [None, "x"], False)
        self.assertEqual((ok, result[0]), (False, "ConfigurationError"))
        self.assertIn("LockConfig exclusive is not supported", result[1][0])
        ok, result = self.call("updateCluster", "not a cluster")
        self.assertEqual((ok, result[0]), (False, "ConfigurationError"))
        self.assertEqual(self.service.read_config(), before)
        self.assertFalse(self.transport.disconnecting, "the connection stays")

    def test_garbage_after_a_json_start_gets_a_parse_failure(self) -> None:
        self.protocol.dataReceived(b"{not json" + ETX)
        self.clock.advance(1)
        answer = json.loads(self.transport.value()[:-1])
        self.assertEqual(answer["success"], False)
        self.assertIn("Failed to parse request", answer["result"])
