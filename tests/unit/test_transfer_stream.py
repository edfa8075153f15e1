"""Disk transfers' bytes: sealed frames (L{ganeti.noded.stream}) and the two
ends over mutual, pinned TLS (L{ganeti.noded.bulk}), on socket pairs."""

from __future__ import annotations

import io
import os
import socket
import tempfile
import threading
from typing import Any, Callable

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import crypto
from ganeti.noded import bulk, impexp, pipeline, stream
from ganeti.noded.failure import RpcFailure
from ganeti.rpc.tls import Credentials

TOKEN = "ab" * 32
KEY = bytes(range(32))
_CERTS: dict[str, tuple[bytes, bytes]] = {}


def cert(name: str) -> tuple[bytes, bytes]:
    """A self-signed key and certificate, made once per test run."""
    if name not in _CERTS:
        _CERTS[name] = crypto.generate_key_and_cert(name, days=1)
    return _CERTS[name]


def reader_of(data: bytes) -> stream.Reader:
    return stream.Reader(io.BytesIO(data).readinto)


def sealed_stream(data: bytes, compression: str = "none", key: bytes = KEY) -> list[bytes]:
    """The frames a sender writes for C{data} (after the TLS part), each as bytes."""
    sealer = stream.Sealer(key, stream.TO_RECEIVER)
    frames: list[bytes] = []
    compress = stream.Compressor(compression)
    total = stream.write_frames(lambda head, body: frames.append(head + bytes(body)),
                                pipeline.ReadAhead(io.BytesIO(data).readinto, stream.CHUNK), sealer, compress,
                                lambda count: None)
    stream.write_end(lambda head, body: frames.append(head + body), sealer, compress, total)
    return frames


class BytesStore:
    """A receiver's store in memory."""

    def __init__(self) -> None:
        self.got = bytearray()
        self._room = memoryview(bytearray(stream.MAX_FRAME))

    def reserve(self, count: int) -> memoryview:
        return self._room[:count]

    def commit(self, count: int) -> None:
        self.got += self._room[:count]

    def put(self, data: Any) -> None:
        self.got += data


def receive_all(wire: bytes, compression: str = "none") -> bytes:
    store = BytesStore()
    stream.read_frames(reader_of(wire), stream.Opener(KEY, stream.TO_RECEIVER), stream.Decompressor(compression),
                       store)
    return bytes(store.got)


