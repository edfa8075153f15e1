"""Ganeti's config.ini of exports (L{ganeti.cmdlib.backup}); the transfers'
wire format is tested in test_transfer_stream."""

from __future__ import annotations

import os
import tempfile

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors
from ganeti.cmdlib import backup
from ganeti.noded import impexp
from tests.unit.wconfd_helpers import first_instance, make_config

GANETI_CONFIG_INI = """[export]
version = 0
timestamp = 1732400000
source = node1.example.com
os = debootstrap+default
compression = none

[instance]
name = inst1.example.com
maxmem = 512
minmem = 256
memory = 512
vcpus = 2
disk_template = file
hypervisor = kvm
tags = web prod
nic0_mac = aa:00:00:11:22:33
nic0_ip = None
nic0_network = None
nic0_name = None
nic0_mode = bridged
nic0_link = br0
nic0_vlan = 
nic_count = 1
disk0_ivname = disk/0
disk0_dump = 9f6c1c2e-aaaa-bbbb-cccc-000000000001
disk0_size = 1024
disk0_name = None
disk_count = 1

[hypervisor]
kernel_path = 
serial_console = True

[backend]
maxmem = 512
minmem = 256
vcpus = 2
always_failover = False

[os]
dhcp = yes

[os_private]

"""


class ConfigIniTests(SynchronousTestCase):
    def test_ours_reads_back(self) -> None:
        cfg = make_config()
        inst = first_instance(cfg)
        disks = [cfg.disks[u] for u in inst.disks]
        text = backup.export_config(cfg, inst, disks, now=1000)
        info = backup.parse_export(text, inst.name, "node-uuid")
        self.assertEqual(info.dumps, [d.uuid for d in disks])
        self.assertEqual([d["size"] for d in info.disks], [d.size for d in disks])
        self.assertEqual(info.os, inst.os)
        self.assertIn("timestamp = 1000", text)
        self.assertIn("[os_private]", text)

    def test_ganeti_export_reads(self) -> None:
        info = backup.parse_export(GANETI_CONFIG_INI, "inst1.example.com", "n1")
        self.assertEqual((info.os, info.disk_template, info.hypervisor), ("debootstrap+default", "file", "kvm"))
        self.assertEqual(info.disks, [{"size": 1024, "mode": "rw"}])
        self.assertEqual(info.dumps, ["9f6c1c2e-aaaa-bbbb-cccc-000000000001"])
        self.assertEqual(info.nics, [{"mac": "aa:00:00:11:22:33", "mode": "bridged", "link": "br0"}])
        self.assertEqual(info.tags, ["web", "prod"])
        self.assertEqual(info.beparams["always_failover"], "False")

    def test_bad_exports_are_refused(self) -> None:
        for text, why in ((GANETI_CONFIG_INI.replace("version = 0", "version = 1"), "Wrong export version"),
                          ("[instance]\nname = x\n", "doesn't have the required fields"),
                          (GANETI_CONFIG_INI.replace("compression = none", "compression = gzip"), "compressed"),
                          (GANETI_CONFIG_INI.replace("disk0_dump", "disk0_dmp"), "disk 0 has no dump")):
            with self.assertRaises(errors.OpPrereqError) as caught:
                backup.parse_export(text, "x", "n1")
            self.assertIn(why, str(caught.exception))


class RemoteImportExportTests(SynchronousTestCase):
    CDS = "domain-secret-of-both-clusters"

    def test_handshake_and_key_name(self) -> None:
        from ganeti.cmdlib import rie

        rie.check_handshake(self.CDS, rie.handshake(self.CDS))
        with self.assertRaises(errors.OpPrereqError) as caught:
            rie.check_handshake("another secret", rie.handshake(self.CDS))
        self.assertIn("don't share the same domain secret", str(caught.exception))
        self.assertEqual(rie.check_key_name(self.CDS, rie.key_name(self.CDS, "x509-ab")), "x509-ab")
        name, digest, salt = rie.key_name(self.CDS, "x509-ab")
        self.assertRaises(errors.OpPrereqError, rie.check_key_name, self.CDS, ["x509-other", digest, salt])

    def test_signed_certificates(self) -> None:
        from ganeti import crypto
        from ganeti.cmdlib import rie

        _key, cert = crypto.generate_key_and_cert("x509-test")
        signed = rie.sign_cert(self.CDS, cert)
        self.assertTrue(signed.startswith("X-Ganeti-Signature: "))
        self.assertEqual(rie.load_signed_cert(self.CDS, signed), cert.decode("ascii"))
        for bad, why in ((rie.sign_cert("another secret", cert), "signature is invalid"),
                         (cert.decode("ascii"), "signature is missing")):
            with self.assertRaises(errors.OpPrereqError) as caught:
                rie.load_signed_cert(self.CDS, bad)
            self.assertIn(why, str(caught.exception))

    def test_disk_info(self) -> None:
        from ganeti.cmdlib import rie

        info = rie.disk_info(self.CDS, "salt1", 1, "192.0.2.7", 40000, "ab" * 8)
        self.assertEqual(rie.check_disk_info(self.CDS, 1, info), ("192.0.2.7", 40000, "ab" * 8))
        self.assertRaises(errors.OpPrereqError, rie.check_disk_info, self.CDS, 0, info)  # another disk's
        tampered = list(info)
        tampered[1] = 40001
        self.assertRaises(errors.OpPrereqError, rie.check_disk_info, self.CDS, 1, tampered)


class ExportLeaseTests(SynchronousTestCase):
    def test_an_abandoned_export_directory_is_removed(self) -> None:
        from ganeti.paths import Paths

        root = tempfile.mkdtemp()
        clock = Clock()
        procs = impexp.ImpExpProcedures(Paths(root), clock, None)
        procs.export_start("web1")
        new = os.path.join(procs.paths.export_dir, "web1.new")
        self.assertTrue(os.path.isdir(new))
        transfer = procs._new("import", "into %s/dump0" % new)
        other = procs._new("import", "into /elsewhere/dump0")
        clock.advance(impexp.LEASE - 1)
        procs.impexp_status([transfer.id])  # the job still asks: the export stays
        clock.advance(impexp.LEASE - 1)
        self.assertTrue(os.path.isdir(new))
        procs.impexp_status([other.id])  # another job asking does not keep it
        clock.advance(2)  # the job died (killed): nothing asks any more
        self.assertFalse(os.path.exists(new))
        self.assertIn("abandoned", transfer.status()["error"])

    def test_a_finalized_export_stays(self) -> None:
        from ganeti.paths import Paths

        root = tempfile.mkdtemp()
        clock = Clock()
        procs = impexp.ImpExpProcedures(Paths(root), clock, None)
        procs.export_start("web1")
        procs.export_finalize("web1", "[export]\nversion = 0\n[instance]\nname = web1\n")
        clock.advance(impexp.LEASE * 2)
        self.assertEqual(procs.export_list(), ["web1"])
        self.assertEqual(clock.getDelayedCalls(), [])

