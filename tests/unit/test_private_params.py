"""Private and secret opcode parameters: redacted in job files (as Ganeti's
C{Private} shows them), handed to the job process with the handshake's
confirmation, merged into the opcode it runs; lost ones fail the job."""

from __future__ import annotations

import json

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.jobs import channel, model, private
from ganeti.luxid.spawner import JobChannel, JobProcessProtocol
from tests.unit.test_luxid_spawner import GOOD_LOCKFILE, PATHS, FakeProcess
from tests.unit.test_processor import ProcessorTestCase


def test_split_redacts_every_value_and_keeps_the_keys():
    op = {"OP_ID": "OP_INSTANCE_CREATE", "osparams": {"a": "1"}, "osparams_private": {"pw": "hunter2"},
          "osparams_secret": {"key": "s3cret"}, "osparams_private_cluster": None}
    written, clear = private.split(op)
    assert written["osparams_private"] == {"pw": "<redacted>"} and written["osparams_secret"] == {"key": "<redacted>"}
    assert written["osparams"] == {"a": "1"}  # public parameters stay as given
    assert clear == {"osparams_private": {"pw": "hunter2"}, "osparams_secret": {"key": "s3cret"}}
    assert op["osparams_private"] == {"pw": "hunter2"}  # the caller's opcode is not changed
    assert "hunter2" not in json.dumps(written) and "s3cret" not in json.dumps(written)
    assert private.merged(written, clear) == op
    assert private.lost(written) == ["osparams_private", "osparams_secret"]
    assert private.lost(op) == []
    nested, _ = private.split({"osparams_private_cluster": {"debian": {"pw": "x"}}})
    assert nested["osparams_private_cluster"] == {"debian": {"pw": "<redacted>"}}


def test_hold_keeps_only_the_jobs_with_private_values():
    store: dict[int, dict] = {}
    ops = private.hold(store, 5, [{"OP_ID": "OP_TEST_DELAY", "duration": 0},
                                  {"OP_ID": "OP_TEST_OS_PARAMS", "osparams_secret": {"k": "v"}}])
    assert ops[1]["osparams_secret"] == {"k": "<redacted>"}
    assert store == {5: {"1": {"osparams_secret": {"k": "v"}}}}
    private.hold(store, 6, [{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
    assert 6 not in store


class ConfirmationTests(SynchronousTestCase):
    def test_the_confirmation_carries_the_clear_values_once(self) -> None:
        store = {7: {"0": {"osparams_secret": {"k": "v"}}}}
        job_channel = JobChannel(7, PATHS, Clock(), lambda *args: None, timeout=30, private=store)
        process = FakeProcess()
        protocol = JobProcessProtocol(job_channel, lambda exit: None)
        protocol.makeConnection(process)
        protocol.childDataReceived(channel.TO_PARENT_FD, channel.encode({"lockfile": GOOD_LOCKFILE, "pid": 1}))
        ((fd, data),) = process.to_child
        self.assertEqual(fd, channel.FROM_PARENT_FD)
        self.assertEqual(json.loads(data), {"confirm": True, "private": {"0": {"osparams_secret": {"k": "v"}}}})
        self.assertEqual(store, {}, "LuxiD forgets them once the job process has them")


class ProcessorPrivateTests(ProcessorTestCase):
    def test_the_opcode_runs_with_the_clear_values_and_the_file_keeps_them_redacted(self) -> None:
        written, clear = private.split({"OP_ID": "OP_TEST_OS_PARAMS", "osparams_secret": {"token": "s3cret"}})
        run = self.env.start(1, [written], private={"0": clear})
        self.successResultOf(run.done)
        self.assertEqual(run.job.status, model.SUCCESS)
        self.assertIn("Secret OS parameters: {'token': 's3cret'}", [entry[3] for entry in run.ops[0].log])
        self.assertTrue(run.saves)
        for saved in run.saves:  # what the job file holds at every write
            self.assertEqual(saved["ops"][0]["input"]["osparams_secret"], {"token": "<redacted>"})

    def test_lost_values_fail_the_job_with_a_clear_message(self) -> None:
        written, _clear = private.split({"OP_ID": "OP_TEST_OS_PARAMS", "osparams_secret": {"token": "s3cret"}})
        run = self.env.start(1, [written])
        self.successResultOf(run.done)
        self.assertEqual(run.job.status, model.ERROR)
        self.assertIn("private parameters (osparams_secret) of this job were lost", run.ops[0].result[1][0])


def test_the_command_log_shows_private_values_redacted():
    from ganeti.client.runner import redacted_argv

    argv = ["add", "--os-parameters-private", "pw=hunter2,user=me", "--os-parameters-secret=key=s3cret", "-O",
            "colour=blue", "inst1"]
    assert redacted_argv(argv) == ["add", "--os-parameters-private", "pw=<redacted>,user=<redacted>",
                                   "--os-parameters-secret=key=<redacted>", "-O", "colour=blue", "inst1"]
