"""The log files an admin reads: daemon logs, commands.log and jobs.log.

Every line has Ganeti's layout::

    2026-01-31 12:00:00,123: gnt-debug delay pid=4242 INFO Command line: ...

Daemons started by C{ganeti-daemons} or the systemd units log through
L{observer} (twistd's C{--logger}; C{ganeti-daemons} names the file in
C{$GANETI_LOG_FILE}, L{ganeti.daemons.LOG_FILE_ENV}): the file is opened for appending (so C{logrotate}'s
C{copytruncate} leaves no hole in it), nothing rotates it behind
logrotate's back, and only C{info} and above are written unless
C{GANETI_DEBUG} is set.  L{quiet_twisted} turns off Twisted's per
connection chatter ("Starting factory ...").

Writing C{commands.log} and C{jobs.log} is best effort: a full disk or a
missing directory never fails a command or a job.
"""

from __future__ import annotations

import os
import sys
import time

from ganeti.jobs import lifecycle

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any, Sequence

# Twisted is imported only by the daemon-side functions: the gnt-* commands
# write commands.log through this module and must start fast.

#: environment variable that lets debug messages through
DEBUG_ENV = "GANETI_DEBUG"


def timestamp(when: float) -> str:
    """C{2026-01-31 12:00:00,123} in local time, as Python's logging writes it."""
    return "%s,%03d" % (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when)), int(when * 1000) % 1000)


def format_line(program: str, level: str, message: str, when: float, pid: int) -> str:
    """One log line in Ganeti's layout, newline included; newlines in
    C{message} are escaped so that a line is always one record."""
    message = message.replace("\\", "\\\\").replace("\n", "\\n")
    return "%s: %s pid=%d %s %s\n" % (timestamp(when), program, pid, level, message)


def append_line(path: str, line: str) -> bool:
    """Append C{line} to C{path} in one write (O_APPEND); C{False} on any error."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
    except OSError:
        return False
    try:
        os.write(fd, line.encode("utf-8", "backslashreplace"))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _user() -> str:
    uid = os.getuid()
    try:
        import pwd

        name = pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        name = "uid%d" % uid
    sudo = os.environ.get("SUDO_USER")
    return "%s (sudo by %s)" % (name, sudo) if sudo and sudo != name else name


def command_line(prog: str, argv: Sequence[str]) -> str:
    """The command as one could type it again (arguments quoted as the shell needs)."""
    import shlex

    return " ".join(shlex.quote(word) for word in [prog, *argv])


def record_command(log_dir: str, program: str, argv: Sequence[str], when: float | None = None) -> bool:
    """Append the command to C{log_dir/commands.log}: who ran what, when.

    @param program: the tool and its command (C{gnt-instance add}).
    @param argv: the arguments as typed, after the tool's name.
    @return: whether the line was written.  Nothing is written (nor
        created) when C{log_dir} does not exist: a command run on a machine
        that is no cluster node leaves no trace.
    """
    if not os.path.isdir(log_dir):
        return False
    tool = program.split(" ", 1)[0]
    message = "Command line: %s (user %s)" % (command_line(tool, argv), _user())
    line = format_line(program, "INFO", message, time.time() if when is None else when, os.getpid())
    return append_line(os.path.join(log_dir, "commands.log"), line)


class JobsLog:
    """C{jobs.log}: one line per job state change an admin cares about.

    @param path: the file (C{ROOT/var/log/ganeti/jobs.log}).
    @param clock: C{seconds()} gives the time of each line.
    """

    def __init__(self, path: str, clock: Any) -> None:
        self.path = path
        self.clock = clock
        self._seen: dict[int, str] = {}

    def submitted(self, job_id: int, summary: Sequence[str]) -> None:
        """@param summary: its opcodes' one-line summaries (C{TEST_DELAY(2.0)}), as gnt-job list shows them."""
        self._seen[job_id] = "queued"
        self._write("job %d submitted: %s" % (job_id, ", ".join(summary) or "no opcodes"))

    def status(self, job_id: int, status: str, finalized: bool) -> None:
        """Note the job's status; a line when it started and when it ended.

        Called on every change of the job file: repeated or intermediate
        statuses (a job going from C{waiting} to C{running}, C{canceling})
        write nothing.
        """
        phase = "done" if finalized else "started" if status in (lifecycle.WAITING, lifecycle.RUNNING) else "queued"
        if self._seen.get(job_id) == phase:
            return
        self._seen[job_id] = phase
        if phase == "started":
            self._write("job %d started" % job_id)
        elif phase == "done":
            self._write("job %d finished: %s" % (job_id, status))

    def forget(self, job_id: int) -> None:
        """The job was archived: no more lines about it."""
        self._seen.pop(job_id, None)

    def _write(self, message: str) -> None:
        append_line(self.path, format_line("ganeti-luxid", "INFO", message, self.clock.seconds(), os.getpid()))


