"""The confd packet codec: known-answer vectors, round trips, bad input."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from ganeti.confd import wire

#: hmac.key as stored: 40 hex digits and a newline (the newline is part of the key)
KEY = b"0123456789abcdef0123456789abcdef01234567\n"
RSALT = "00000000-0000-0000-0000-000000000001"

# Vectors computed outside Python with
#   printf '%s\n' "$salt$msg_without_newline" | openssl dgst -sha1 -mac HMAC -macopt hexkey:<hex of KEY>
REQUEST_MSG = '{"protocol": 1, "type": 3, "rsalt": "00000000-0000-0000-0000-000000000001"}\n'
REQUEST_HMAC = "1af54aa2d82ea556f823af3049bff39ae6fd417b"
REQUEST_PACKET = (
    b'plj0{"msg": "{\\"protocol\\": 1, \\"type\\": 3, \\"rsalt\\": '
    b'\\"00000000-0000-0000-0000-000000000001\\"}\\n", "salt": "1700000000", '
    b'"hmac": "1af54aa2d82ea556f823af3049bff39ae6fd417b"}\n'
)
REPLY_MSG = '{"protocol":1,"status":0,"answer":"node1.example.com","serial":7}'
REPLY_HMAC = "0b1444f34710cf1e2f0106d96cfd3465ea78ea0b"
REPLY_PACKET = (
    b'plj0{"msg":"{\\"protocol\\":1,\\"status\\":0,\\"answer\\":\\"node1.example.com\\",\\"serial\\":7}",'
    b'"salt":"00000000-0000-0000-0000-000000000001","hmac":"0b1444f34710cf1e2f0106d96cfd3465ea78ea0b"}'
)


class KnownAnswerTests(SynchronousTestCase):
    def test_mac(self) -> None:
        """The HMAC is SHA1 over salt + msg with the key including its newline."""
        self.assertEqual(wire.mac(KEY, "1700000000", REQUEST_MSG), REQUEST_HMAC)
        self.assertEqual(wire.mac(KEY, RSALT, REPLY_MSG), REPLY_HMAC)
        self.assertNotEqual(wire.mac(KEY.strip(), "1700000000", REQUEST_MSG), REQUEST_HMAC)

    def test_request_bytes(self) -> None:
        """A request packs exactly as Ganeti's DumpSignedJson + PackMagic does."""
        packet = wire.pack_request(KEY, wire.request(wire.REQ_CLUSTER_MASTER, None, RSALT), 1700000000.9)
        self.assertEqual(packet, REQUEST_PACKET)

    def test_request_is_python_json(self) -> None:
        """The envelope is json.dumps of msg, salt, hmac plus a newline."""
        envelope = {"msg": REQUEST_MSG, "salt": "1700000000", "hmac": REQUEST_HMAC}
        self.assertEqual(REQUEST_PACKET, b"plj0" + (json.dumps(envelope) + "\n").encode())

    def test_reply_bytes(self) -> None:
        """A reply packs compactly, signed with the request's rsalt."""
        msg = wire.encode_reply_msg(wire.reply(0, "node1.example.com", 7))
        self.assertEqual(msg, REPLY_MSG)
        self.assertEqual(wire.pack_reply(KEY, msg, RSALT), REPLY_PACKET)

    def test_decode_vectors(self) -> None:
        req = wire.unpack_request(KEY, REQUEST_PACKET, 1700000100)
        self.assertEqual(req, {"protocol": 1, "type": 3, "rsalt": RSALT})
        rep, salt = wire.unpack_reply(KEY, REPLY_PACKET)
        self.assertEqual((rep, salt), ({"protocol": 1, "status": 0, "answer": "node1.example.com", "serial": 7}, RSALT))

    def test_uppercase_digest_accepted(self) -> None:
        packet = REPLY_PACKET.replace(REPLY_HMAC.encode(), REPLY_HMAC.upper().encode())
        self.assertEqual(wire.unpack_reply(KEY, packet)[1], RSALT)