class SealedFrameTests(SynchronousTestCase):
    def test_round_trip_with_and_without_compression(self) -> None:
        data = os.urandom(2 * stream.CHUNK + 12345) + bytes(stream.CHUNK)
        for compression in ("none", "gzip"):
            self.assertEqual(receive_all(b"".join(sealed_stream(data, compression)), compression), data)

    def test_the_data_is_encrypted(self) -> None:
        data = b"secret disk content " * 1000
        self.assertNotIn(b"secret disk content", b"".join(sealed_stream(data)))

    def test_an_altered_byte_is_refused(self) -> None:
        wire = bytearray(b"".join(sealed_stream(os.urandom(1000))))
        wire[stream.HEADER.size + 10] ^= 1
        with self.assertRaises(stream.StreamError) as caught:
            receive_all(bytes(wire))
        self.assertIn("failed authentication", str(caught.exception))

    def test_reordered_dropped_or_replayed_frames_are_refused(self) -> None:
        frames = sealed_stream(os.urandom(3 * stream.CHUNK))  # 3 data frames and the end
        for bad in ([frames[1], frames[0]] + frames[2:],  # reordered
                    [frames[0]] + frames[2:],  # a frame dropped
                    [frames[0], frames[0]] + frames[1:]):  # replayed
            self.assertRaises(stream.StreamError, receive_all, b"".join(bad))

    def test_a_frame_under_another_key_is_refused(self) -> None:
        wire = b"".join(sealed_stream(b"data", key=bytes(32)))
        self.assertRaises(stream.StreamError, receive_all, wire)

    def test_a_cut_stream_is_refused(self) -> None:
        wire = b"".join(sealed_stream(os.urandom(100_000)))
        self.assertRaises(stream.ConnectionEnded, receive_all, wire[:-1])
        frames = sealed_stream(os.urandom(100_000))
        self.assertRaises(stream.ConnectionEnded, receive_all, b"".join(frames[:-1]))  # no end frame

    def test_a_huge_frame_is_refused_before_it_is_read(self) -> None:
        wire = stream.HEADER.pack(stream.DATA, stream.MAX_FRAME + stream.TAG + 1)
        with self.assertRaises(stream.StreamError) as caught:
            receive_all(wire)
        self.assertIn("is not valid", str(caught.exception))

    def test_a_wrong_count_is_refused(self) -> None:
        sealer = stream.Sealer(KEY, stream.TO_RECEIVER)
        wire = b"".join(sealer.seal(stream.DATA, b"abc")) + b"".join(sealer.seal(stream.END, stream.TRAILER.pack(4)))
        with self.assertRaises(stream.StreamError) as caught:
            receive_all(wire)
        self.assertIn("the sender sent 4 bytes, 3 arrived", str(caught.exception))

    def test_frames_of_any_size_are_stored_whole_in_a_file(self) -> None:
        # frames that do not divide the writer's blocks, and a length that is not a multiple of a disk block
        data = os.urandom(2 * pipeline.BLOCK + pipeline.ALIGN + 5)
        sealer = stream.Sealer(KEY, stream.TO_RECEIVER)
        step = 3 * stream.CHUNK + 5
        wire = b"".join(b"".join(sealer.seal(stream.DATA, data[start:start + step]))
                        for start in range(0, len(data), step))
        wire += b"".join(sealer.seal(stream.END, stream.TRAILER.pack(len(data))))
        for compression, sent in (("none", wire), ("gzip", b"".join(sealed_stream(data, "gzip")))):
            path = os.path.join(tempfile.mkdtemp(), "dump")
            sink = stream.FileSink(path)
            try:
                stream.read_frames(reader_of(sent), stream.Opener(KEY, stream.TO_RECEIVER),
                                   stream.Decompressor(compression), sink)
                sink.finish()
            finally:
                sink.close()
            with open(path, "rb") as handle:
                self.assertEqual(handle.read(), data)
            os.unlink(path)
            os.rmdir(os.path.dirname(path))

    def test_unknown_compression(self) -> None:
        self.assertRaises(stream.StreamError, stream.check_compression, "lzop")
        self.assertEqual(stream.check_compression("gzip-fast"), "gzip-fast")


