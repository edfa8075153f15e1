"""The tests' gnt-* commands forked warm (ganeti.testing.warmcli) behave as the cold console scripts."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from ganeti.paths import Paths
from ganeti.testing import warmcli, warmfork

BIN = os.path.dirname(sys.executable)


@pytest.mark.parametrize("command", [
    ["gnt-node", "bogus-command"],                 # a usage error: exit 2, the message on stderr
    ["gnt-cluster", "--help"],                     # the command list, on stdout
    ["gnt-instance", "list", "--no-headers"],      # no cluster at the root: the error and its status
    ["gnt-debug", "delay", "--help"],
])
def test_warm_command_is_the_cold_one(tmp_path, monkeypatch, command):
    if not warmfork.enabled():
        pytest.skip("GANETI_TEST_WARM=0: every command runs cold")
    monkeypatch.setenv("GANETI_WARMCLI_PROBE", "1")   # the request's environment, not the launcher's
    argv = [os.path.join(BIN, command[0]), "--root", str(tmp_path), *command[1:]]
    warm = warmcli.run(argv, timeout=60)
    cold = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert warm is not None, "not forked warm"
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert cold.stdout or cold.stderr


def test_other_programs_and_a_timeout():
    """Not one of our gnt-* tools: run cold (None); a command past its time is killed, as subprocess.run does."""
    assert warmcli.run([os.path.join(BIN, "ganeti-daemons"), "--help"], timeout=60) is None
    if not warmfork.enabled():
        return
    root = tempfile.mkdtemp(prefix="gntwc", dir="/tmp")   # short: a Unix socket's path has 108 bytes
    paths = Paths(root)
    os.makedirs(paths.socket_dir)
    silent = [socket.socket(socket.AF_UNIX), socket.socket(socket.AF_UNIX)]   # accepts, never answers
    for sock, path in zip(silent, (paths.luxi_socket, paths.master_socket)):
        sock.bind(path)
        sock.listen()
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            warmcli.run([os.path.join(BIN, "gnt-instance"), "--root", root, "list"], timeout=2)
    finally:
        for sock in silent:
            sock.close()
        shutil.rmtree(root)
