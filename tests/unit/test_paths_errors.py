"""Paths derive from one root; errors travel as Ganeti's [name, [args]]."""

from ganeti import errors
from ganeti.paths import Paths


def test_every_path_is_under_the_root(monkeypatch):
    paths = Paths("/tmp/n1")
    for value in (paths.config_data, paths.locks_data, paths.wconfd_socket, paths.luxi_socket,
                  paths.ssconf("master_node"), paths.lock_dir, paths.queue_dir, paths.pid_file("ganeti-wconfd")):
        assert value.startswith("/tmp/n1/")
    assert paths.config_data == "/tmp/n1/var/lib/ganeti/config.data"
    assert paths.wconfd_socket == "/tmp/n1/var/run/ganeti/socket/ganeti-wconfd"
    monkeypatch.setenv("GANETI_ROOT", "/tmp/n2")
    assert Paths.from_option(None).root == "/tmp/n2"
    assert Paths.from_option("/tmp/n3").root == "/tmp/n3"
    monkeypatch.delenv("GANETI_ROOT")
    assert Paths.from_option(None).config_data == "/var/lib/ganeti/config.data"


def test_error_encoding_round_trips_ganeti_names():
    encoded = errors.encode(errors.OpPrereqError("Instance 'x' not known", errors.ECODE_NOENT))
    assert encoded == ["OpPrereqError", ["Instance 'x' not known", "unknown_entity"]]
    decoded = errors.decode(encoded)
    assert isinstance(decoded, errors.OpPrereqError) and decoded.args[1] == "unknown_entity"
    assert errors.encode(KeyError("k")) == ["GenericError", ["KeyError: 'k'"]]
    assert isinstance(errors.decode("garbage"), errors.LuxiError)
    assert isinstance(errors.decode(["NoSuchClass", ["m"]]), errors.GenericError)
    verify = errors.ConfigVerifyError("failed", ["a", "b"])
    assert str(verify) == "failed: a; b"