# --- daemon logs ---------------------------------------------------------------------
#: Twisted's level names -> Ganeti's (Python logging's)
_LEVELS = {"debug": "DEBUG", "info": "INFO", "warn": "WARNING", "error": "ERROR", "critical": "CRITICAL"}


class AppendingFileObserver:
    """Writes each event as one Ganeti-style line to a file opened for appending.

    @param program: the daemon's name in each line.
    @param stream: a binary file opened in append mode.
    """

    def __init__(self, program: str, stream: IO[bytes], pid: int | None = None) -> None:
        self.program = program
        self.stream = stream
        self.pid = pid

    def __call__(self, event: dict[str, Any]) -> None:
        from twisted.logger import eventAsText

        text = eventAsText(event, includeTimestamp=False, includeSystem=False)
        if not text:
            return
        level = _LEVELS.get(getattr(event.get("log_level"), "name", "info"), "INFO")
        when = event.get("log_time") or time.time()
        pid = self.pid if self.pid is not None else os.getpid()  # after twistd's fork
        line = format_line(self.program, level, text.rstrip("\n"), when, pid)
        try:
            self.stream.write(line.encode("utf-8", "backslashreplace"))
            self.stream.flush()
        except OSError:
            pass  # a full disk must not take the daemon down


class LevelFilter:
    """Passes events on to C{observer} unless they are noise: C{debug}
    events (unless C{debug}) and AMP's "connection established/lost" lines
    (two per job process, which talks to WConfD over AMP).
    """

    def __init__(self, observer: Any, debug: bool) -> None:
        self.observer = observer
        self.debug = debug

    def __call__(self, event: dict[str, Any]) -> None:
        if not self.debug and getattr(event.get("log_level"), "name", "info") == "debug":
            return
        if event.get("log_namespace") == "twisted.protocols.amp" and str(event.get("log_format", "")).startswith(
            "{cls} connection "
        ):
            return
        self.observer(event)


def daemon_name(argv: Sequence[str]) -> str:
    """The daemon twistd runs: the first of its arguments naming one."""
    from ganeti.daemons import BY_NAME

    return next((word for word in argv if word in BY_NAME), "ganeti")


def observer() -> Any:
    """twistd's C{--logger ganeti.logfile.observer}: the daemon's log file
    named by C{$GANETI_LOG_FILE} (opened for appending), or stdout when it
    is unset or C{-} (under systemd: the journal)."""
    from twisted.logger import ILogObserver
    from zope.interface import directlyProvides

    from ganeti.daemons import LOG_FILE_ENV

    path = os.environ.get(LOG_FILE_ENV) or "-"
    quiet_twisted()
    stream = sys.stdout.buffer if path == "-" else open(path, "ab", buffering=0)
    result = LevelFilter(AppendingFileObserver(daemon_name(sys.argv), stream), bool(os.environ.get(DEBUG_ENV)))
    directlyProvides(result, ILogObserver)
    return result


def quiet_twisted() -> None:
    """No "Starting factory"/"Stopping factory" lines for every outgoing
    connection, nor "Starting protocol" for UDP ports: in a daemon they
    hide what matters (a connection that is retried while WConfD is down
    wrote two lines per attempt).  Process-wide: only daemons call it."""
    from twisted.internet import protocol

    protocol.Factory.noisy = False
    protocol.AbstractDatagramProtocol.noisy = False
