"""A stream of cluster-tag jobs from a client that rides through failovers (tests and C{scripts/bench failover}).

    stream = JobStream(cluster.roots[2], "stream", env={"GANETI_HEARTBEAT_PORT": "..."}, netns=None)
    stream.start()                      # a process on node3 submits one tag job after another
    stream.pause(); stream.resume()     # around a fault of the stream's own node
    stream.stop()
    stream.acknowledged, stream.ids, stream.errors

The submitting client is what a user's client on a node is: a
L{ganeti.luxi.master.MasterClient} on that node's root (this node's LuxiD,
or the master's over TLS; on a refused or lost connection it finds the
master again and retries, a submission with its submission id), in a
process of its own started in the node's network namespace when it has
one (L{ganeti.testing.netns}).  Every error that client raises is an
error the user saw (L{JobStream.errors}).  The root is passed in the
environment, not on the command line: a fault that signals every process
naming a node's root (L{ganeti.testing.auto_failover.root_pids}) leaves
the stream alone.

The worker (C{python -m ganeti.testing.jobstream}) reads commands on stdin
(C{pause}, C{resume}, C{stop}) and writes one JSON object a line: C{{"job":
id, "tag": tag}} for an acknowledged job, C{{"error": text}} for an error
its client raised, C{{"paused": true}} once it stopped submitting.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from typing import IO, Any

from ganeti.paths import Paths

#: environment of the worker: its node's root, tag prefix, seconds between submissions, call timeout
ROOT_ENV = "GANETI_JOBSTREAM_ROOT"
PREFIX_ENV = "GANETI_JOBSTREAM_PREFIX"
INTERVAL_ENV = "GANETI_JOBSTREAM_INTERVAL"
TIMEOUT_ENV = "GANETI_JOBSTREAM_TIMEOUT"

REASON = [["gnt:client:failover-test", "", 0]]


def tag_job(tag: str) -> list[dict[str, Any]]:
    """A job adding the cluster tag C{tag}."""
    return [{"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": [tag], "reason": REASON}]


def error_key(error: BaseException) -> str:
    """An error as the stream counts it: its class and the first line of its message."""
    text = str(error)
    return "%s: %s" % (error.__class__.__name__, text.splitlines()[0][:100] if text else "")


class JobStream:
    """The parent's side of one stream (see the module docstring).

    @ivar acknowledged: C{{job id: tag}} of every job a master acknowledged
    @ivar ids: every id answered, in order (a repeated one was given twice)
    @ivar errors: C{{error: count}} of the errors the client raised
    @ivar waits: how often the client said it waits for a new master
    """

    def __init__(self, home: Paths, prefix: str = "stream", *, interval: float = 0.02, timeout: float = 30.0,
                 env: dict[str, str] | None = None, netns: str | None = None) -> None:
        self.home = home
        self.prefix = prefix
        self.interval = interval
        self.timeout = timeout
        self.env = dict(env or {})
        self.netns = netns
        self.acknowledged: dict[int, str] = {}
        self.ids: list[int] = []
        self.errors: dict[str, int] = {}
        self.waits = 0
        self.process: subprocess.Popen[str] | None = None
        self._paused = threading.Event()
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def start(self) -> None:
        env = dict(os.environ, **self.env)
        env.update({ROOT_ENV: self.home.root, PREFIX_ENV: self.prefix, INTERVAL_ENV: str(self.interval),
                    TIMEOUT_ENV: str(self.timeout)})
        argv = [sys.executable, "-m", "ganeti.testing.jobstream"]
        if self.netns is not None:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                        bufsize=1)
        self._reader = threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                if "job" in record:
                    self.acknowledged[int(record["job"])] = record["tag"]
                    self.ids.append(int(record["job"]))
                elif "error" in record:
                    self.errors[record["error"]] = self.errors.get(record["error"], 0) + 1
                elif "wait" in record:
                    self.waits += 1
                elif record.get("paused"):
                    self._paused.set()

    def _send(self, command: str) -> None:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def pause(self, timeout: float = 300.0) -> None:
        """Stop submitting; returns once the call under way is answered."""
        self._paused.clear()
        self._send("pause")
        if not self._paused.wait(timeout):
            raise AssertionError("the job stream on %s did not pause within %g s" % (self.home.root, timeout))

    def resume(self) -> None:
        self._send("resume")

    def stop(self, timeout: float = 300.0) -> None:
        """Let the call under way end, then stop the worker (and read all it said)."""
        if self.process is None:
            return
        try:
            self._send("stop")
            self.process.wait(timeout)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            self.kill()
        if self._reader is not None:
            self._reader.join(timeout=30)

    def kill(self) -> None:
        """On the way out: no worker left."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


# --- the worker ------------------------------------------------------------------------------------


def _emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


class Commands:
    """The commands on stdin, read unbuffered (a buffered reader would keep
    a second line where C{select} cannot see it)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pending: list[str] = []
        self.buffer = b""

    def next(self, wait: float) -> str | None:
        """The next command within C{wait} seconds, else C{None} (end of input: C{"stop"})."""
        if not self.pending:
            ready, _, _ = select.select([self.fd], [], [], max(wait, 0.0))
            if not ready:
                return None
            data = os.read(self.fd, 4096)
            if not data:
                return "stop"
            lines = (self.buffer + data).split(b"\n")
            self.buffer = lines.pop()
            self.pending.extend(line.decode().strip() for line in lines if line.strip())
            if not self.pending:
                return None
        return self.pending.pop(0)


def main() -> None:
    from ganeti.luxi.master import MasterClient

    paths = Paths(os.environ[ROOT_ENV])
    prefix = os.environ.get(PREFIX_ENV, "stream")
    interval = float(os.environ.get(INTERVAL_ENV, "0.02"))
    client = MasterClient(paths, float(os.environ.get(TIMEOUT_ENV, "30")), on_wait=lambda text: _emit({"wait": text}))
    commands = Commands(sys.stdin.fileno())
    count = 0
    paused = False
    while True:
        command = commands.next(0.05 if paused else interval)
        if command == "stop":
            break
        if command == "pause":
            paused = True
            _emit({"paused": True})
        elif command == "resume":
            paused = False
            client.told = False  # a new fault: the client may say again that it waits
        if paused or command is not None:
            continue
        count += 1
        tag = "%s%d" % (prefix, count)
        try:
            answers = client.submit_many_jobs([tag_job(tag)])
        except Exception as e:  # what the user's client reports
            _emit({"error": error_key(e)})
            client.close()
            time.sleep(interval)
            continue
        for ok, job_id in answers:
            _emit({"job": int(job_id), "tag": tag} if ok else {"error": "refused: %s" % str(job_id)[:100]})
    client.close()


if __name__ == "__main__":
    main()
