"""C{restricted_command}: run one of the node's own restricted commands.

Ganeti's C{gnt-node restricted-command NAME NODE...}: the master names a
command, each node runs the executable of that name in its
C{restricted-commands} directory (C{/etc/ganeti/restricted-commands}),
empty environment, no arguments, and answers its output.  The node decides
what can run, so the rules are Ganeti's:

  - the name matches C{[a-zA-Z0-9_-]+};
  - the directory and the executable belong to the user NodeD runs as
    (root on a real node) and are writable by nobody else (mode at most
    0755);
  - one command at a time per node (a lock in the lock directory);
  - any failure before the command runs answers, after
    L{INVALID_DELAY} seconds, only "Executing command 'NAME' failed" (the
    reason goes to NodeD's log), so probing for names is slow and tells
    nothing; a command that runs and fails answers its exit and output.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any

from twisted.internet import defer, task
from twisted.logger import Logger

from ganeti.asyncutil import Network, ProgramTimeout
from ganeti.noded.dispatch import handler
from ganeti.noded.failure import RpcFailure
from ganeti.paths import Paths
from ganeti.reactors import IReactor
from ganeti.rpc import procedures

#: the directory below the configuration directory
DIR_NAME = "restricted-commands"
#: the lock file's name in the lock directory
LOCK_NAME = "ganeti-restricted-commands.lock"
#: Seconds before a refusal is answered (Ganeti's C{_RCMD_INVALID_DELAY}).
INVALID_DELAY = 10.0
#: Longest a command may run, seconds (the procedure's time limit class).
TIMEOUT = procedures.TMO_SLOW - 60
#: Most permissive mode of the directory and the executables.
MAX_MODE = stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH
NAME_RE = re.compile(r"^[a-zA-Z0-9_-]+$")


def commands_dir(paths: Paths) -> str:
    return os.path.join(paths.conf_dir, DIR_NAME)


def _owned(path: str, owner: tuple[int, int]) -> str | None:
    """Why C{path} may not be trusted, or C{None}."""
    try:
        st = os.stat(path)
    except OSError as e:
        return "Can't stat(2) '%s': %s" % (path, e.strerror)
    if stat.S_IMODE(st.st_mode) & ~MAX_MODE:
        return "Permissions on '%s' are too permissive" % path
    if (st.st_uid, st.st_gid) != owner:
        return "'%s' is not owned by %s:%s" % (path, owner[0], owner[1])
    return None


def prepare(directory: str, cmd: Any, owner: tuple[int, int]) -> tuple[bool, str]:
    """C{(True, executable)} when C{cmd} may run, else C{(False, why)}."""
    why = _owned(directory, owner)
    if why is None and not os.path.isdir(directory):
        why = "Path '%s' is not a directory" % directory
    if why is None:
        if not isinstance(cmd, str) or not cmd.strip():
            why = "Missing command name"
        elif os.path.basename(cmd) != cmd or not NAME_RE.match(cmd):
            why = "Command name contains forbidden characters"
    if why is not None:
        return False, why
    executable = os.path.join(directory, cmd)
    why = _owned(executable, owner)
    if why is None and not (os.path.isfile(executable) and os.access(executable, os.X_OK)):
        why = "access(2) thinks '%s' can't be executed" % executable
    return (False, why) if why is not None else (True, executable)


class RestrictedProcedures:
    """The C{restricted_command} procedure of the node rooted at C{paths}."""

    log = Logger()

    def __init__(self, paths: Paths, reactor: IReactor) -> None:
        self.paths = paths
        self._reactor = reactor
        self._lock = defer.DeferredLock()
        self.owner = (os.geteuid(), os.getegid())
        self.invalid_delay = INVALID_DELAY

    @handler(procedures.restricted_command)
    async def restricted_command(self, cmd: Any) -> str:
        await self._lock.acquire()
        try:
            ok, value = prepare(commands_dir(self.paths), cmd, self.owner)
            if ok:
                try:
                    out, err, code = await Network(self._reactor).run(value, [], TIMEOUT, env={}, path="/")
                except ProgramTimeout:
                    raise RpcFailure("Restricted command '%s' failed: ran longer than %d seconds"
                                     % (cmd, TIMEOUT)) from None
                except OSError as e:
                    ok, value = False, str(e)
                else:
                    output = (out + err).decode("utf-8", "replace")
                    if code != 0:
                        how = "exited with exit code %d" % code if code > 0 else "killed by signal %d" % -code
                        raise RpcFailure("Restricted command '%s' failed: %s; output: %s" % (cmd, how, output))
                    return output
        finally:
            self._lock.release()
        self.log.error("restricted command {cmd!r} refused: {why}", cmd=cmd, why=value)
        await task.deferLater(self._reactor, self.invalid_delay, lambda: None)
        raise RpcFailure("Executing command '%s' failed" % (cmd,))
