"""The disk transfer wire format and protocols (L{ganeti.noded.stream},
L{ganeti.noded.impexp}) and Ganeti's config.ini (L{ganeti.cmdlib.backup})."""

from __future__ import annotations

import os
import tempfile

from twisted.internet.error import ConnectionLost
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors
from ganeti.cmdlib import backup
from ganeti.noded import impexp, stream
from tests.unit.wconfd_helpers import first_instance, make_config

TOKEN = "ab" * 32


def encode(data: bytes, compression: str = "none", piece: int = 1000) -> bytes:
    """What a sender writes after its token line."""
    comp = stream.Compressor(compression)
    out = b""
    for start in range(0, len(data), piece):
        chunk = comp.feed(data[start:start + piece])
        if chunk:
            out += stream.frame(chunk)
    tail = comp.flush()
    if tail:
        out += stream.frame(tail)
    return out + stream.end_frame(len(data))


class FrameParserTests(SynchronousTestCase):
    def test_frames_split_anywhere(self) -> None:
        wire = stream.frame(b"hello") + stream.frame(b"world") + stream.end_frame(10)
        for cut in range(len(wire) + 1):
            parser = stream.FrameParser()
            got = parser.feed(wire[:cut]) + parser.feed(wire[cut:])
            self.assertEqual(b"".join(got), b"helloworld")
            self.assertTrue(parser.ended)
            self.assertEqual(parser.total, 10)

    def test_garbage_is_refused(self) -> None:
        parser = stream.FrameParser()
        self.assertRaises(stream.StreamError, parser.feed, stream.FRAME.pack(stream.MAX_FRAME + 1))
        parser = stream.FrameParser()
        self.assertRaises(stream.StreamError, parser.feed, stream.end_frame(0) + b"x")

    def test_unknown_compression(self) -> None:
        self.assertRaises(stream.StreamError, stream.check_compression, "lzop")
        self.assertEqual(stream.check_compression("gzip-fast"), "gzip-fast")


class ReceiveTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.addCleanup(lambda: [os.unlink(os.path.join(self.dir, f)) for f in os.listdir(self.dir)])
        self.path = os.path.join(self.dir, "dump")
        self.clock = Clock()

    def receiver(self, compression: str = "none") -> tuple[impexp.ReceiveProtocol, StringTransport, impexp.Transfer]:
        transfer = impexp.Transfer("t1", "import", self.clock, "test")
        proto = impexp.ReceiveProtocol(transfer, TOKEN, lambda: stream.FileSink(self.path), compression)
        transport = StringTransport()
        proto.makeConnection(transport)
        return proto, transport, transfer

    def test_a_complete_stream_is_stored(self) -> None:
        data = os.urandom(300_000)
        for compression in ("none", "gzip"):
            proto, transport, transfer = self.receiver(compression)
            wire = TOKEN.encode() + b"\n" + encode(data, compression, 70_000)
            for start in range(0, len(wire), 4096):
                proto.dataReceived(wire[start:start + 4096])
            self.assertEqual(transport.value(), b"OK\n")
            self.assertTrue(transfer.status()["success"])
            self.assertEqual(transfer.bytes, len(data))
            with open(self.path, "rb") as handle:
                self.assertEqual(handle.read(), data)
            os.unlink(self.path)

    def test_a_cut_stream_leaves_no_file(self) -> None:
        proto, transport, transfer = self.receiver()
        proto.dataReceived(TOKEN.encode() + b"\n" + encode(b"x" * 100_000)[:50_000])
        self.assertTrue(os.path.exists(self.path))
        proto.connectionLost(Failure(ConnectionLost()))
        status = transfer.status()
        self.assertEqual((status["done"], status["success"]), (True, False))
        self.assertIn("ended before all data arrived", status["error"])
        self.assertFalse(os.path.exists(self.path))

    def test_a_wrong_token_writes_nothing(self) -> None:
        proto, transport, transfer = self.receiver()
        proto.dataReceived(b"cd" * 32 + b"\n" + encode(b"data"))
        self.assertTrue(transport.value().startswith(b"ER the sender presented a wrong token"))
        self.assertFalse(transfer.status()["success"])
        self.assertFalse(os.path.exists(self.path))

    def test_a_short_stream_is_refused(self) -> None:
        proto, transport, transfer = self.receiver()
        wire = stream.frame(b"abc") + stream.end_frame(4)
        proto.dataReceived(TOKEN.encode() + b"\n" + wire)
        self.assertIn(b"the sender sent 4 bytes, 3 arrived", transport.value())
        self.assertFalse(os.path.exists(self.path))

    def test_an_abandoned_transfer_is_aborted(self) -> None:
        procs = impexp.ImpExpProcedures(None, self.clock, None)
        transfer = procs._new("import", "test")
        removed: list[bool] = []
        transfer.on_abort(lambda: removed.append(True))
        self.clock.advance(impexp.LEASE - 1)
        procs.impexp_status([transfer.id])  # a status request renews the lease
        self.clock.advance(impexp.LEASE - 1)
        self.assertEqual(removed, [])
        self.clock.advance(2)
        self.assertEqual(removed, [True])
        self.assertIn("abandoned", transfer.status()["error"])


