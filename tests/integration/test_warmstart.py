"""The warm launcher of the master daemons (ganeti.warmstart): twistd's command line, run from a fork."""

from __future__ import annotations

import os

from ganeti.warmstart import WarmStarter


def test_a_request_runs_twistd_with_its_environment_and_answers_its_status(tmp_path):
    starter = WarmStarter(str(tmp_path), str(tmp_path / "run"))
    starter.start()
    try:
        code, output = starter.run(["ganeti-twistd", "ganeti-wconfd", "--help"], dict(os.environ), str(tmp_path))
        assert code == 0 and "--root" in output  # the daemon's own options: its plugin was found
        code, output = starter.run(["ganeti-twistd", "no-such-daemon"], dict(os.environ), str(tmp_path))
        assert code != 0 and "no-such-daemon" in output
        assert not [name for name in os.listdir(tmp_path / "run") if name.startswith("warmstart.")]
    finally:
        starter.stop()


def test_a_gone_launcher_answers_none_and_the_daemon_starts_cold(tmp_path):
    starter = WarmStarter(str(tmp_path), str(tmp_path / "run"))
    starter.start()
    starter.stop()
    assert starter.run(["ganeti-twistd", "ganeti-wconfd", "--help"], dict(os.environ), str(tmp_path)) is None
