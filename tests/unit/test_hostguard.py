"""The guard of tests/hostguard.py: what a test may open, and how a refusal is reported."""

from __future__ import annotations

import os
import tempfile

import pytest

from tests import hostguard
from tests.testdata import TESTDATA


@pytest.fixture
def guard() -> hostguard.HostGuard:
    return hostguard.HostGuard(hostguard.allowed_roots())


def test_the_checkout_python_and_temporary_files_are_allowed(guard: hostguard.HostGuard) -> None:
    for path in (str(TESTDATA / "config.data"), os.__file__, pytest.__file__, tempfile.gettempdir() + "/x",
                 "/tmp/gntabc/var/lib/ganeti/config.data", "/dev/null", "/dev/urandom", "/proc/self/fd",
                 "/proc/meminfo", "/proc", "config.data"):
        assert guard.allowed(path), path


def test_the_hosts_files_are_not(guard: hostguard.HostGuard) -> None:
    checkout = hostguard.checkout_root()
    for path in ("/etc/ganeti/x", "/usr/lib/ganeti/daemon-util", "/var/lib/ganeti/config.data", "/etc/hostname",
                 "/usr/share/ganeti/os", "/srv/ganeti/file-storage", "/", "/sys/kernel",
                 os.path.join(checkout, "..", "shared", "testdata", "ganeti-3.0.2", "config.data")):
        assert not guard.allowed(path), path


def test_a_symlink_out_of_the_temporary_directory_is_followed(guard: hostguard.HostGuard, tmp_path) -> None:
    (tmp_path / "etc").symlink_to("/etc")
    (tmp_path / "hostname").symlink_to("/etc/hostname")
    assert not guard.allowed(str(tmp_path / "etc" / "hostname"))
    assert not guard.allowed(str(tmp_path / "hostname"))
    assert guard.allowed(str(tmp_path / "plain"))


def test_a_refused_open_raises_and_is_recorded_until_taken(guard: hostguard.HostGuard) -> None:
    guard._hook("open", ("/etc/ganeti/x", "r", 0))  # inactive: nothing
    guard.start()
    guard._hook("open", (str(TESTDATA / "locks.data"), "r", 0))
    guard._hook("open", (3, "r", 0))  # a file descriptor
    with pytest.raises(hostguard.HostRead, match="/etc/ganeti/x"):
        guard._hook("open", (b"/etc/ganeti/x", "r", 0))
    with pytest.raises(hostguard.HostRead):
        guard._hook("os.scandir", ("/usr/share/ganeti",))
    found = guard.take()
    assert [line.split("\n")[0] for line in found] == ["open '/etc/ganeti/x'", "os.scandir '/usr/share/ganeti'"]
    assert "test_a_refused_open_raises" in found[0]  # where it was opened
    assert guard.take() == []
    guard._hook("open", ("/etc/ganeti/x", "r", 0))  # stopped: nothing
    assert "2 access(es)" in hostguard.describe(found)


def test_the_installed_guard_fails_a_read_of_the_host() -> None:
    """The suite's own guard (tests/conftest.py) is active while this runs."""
    with pytest.raises(hostguard.HostRead):
        open("/etc/hostname").close()
    from tests import conftest

    found = conftest._GUARD.take()  # taken here, so that this test itself passes
    conftest._GUARD.start()
    assert len(found) == 1 and found[0].startswith("open '/etc/hostname'")
