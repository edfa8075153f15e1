"""NodeD's node_crypto_tokens, node_copy_file and node_run_command handlers
(L{ganeti.noded.crypto_tokens}, L{ganeti.noded.commands}): answers, refusals,
the commands.log they write."""

from __future__ import annotations

import hashlib
import os
import signal
from typing import Any

import pytest
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from ganeti import crypto
from ganeti.noded import commands, crypto_tokens
from ganeti.noded.failure import RpcFailure
from ganeti.rpc import wire


def log_lines(root) -> list[dict[str, Any]]:
    with open(commands.log_path(root)) as handle:
        return [record for record in map(commands.parse_record, handle) if record is not None]


# --- node_crypto_tokens --------------------------------------------------------------------


@pytest.fixture
def keyed(root):
    crypto.bootstrap_secrets(root, "cluster.test", node_name="node1.test")
    return root


def test_get_tells_the_client_certificate_digest(keyed):
    tokens = crypto_tokens.CryptoTokenProcedures(keyed)
    assert tokens.node_crypto_tokens([["ssl", "get", {}]]) == [["ssl", crypto.cluster_cert_digest(keyed)]]
    assert tokens.node_crypto_tokens([["ssl", "get", None]]) == [["ssl", crypto.cluster_cert_digest(keyed)]]


def test_create_issues_a_new_client_certificate_signed_by_the_cluster(keyed):
    tokens = crypto_tokens.CryptoTokenProcedures(keyed)
    old = crypto.cluster_cert_digest(keyed)
    ((kind, digest),) = tokens.node_crypto_tokens([["ssl", "create", {}]])
    assert kind == "ssl" and digest != old and digest == crypto.cluster_cert_digest(keyed)
    _key, cert = crypto.load_pem_file(keyed.client_pem)
    _key, ca = crypto.load_pem_file(keyed.server_pem)
    assert crypto.is_issued_by(cert, ca)


@pytest.mark.parametrize("requests, message", [
    ([], "non-empty list"),
    ([["ssh", "get", {}]], "Token type 'ssh' not supported."),
    ([["ssl", "delete", {}]], "Action 'delete' is not supported."),
    ([["ssl", "get"]], "[type, action, options]"),
    ([["ssl", "get", {"filename": "/etc/shadow"}]], "options are not supported"),
    ([["ssl", "get", {}]] * 9, "at most 8"),
])
def test_bad_token_requests_are_refused(keyed, requests, message):
    before = crypto.cluster_cert_digest(keyed)
    with pytest.raises(RpcFailure, match=None) as caught:
        crypto_tokens.CryptoTokenProcedures(keyed).node_crypto_tokens(requests)
    assert message in str(caught.value)
    assert crypto.cluster_cert_digest(keyed) == before


def test_without_a_client_certificate_the_cluster_certificate_is_told(keyed):
    os.unlink(keyed.client_pem)
    tokens = crypto_tokens.CryptoTokenProcedures(keyed)
    server = crypto.fingerprint(crypto.load_pem_file(keyed.server_pem)[1])
    assert tokens.node_crypto_tokens([["ssl", "get", {}]]) == [["ssl", server]]


def test_no_certificate_at_all_is_a_failure(root):
    with pytest.raises(RpcFailure, match="client certificate"):
        crypto_tokens.CryptoTokenProcedures(root).node_crypto_tokens([["ssl", "get", {}]])


# --- node_copy_file ------------------------------------------------------------------------


def copy(root, path: str, data: bytes, mode: int = 0o644, digest: str | None = None, user: str = "root") -> Any:
    handler = commands.CommandProcedures(root, Clock())
    return handler.node_copy_file(path, wire.compress(data), mode, digest or hashlib.sha256(data).hexdigest(), user)