class BytesSource:
    def __init__(self, data: bytes) -> None:
        self._file = io.BytesIO(data)
        self.closed = False

    def start(self) -> None:
        pass

    def readinto(self, view: memoryview) -> int:
        return self._file.readinto(view)

    def finish(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class Peer:
    """One end of a socket pair running C{work(sock)} in a thread."""

    def __init__(self, sock: socket.socket, work: Callable[[socket.socket], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.result = work(sock)
            except BaseException as exc:  # reported to the test
                self.error = exc
            finally:
                sock.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def join(self) -> None:
        self._thread.join(60)
        assert not self._thread.is_alive()


class TransferTests(SynchronousTestCase):
    """Both ends over TLS on a socket pair: the sender in a thread, the receiver here."""

    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "dump")
        self.opened = threading.Event()
        key, crt = cert("cluster")
        self.cluster = Credentials(key, crt, crt)
        self.pinned = frozenset([crypto.fingerprint(crt)])

    def tearDown(self) -> None:
        for name in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, name))
        os.rmdir(self.dir)

    def open_sink(self) -> stream.FileSink:
        sink = stream.FileSink(self.path)
        self.opened.set()
        return sink

    def run_pair(self, data: bytes, *, token: str = TOKEN, sender_creds: Credentials | None = None,
                 receiver_trusts: bytes | None = None, compression: str = "none",
                 cancel: bulk.Cancel | None = None, source: Any = None,
                 open_sink: Callable[[], Any] | None = None) -> tuple[Peer, BaseException | None, int]:
        """Send C{data}; the sender, the receiver's error, and the bytes it stored."""
        ours, theirs = socket.socketpair()
        creds = sender_creds or self.cluster
        send_tls = bulk.tls_context(creds, server=False)
        sender = Peer(theirs, lambda sock: bulk._secured(
            sock, bulk.Cancel(), send_tls, self.pinned, False,
            lambda conn: bulk.send(conn, token, source or BytesSource(data), compression, lambda count: None)))
        server_creds = self.cluster
        if receiver_trusts is not None:
            server_creds = Credentials(self.cluster.key_pem, self.cluster.cert_pem, receiver_trusts)
        recv_tls = bulk.tls_context(server_creds, server=True)
        stored = [0]

        def progress(count: int) -> None:
            stored[0] += count

        error = None
        try:
            bulk._secured(ours, cancel or bulk.Cancel(), recv_tls, self.pinned, True,
                          lambda conn: bulk.receive(conn, TOKEN, open_sink or self.open_sink, compression, progress,
                                                    lambda: True))
        except stream.StreamError as exc:
            error = exc
        sender.join()
        return sender, error, stored[0]

    def test_a_full_disk_fails_the_transfer_and_the_sender_hears_why(self) -> None:
        sender, error, stored = self.run_pair(os.urandom(2 * pipeline.BLOCK + 1),
                                              open_sink=lambda: stream.DiskSink("/dev/full"))
        self.assertIn("cannot write /dev/full: No space left on device", str(error))
        self.assertIn("the receiver refused the data: cannot write /dev/full", str(sender.error))

    def test_a_source_that_cannot_be_read_fails_the_transfer_and_leaves_no_file(self) -> None:
        sender, error, stored = self.run_pair(b"", source=stream.FileSource(self.dir))  # a directory
        self.assertIn("cannot read %s: Is a directory" % self.dir, str(sender.error))
        self.assertIn("ended before all data arrived", str(error))
        self.assertTrue(self.opened.is_set())
        self.assertFalse(os.path.exists(self.path))

    def test_the_data_arrives_and_the_sender_hears_ok(self) -> None:
        data = os.urandom(3 * stream.CHUNK + 777)
        for compression in ("none", "gzip"):
            sender, error, stored = self.run_pair(data, compression=compression)
            self.assertIsNone(error)
            self.assertIsNone(sender.error)
            self.assertEqual(sender.result, len(data))
            self.assertEqual(stored, len(data))
            with open(self.path, "rb") as handle:
                self.assertEqual(handle.read(), data)
            os.unlink(self.path)

    def test_a_wrong_token_stores_nothing(self) -> None:
        sender, error, stored = self.run_pair(b"data", token="cd" * 32)
        self.assertIn("wrong token", str(error))
        self.assertIn("the receiver refused the data: the sender presented a wrong token", str(sender.error))
        self.assertFalse(self.opened.is_set())
        self.assertFalse(os.path.exists(self.path))

    def test_a_sender_without_the_cluster_certificate_is_refused(self) -> None:
        key, crt = cert("stranger")
        sender, error, stored = self.run_pair(b"data", sender_creds=Credentials(key, crt, self.cluster.ca_pem))
        self.assertIn("TLS handshake failed", str(error))
        self.assertIsNotNone(sender.error)
        self.assertFalse(self.opened.is_set())
        self.assertFalse(os.path.exists(self.path))

    def test_a_trusted_but_unpinned_certificate_is_refused(self) -> None:
        # the receiver's trust store has the stranger's certificate too: the pin alone refuses it
        key, crt = cert("stranger")
        sender, error, stored = self.run_pair(b"data", sender_creds=Credentials(key, crt, self.cluster.ca_pem),
                                              receiver_trusts=self.cluster.ca_pem + crt)
        self.assertIn("is not the expected one", str(error))
        self.assertIsNotNone(sender.error)
        self.assertFalse(self.opened.is_set())
        self.assertFalse(os.path.exists(self.path))

    def test_a_cut_connection_leaves_no_file(self) -> None:
        ours, theirs = socket.socketpair()
        tls = bulk.tls_context(self.cluster, server=False)

        def cut_sender(sock: socket.socket) -> None:
            conn = tls.wrap_socket(sock)
            conn.sendall(TOKEN.encode() + b"\n")
            key = bytes.fromhex(stream.Reader(conn.recv_into).line(200)[3:].decode())
            sealer = stream.Sealer(key, stream.TO_RECEIVER)
            socket.socket.sendall(conn, b"".join(sealer.seal(stream.DATA, b"x" * 1000)))
            conn.close()  # no end frame

        sender = Peer(theirs, cut_sender)
        with self.assertRaises(stream.StreamError) as caught:
            bulk._secured(ours, bulk.Cancel(), bulk.tls_context(self.cluster, server=True), self.pinned, True,
                          lambda conn: bulk.receive(conn, TOKEN, self.open_sink, "none", lambda n: None,
                                                    lambda: True))
        sender.join()
        self.assertIn("ended before all data arrived", str(caught.exception))
        self.assertTrue(self.opened.is_set())
        self.assertFalse(os.path.exists(self.path))

    def test_cancel_wakes_a_blocked_receiver_and_removes_the_file(self) -> None:
        ours, theirs = socket.socketpair()
        tls = bulk.tls_context(self.cluster, server=False)
        done = threading.Event()

        def stalled_sender(sock: socket.socket) -> None:
            conn = tls.wrap_socket(sock)
            conn.sendall(TOKEN.encode() + b"\n")
            stream.Reader(conn.recv_into).line(200)
            done.wait(60)  # sends nothing more until the test ends

        sender = Peer(theirs, stalled_sender)
        cancel = bulk.Cancel()
        errors: list[BaseException] = []

        def receiver() -> None:
            try:
                bulk._secured(ours, cancel, bulk.tls_context(self.cluster, server=True), self.pinned, True,
                              lambda conn: bulk.receive(conn, TOKEN, self.open_sink, "none", lambda n: None,
                                                        lambda: True))
            except stream.StreamError as exc:
                errors.append(exc)

        thread = threading.Thread(target=receiver, daemon=True)
        thread.start()
        self.assertTrue(self.opened.wait(60))
        cancel.cancel()
        thread.join(60)
        done.set()
        sender.join()
        self.assertFalse(thread.is_alive())
        self.assertEqual(len(errors), 1)
        self.assertFalse(os.path.exists(self.path))
        with socket.socket() as late:
            self.assertRaises(stream.StreamError, cancel.watch, late)  # nothing new starts