class BadInputTests(SynchronousTestCase):
    def assertBad(self, packet: bytes, now: float = 1700000000) -> None:
        self.assertRaises(wire.BadPacket, wire.unpack_request, KEY, packet, now)

    def test_no_magic(self) -> None:
        self.assertBad(REQUEST_PACKET[4:])
        self.assertBad(b"")

    def test_wrong_key(self) -> None:
        packet = wire.pack_request(b"other\n", wire.request(0, None, "x"), 1700000000)
        self.assertBad(packet)

    def test_tampered(self) -> None:
        self.assertBad(REQUEST_PACKET.replace(b'\\"type\\": 3', b'\\"type\\": 4'))

    def test_unsigned(self) -> None:
        self.assertBad(b'plj0{"msg": "{}", "salt": "1700000000"}')
        self.assertBad(b'plj0{"protocol": 1, "type": 0, "rsalt": "x"}')

    def test_not_json(self) -> None:
        self.assertBad(b"plj0{not json")
        self.assertBad(b"plj0[1, 2]")
        self.assertBad(b'plj0{"msg": 1, "salt": 2, "hmac": 3}')
        self.assertBad(b"plj0\xff\xfe")

    def test_signed_garbage_message(self) -> None:
        for msg in ["not json", "[]", '{"type": "1", "rsalt": "x"}', '{"type": 1}', '{"type": 1, "rsalt": 5}']:
            packet = wire.sign_compact(KEY, msg, "1700000000")
            self.assertBad(packet)

    def test_oversized(self) -> None:
        big = wire.sign_python(KEY, wire.request(1, "n" * 5000, "x"), "1700000000")
        self.assertBad(big)

    def test_replay_window(self) -> None:
        """Requests older or newer than 300 s are refused; at 300 s they pass."""
        self.assertEqual(wire.unpack_request(KEY, REQUEST_PACKET, 1700000300)["type"], 3)
        self.assertEqual(wire.unpack_request(KEY, REQUEST_PACKET, 1699999700)["type"], 3)
        self.assertBad(REQUEST_PACKET, 1700000301)
        self.assertBad(REQUEST_PACKET, 1699999699)

    def test_bad_timestamp_salt(self) -> None:
        for salt in ["", "abc", "1700000000.5", "9" * 30]:
            packet = wire.sign_python(KEY, wire.request(0, None, "x"), salt)
            self.assertBad(packet)

    def test_bad_reply(self) -> None:
        self.assertRaises(wire.BadPacket, wire.unpack_reply, KEY, wire.sign_compact(KEY, '{"status": 0}', "s"))
        self.assertRaises(wire.BadPacket, wire.unpack_reply, KEY, wire.sign_compact(KEY, '{"status":0,"answer":1,"serial":"x"}', "s"))

    @given(st.binary(max_size=600))
    def test_fuzz_never_crashes(self, data: bytes) -> None:
        for packet in (data, b"plj0" + data):
            try:
                wire.unpack_request(KEY, packet, 1700000000)
            except wire.BadPacket:
                pass


class RoundTripTests(SynchronousTestCase):
    queries = st.one_of(
        st.none(),
        st.text(max_size=40),
        st.dictionaries(st.sampled_from(["0", "1", "2", "3"]), st.one_of(st.text(max_size=10), st.lists(st.integers(0, 2)))),
    )

    @given(st.integers(0, 11), queries, st.text(min_size=1, max_size=40))
    def test_request(self, qtype: int, query: object, rsalt: str) -> None:
        req = wire.request(qtype, query, rsalt)
        self.assertEqual(wire.unpack_request(KEY, wire.pack_request(KEY, req, 1700000000), 1700000000), req)

    @given(st.integers(0, 2), st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.text(), st.lists(st.text())), st.integers(0, 2**40), st.text())
    def test_reply(self, status: int, answer: object, serial: int, rsalt: str) -> None:
        msg = wire.encode_reply_msg(wire.reply(status, answer, serial))
        self.assertEqual(wire.unpack_reply(KEY, wire.pack_reply(KEY, msg, rsalt)), (wire.reply(status, answer, serial), rsalt))
