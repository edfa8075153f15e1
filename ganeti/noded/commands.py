"""C{gnt-cluster command} and C{copyfile} on the node: run a command, write a file.

Ganeti does both over SSH as root; here the master's command line sends
them to each node's NodeD over the cluster's mutual TLS
(C{node_run_command}, C{node_copy_file}), so no node needs an SSH key of
the master.  Whoever holds the cluster's certificate may already change
the node as root through node RPC; these two make that explicit, bounded
and recorded:

  - a command runs in a session of its own (C{setsid}), stdin closed,
    stdout and stderr merged, working directory C{/}; after C{timeout}
    seconds (at most L{MAX_TIMEOUT}) the whole session is killed; output
    beyond C{max_output} bytes (at most L{MAX_OUTPUT}) is read and dropped;
  - a file goes to an absolute path under the node's root, written to a
    temporary file in the same directory and renamed over the target,
    only if its SHA-256 matches and it is at most L{MAX_FILE_SIZE} bytes;
    the directory must exist, the target may not be a directory;
  - every use, refused ones too, is one line in the node's
    C{commands.log} (where the gnt-* tools record their command lines),
    written when the outcome is known (L{log_record} describes it).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ProcessDone
from twisted.internet.protocol import ProcessProtocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti import logfile, serializer
from ganeti.noded.dispatch import handler
from ganeti.noded.failure import RpcFailure
from ganeti.paths import Paths
from ganeti.reactors import IReactor
from ganeti.rpc import procedures, wire

#: Longest command run, seconds.
MAX_TIMEOUT = 3600.0
#: Most output bytes kept of a command.
MAX_OUTPUT = 16 * 1024 * 1024
#: Largest file C{node_copy_file} writes, bytes.
MAX_FILE_SIZE = 128 * 1024 * 1024
#: Longest argv (bytes, all arguments together).
MAX_ARGV = 128 * 1024
#: Longest C{user} text recorded.
MAX_USER = 256
#: The log's name in the log directory.
LOG_NAME = "commands.log"
#: The program named in its lines.
PROGRAM = "ganeti-noded"
#: Seconds a killed session gets to close its output before the answer goes without it.
KILL_GRACE = 5.0
#: Environment of a command (Ganeti's SSH login gives root's).
COMMAND_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
               "HOME": "/root", "SHELL": "/bin/sh"}
SETSID = "/usr/bin/setsid"

_log = Logger()


def log_path(paths: Paths) -> str:
    return os.path.join(paths.log_dir, LOG_NAME)


def log_record(paths: Paths, record: dict[str, Any]) -> None:
    """Append one use to the node's C{commands.log} (the file where the
    gnt-* tools record their command lines), in Ganeti's log layout::

        2026-11-29 11:15:54,258: ganeti-noded pid=2970 INFO gnt-cluster command by root: {"argv": [...], ...}

    The message is C{gnt-cluster ACTION by USER: JSON}: C{ACTION} is
    C{command} or C{copyfile}, C{USER} who ran it on the master (as the
    master sent it), and the JSON object holds for a command C{argv},
    C{exit_code}, C{timed_out}, C{output_bytes}, C{truncated}, C{seconds};
    for a file C{path}, C{size}, C{mode} (octal text), C{sha256}.  A refused
    use is a C{WARNING} line whose JSON has C{refused} (the reason) instead
    of the outcome."""
    fields = dict(record)
    action, user = fields.pop("action"), fields.pop("user")
    level = "WARNING" if "refused" in fields else "INFO"
    message = "gnt-cluster %s by %s: %s" % (action, user, json.dumps(fields, separators=(", ", ": ")))
    os.makedirs(paths.log_dir, mode=0o750, exist_ok=True)
    if not logfile.append_line(log_path(paths), logfile.format_line(PROGRAM, level, message, time.time(), os.getpid())):
        _log.error("cannot write {path}: {message}", path=log_path(paths), message=message)


def parse_record(line: str) -> dict[str, Any] | None:
    """The use a C{commands.log} line records (C{level}, C{action},
    C{user} and the JSON's keys), or C{None} for another program's line."""
    head, sep, body = line.partition(": {")
    words = head.split(" ")
    if not sep or PROGRAM not in words or "gnt-cluster" not in words:
        return None
    at = words.index("gnt-cluster")
    try:
        fields = json.loads("{" + body)
    except ValueError:
        return None
    return {"level": words[at - 1], "action": words[at + 1], "user": " ".join(words[at + 3:]), **fields}


class _Session(ProcessProtocol):
    """A command's merged output, capped; C{done} fires with C{(exit code, timed out)}."""

    def __init__(self, max_output: int) -> None:
        self.max_output = max_output
        self.chunks: list[bytes] = []
        self.kept = 0
        self.total = 0
        self.timed_out = False
        self.done: Deferred[int] = Deferred()

    def connectionMade(self) -> None:
        self.transport.closeStdin()  # type: ignore[union-attr]

    def _received(self, data: bytes) -> None:
        self.total += len(data)
        room = self.max_output - self.kept
        if room > 0:
            self.chunks.append(data[:room])
            self.kept += min(room, len(data))

    outReceived = errReceived = _received

    def processEnded(self, reason: Failure) -> None:
        value = reason.value
        if isinstance(value, ProcessDone):
            code = 0
        else:
            code = value.exitCode if getattr(value, "exitCode", None) is not None else -(value.signal or 1)
        if not self.done.called:
            self.done.callback(code)


def _text(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit or "\0" in value:
        raise RpcFailure("%s must be a string of at most %d characters" % (what, limit))
    return value


class CommandProcedures:
    """C{node_run_command} and C{node_copy_file} of one node root."""

    log = Logger()

    def __init__(self, paths: Paths, reactor: IReactor) -> None:
        self.paths = paths
        self._reactor = reactor

    def _refuse(self, action: str, user: Any, why: str, **record: Any) -> RpcFailure:
        log_record(self.paths, {"action": action, "user": user if isinstance(user, str) else repr(user)[:MAX_USER],
                                **record, "refused": why})
        return RpcFailure(why)

    # --- command -----------------------------------------------------------------------

    @handler(procedures.node_run_command)
    async def node_run_command(self, command: list[str], timeout: float, max_output: int,
                               user: str) -> dict[str, Any]:
        argv = command if isinstance(command, list) else [repr(command)[:200]]
        try:
            _text(user, "the user", MAX_USER)
            if not command or not all(isinstance(a, str) and "\0" not in a for a in command):
                raise RpcFailure("the command must be a non-empty list of strings without NUL characters")
            if sum(len(a) for a in command) > MAX_ARGV:
                raise RpcFailure("the command is longer than %d bytes" % MAX_ARGV)
            if not command[0].startswith("/"):
                raise RpcFailure("the command's program must be an absolute path, not %r" % command[0][:200])
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT:
                raise RpcFailure("the timeout must be between 0 and %d seconds" % MAX_TIMEOUT)
            if isinstance(max_output, bool) or not isinstance(max_output, int) or not 0 <= max_output <= MAX_OUTPUT:
                raise RpcFailure("the output limit must be between 0 and %d bytes" % MAX_OUTPUT)
        except RpcFailure as e:
            raise self._refuse("command", user, str(e), argv=argv) from None
        started = time.monotonic()
        session = _Session(max_output)
        reactor: Any = self._reactor
        try:
            transport = reactor.spawnProcess(session, SETSID, [SETSID, *command], env=dict(COMMAND_ENV), path="/")
        except OSError as e:
            raise self._refuse("command", user, "cannot start the command: %s" % e, argv=command) from None

        def kill() -> None:
            session.timed_out = True
            self.log.warn("command {argv!r} still running after {timeout}s: its session is killed",
                          argv=command, timeout=timeout)
            try:
                os.killpg(transport.pid, signal.SIGKILL)
            except (OSError, TypeError):
                pass
            # a child outside the session may hold the output open: answer without waiting for it
            reactor.callLater(KILL_GRACE, give_up)

        def give_up() -> None:
            if not session.done.called:
                session.done.callback(-signal.SIGKILL)

        timer = reactor.callLater(timeout, kill)
        try:
            code = await session.done
        finally:
            if timer.active():
                timer.cancel()
        output = b"".join(session.chunks)
        answer = {"exit_code": code, "output": output.decode("utf-8", errors="replace"),
                  "truncated": session.total > session.kept, "timed_out": session.timed_out}
        log_record(self.paths, {"action": "command", "user": user, "argv": command, "exit_code": code,
                                "timed_out": session.timed_out, "output_bytes": session.total,
                                "truncated": answer["truncated"], "seconds": round(time.monotonic() - started, 3)})
        return answer

    # --- copyfile ------------------------------------------------------------------------

    @handler(procedures.node_copy_file)
    def node_copy_file(self, path: str, data: list[Any], mode: int, sha256: str, user: str) -> dict[str, Any]:
        shown = path if isinstance(path, str) else repr(path)[:200]
        try:
            _text(user, "the user", MAX_USER)
            if not isinstance(path, str) or not path.startswith("/"):
                raise RpcFailure("the destination must be an absolute path, not %.200r" % (path,))
            try:
                real = wire.localize(self.paths.root, path)
            except wire.RpcWireError as e:
                raise RpcFailure(str(e)) from None
            if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
                raise RpcFailure("the mode must be between 0 and 07777")
            if not isinstance(sha256, str) or len(sha256) != 64:
                raise RpcFailure("the SHA-256 digest must be 64 hex digits")
            try:
                content = wire.decompress(data)
            except wire.RpcWireError as e:
                raise RpcFailure(str(e)) from None
            if len(content) > MAX_FILE_SIZE:
                raise RpcFailure("the file is larger than %d bytes" % MAX_FILE_SIZE)
            digest = hashlib.sha256(content).hexdigest()
            if digest != sha256.lower():
                raise RpcFailure("the file's SHA-256 is %s, not %s as sent" % (digest, sha256))
            if os.path.isdir(real):
                raise RpcFailure("%s is a directory" % path)
            if not os.path.isdir(os.path.dirname(real)):
                raise RpcFailure("the directory of %s does not exist on this node" % path)
        except RpcFailure as e:
            raise self._refuse("copyfile", user, str(e), path=shown) from None
        try:
            serializer.write_file(real, content, mode=mode)
            os.chmod(real, mode)  # write_file's mode goes through the umask
        except OSError as e:
            raise self._refuse("copyfile", user, "cannot write %s: %s" % (path, e.strerror or e), path=path) from None
        log_record(self.paths, {"action": "copyfile", "user": user, "path": path, "size": len(content),
                                "mode": "%04o" % mode, "sha256": digest})
        return {"path": path, "size": len(content), "sha256": digest}