class LeaseTests(SynchronousTestCase):
    def test_an_abandoned_transfer_is_aborted(self) -> None:
        clock = Clock()
        procs = impexp.ImpExpProcedures(None, clock, None)
        transfer = procs._new("import", "test")
        removed: list[bool] = []
        transfer.on_abort(lambda: removed.append(True))
        clock.advance(impexp.LEASE - 1)
        procs.impexp_status([transfer.id])  # a status request renews the lease
        clock.advance(impexp.LEASE - 1)
        self.assertEqual(removed, [])
        clock.advance(2)
        self.assertEqual(removed, [True])
        self.assertIn("abandoned", transfer.status()["error"])

    def test_a_status_request_can_wait_for_the_end(self) -> None:
        clock = Clock()
        procs = impexp.ImpExpProcedures(None, clock, None)
        transfer = procs._new("import", "test")
        answered: list[Any] = []
        procs.impexp_status([transfer.id], 5.0).addCallback(answered.append)
        clock.advance(1)
        self.assertEqual(answered, [])  # not done: the answer waits
        transfer.succeed()
        self.assertEqual([status["success"] for status in answered[0]], [True])  # at once when it ends
        self.assertEqual(len(answered), 1)

    def test_a_waiting_status_request_is_answered_after_its_wait(self) -> None:
        clock = Clock()
        procs = impexp.ImpExpProcedures(None, clock, None)
        transfer = procs._new("import", "test")
        answered: list[Any] = []
        procs.impexp_status([transfer.id], 2.0).addCallback(answered.append)
        clock.advance(2)
        self.assertEqual([status["done"] for status in answered[0]], [False])
        transfer.fail("later")  # a late end answers nothing twice
        self.assertEqual(len(answered), 1)
        self.assertRaises(RpcFailure, procs.impexp_status, [transfer.id], -1)