def test_copy_writes_the_file_under_the_root_and_logs_it(root):
    os.makedirs(os.path.join(root.root, "etc", "app"))
    data = b"setting = 1\n" * 1000
    answer = copy(root, "/etc/app/app.conf", data, 0o600, user="admin")
    target = os.path.join(root.root, "etc", "app", "app.conf")
    assert answer == {"path": "/etc/app/app.conf", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    with open(target, "rb") as handle:
        assert handle.read() == data
    assert os.stat(target).st_mode & 0o7777 == 0o600
    (line,) = log_lines(root)
    assert line == {
        "level": "INFO", "action": "copyfile", "user": "admin", "path": "/etc/app/app.conf", "size": len(data),
        "mode": "0600", "sha256": hashlib.sha256(data).hexdigest()}
    with open(commands.log_path(root)) as handle:
        text = handle.read()
    assert " ganeti-noded pid=%d INFO gnt-cluster copyfile by admin: {\"path\": \"/etc/app/app.conf\"" % os.getpid() \
        in text


@pytest.mark.parametrize("path, kwargs, message", [
    ("etc/app.conf", {}, "must be an absolute path"),
    ("/etc/../../app.conf", {}, "must not contain '..'"),
    ("/nowhere/app.conf", {}, "does not exist on this node"),
    ("/etc", {}, "is a directory"),
    ("/etc/app.conf", {"digest": "0" * 64}, "SHA-256"),
    ("/etc/app.conf", {"mode": 0o17777}, "mode must be"),
])
def test_bad_copies_are_refused_logged_and_write_nothing(root, path, kwargs, message):
    os.makedirs(os.path.join(root.root, "etc"), exist_ok=True)
    with pytest.raises(RpcFailure) as caught:
        copy(root, path, b"data", **kwargs)
    assert message in str(caught.value)
    assert not os.path.exists(os.path.join(root.root, "etc", "app.conf"))
    (line,) = log_lines(root)
    assert (line["level"], line["action"]) == ("WARNING", "copyfile") and message in line["refused"]


def test_too_big_a_file_is_refused(root, monkeypatch):
    monkeypatch.setattr(commands, "MAX_FILE_SIZE", 10)
    os.makedirs(os.path.join(root.root, "etc"))
    with pytest.raises(RpcFailure, match="larger than 10 bytes"):
        copy(root, "/etc/big", b"x" * 11)


# --- node_run_command ----------------------------------------------------------------------


class FakeProcessReactor(Clock):
    """A clock that records spawnProcess and lets the test play the process."""

    def __init__(self) -> None:
        super().__init__()
        self.spawned: list[tuple[Any, list[str], dict[str, str]]] = []
        self.killed: list[tuple[int, int]] = []

    def spawnProcess(self, protocol, executable, args, env=None, path=None):  # noqa: N802 (Twisted's name)
        class Transport:
            pid = 4242

            def closeStdin(self) -> None:
                pass

        protocol.makeConnection(Transport())
        self.spawned.append((protocol, list(args), dict(env or {})))
        return Transport()


def run(root, reactor, command, timeout=10.0, max_output=1024, user="root") -> Deferred:
    handler = commands.CommandProcedures(root, reactor)
    return ensureDeferred(handler.node_run_command(command, timeout, max_output, user))


def test_command_output_and_exit_code_are_answered_and_logged(root):
    reactor = FakeProcessReactor()
    answer = run(root, reactor, ["/bin/sh", "-c", "echo hi; exit 3"], max_output=5)
    protocol, argv, env = reactor.spawned[0]
    assert argv == [commands.SETSID, "/bin/sh", "-c", "echo hi; exit 3"]
    assert env["PATH"].startswith("/usr/local/sbin")
    protocol.outReceived(b"hello ")
    protocol.errReceived(b"world\n")
    protocol.processEnded(Failure(ProcessTerminated(exitCode=3)))
    result = answer.result
    assert result == {"exit_code": 3, "output": "hello", "truncated": True, "timed_out": False}
    (line,) = log_lines(root)
    assert line["action"] == "command" and line["argv"] == ["/bin/sh", "-c", "echo hi; exit 3"]
    assert (line["exit_code"], line["output_bytes"], line["truncated"], line["timed_out"]) == (3, 12, True, False)


def test_a_command_past_its_timeout_has_its_session_killed(root, monkeypatch):
    reactor = FakeProcessReactor()
    killed = []
    monkeypatch.setattr(os, "killpg", lambda pgid, sig: killed.append((pgid, sig)))
    answer = run(root, reactor, ["/bin/sleep", "100"], timeout=2)
    reactor.advance(2)
    assert killed == [(4242, signal.SIGKILL)]
    reactor.spawned[0][0].processEnded(Failure(ProcessTerminated(signal=signal.SIGKILL)))
    assert answer.result["timed_out"] is True and answer.result["exit_code"] == -signal.SIGKILL
    assert log_lines(root)[0]["timed_out"] is True


def test_a_session_that_keeps_its_output_open_is_answered_anyway(root, monkeypatch):
    reactor = FakeProcessReactor()
    monkeypatch.setattr(os, "killpg", lambda pgid, sig: None)
    answer = run(root, reactor, ["/bin/sleep", "100"], timeout=2)
    reactor.advance(2)
    reactor.advance(commands.KILL_GRACE)
    assert answer.result["timed_out"] is True
    reactor.spawned[0][0].processEnded(Failure(ProcessDone(0)))  # late: ignored


@pytest.mark.parametrize("command, kwargs, message", [
    ([], {}, "non-empty list"),
    (["sh", "-c", "true"], {}, "absolute path"),
    (["/bin/true", "a\0b"], {}, "NUL"),
    (["/bin/true"], {"timeout": 0}, "timeout"),
    (["/bin/true"], {"timeout": commands.MAX_TIMEOUT + 1}, "timeout"),
    (["/bin/true"], {"max_output": -1}, "output limit"),
    (["/bin/true"], {"user": "x" * 300}, "user"),
])
def test_bad_commands_are_refused_and_logged_without_running(root, command, kwargs, message):
    reactor = FakeProcessReactor()
    answer = run(root, reactor, command, **kwargs)
    assert message in str(answer.result.value)
    answer.addErrback(lambda _f: None)
    assert reactor.spawned == []
    (line,) = log_lines(root)
    assert line["action"] == "command" and message in line["refused"]