class SendTests(SynchronousTestCase):
    def test_sender_frames_and_waits_for_the_answer(self) -> None:
        path = tempfile.mktemp()
        data = os.urandom(3 * stream.CHUNK + 5)
        with open(path, "wb") as handle:
            handle.write(data)
        self.addCleanup(os.unlink, path)
        for compression in ("none", "gzip"):
            clock = Clock()
            transfer = impexp.Transfer("t2", "export", clock, "test")
            proto = impexp.SendProtocol(transfer, TOKEN, stream.FileSource(path, clock), compression)
            transport = StringTransport()
            proto.makeConnection(transport)
            for _ in range(10):
                clock.advance(0)
            self.assertIsNone(transport.producer)
            head, _, body = transport.value().partition(b"\n")
            self.assertEqual(head, TOKEN.encode())
            parser = stream.FrameParser()
            decompress = stream.Decompressor(compression)
            self.assertEqual(b"".join(decompress.feed(piece) for piece in parser.feed(body)) + decompress.flush(),
                             data)
            self.assertEqual(parser.total, len(data))
            self.assertFalse(transfer.done)  # not before the receiver confirms
            proto.dataReceived(b"OK\n")
            self.assertTrue(transfer.status()["success"])

    def test_a_chunk_that_compresses_to_nothing_does_not_stall(self) -> None:
        path = tempfile.mktemp()
        with open(path, "wb") as handle:
            handle.write(bytes(4 * stream.CHUNK))  # zeros: gzip keeps whole chunks to itself
        self.addCleanup(os.unlink, path)
        clock = Clock()
        transfer = impexp.Transfer("t3", "export", clock, "test")
        proto = impexp.SendProtocol(transfer, TOKEN, stream.FileSource(path, clock), "gzip")
        transport = StringTransport()
        proto.makeConnection(transport)
        for _ in range(10):  # nothing drains a StringTransport: the source goes on by itself
            clock.advance(0)
        self.assertEqual(transfer.bytes, 4 * stream.CHUNK)
        self.assertIsNone(transport.producer)

    def test_pausing_stops_reading(self) -> None:
        path = tempfile.mktemp()
        with open(path, "wb") as handle:
            handle.write(bytes(3 * stream.CHUNK))
        self.addCleanup(os.unlink, path)
        clock = Clock()
        got: list[bytes] = []
        source = stream.FileSource(path, clock)
        source.start(StringTransport(), got.append, lambda failure: None)
        source.pauseProducing()
        clock.advance(0)
        self.assertEqual(got, [])
        source.resumeProducing()
        clock.advance(0)
        self.assertEqual([len(chunk) for chunk in got], [stream.CHUNK] * 3)


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


class PipeReaderTests(SynchronousTestCase):
    def test_pause_and_resume_and_the_end(self) -> None:
        from twisted.internet.testing import MemoryReactor

        read_fd, write_fd = os.pipe()
        reactor = MemoryReactor()
        got: list[bytes] = []
        ended: list[Failure] = []
        reader = stream.PipeReader(reactor, read_fd, got.append, ended.append)
        reader.startReading()
        self.assertIn(reader, reactor.getReaders())
        reader.pauseProducing()
        self.assertNotIn(reader, reactor.getReaders())
        reader.resumeProducing()  # a paused export script's output is read again
        self.assertIn(reader, reactor.getReaders())
        os.write(write_fd, b"x" * 5000)
        self.assertIsNone(reader.doRead())
        self.assertEqual(got, [b"x" * 5000])
        os.close(write_fd)
        why = reader.doRead()
        reader.connectionLost(Failure(why))
        self.assertEqual(len(ended), 1)
        self.assertEqual(reader.fd, -1)


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

