"""The node side of LU hooks: Ganeti's C{HooksRunner} behind C{hooks_runner}.

The master's job process (L{ganeti.cmdlib.hooks}) asks each node it chose
to run the scripts of C{<hooks dir>/<hpath>-<phase>.d/} (the hooks dir is
C{etc/ganeti/hooks} under the node's root).  Ganeti's rules (its
C{RunParts}):

  - a missing directory means no hooks: C{[]};
  - the directory's visible entries (no leading dot) are taken in sorted
    order; an entry runs only if its name matches C{^[a-zA-Z0-9_-]+$} and it
    is an executable regular file, else it is skipped (C{HKR_SKIP});
  - each script runs with no arguments, stdin C{/dev/null}, working
    directory C{/}, and the environment it was given and nothing else;
  - a non-zero exit is C{HKR_FAIL}, exit 0 C{HKR_SUCCESS}; the output is
    stdout then stderr, stripped; a script that cannot be started fails
    with C{"Hook script execution error: ..."}.

Ours on top (★): a script still running after the NodeD's C{--hooks-timeout}
(default L{DEFAULT_TIMEOUT} s, below the RPC's own limit) is killed with its
whole session and fails with a message saying so, instead of holding the
job for the RPC's 15 minutes; a phase directory that exists but cannot be
searched (no C{x} bit: an admin's half-done change) fails the phase with a
clear message instead of silently running nothing.  Every script run is a
line in the NodeD log (Ganeti keeps no hooks log file of its own).
"""

from __future__ import annotations

import os
import re
import signal
import stat
from typing import Any, Callable

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.error import ProcessDone
from twisted.internet.protocol import ProcessProtocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti.noded.dispatch import handler
from ganeti.noded.failure import RpcFailure
from ganeti.paths import Paths
from ganeti.rpc import procedures

#: Ganeti's C{HKR_*} statuses of one script.
HKR_SKIP = 0
HKR_FAIL = 1
HKR_SUCCESS = 2
#: The phases (Ganeti's C{HOOKS_PHASE_*}).
PHASES = ("pre", "post")
#: Names of scripts that may run (Ganeti's C{EXT_PLUGIN_MASK}).
NAME_MASK = re.compile(r"^[a-zA-Z0-9_-]+$")
#: What an C{hpath} may be (a single path component: no way out of the hooks dir).
HPATH_MASK = re.compile(r"^[a-zA-Z0-9_-]+$")
#: Seconds a hook script may run before it is killed (ours; Ganeti has no limit).
DEFAULT_TIMEOUT = 300.0
#: C{PATH} of every hook (Ganeti's C{HOOKS_PATH})
HOOKS_PATH = "/sbin:/bin:/usr/sbin:/usr/bin"
#: Output kept per script (bytes, the end of it).
MAX_OUTPUT = 256 * 1024
#: How a script runs in a session of its own, so a timeout kills its children too.
SETSID = "/usr/bin/setsid"


def check_request(hpath: Any, phase: Any, env: Any) -> dict[str, str]:
    """The request's environment, or L{RpcFailure} for input that does not fit."""
    if not isinstance(hpath, str) or not HPATH_MASK.match(hpath):
        raise RpcFailure("Invalid hooks path %.100r" % (hpath,))
    if phase not in PHASES:
        raise RpcFailure("Unknown hooks phase '%.20s'" % (phase,))
    if not isinstance(env, dict):
        raise RpcFailure("The hooks environment must be a mapping")
    clean: dict[str, str] = {}
    for key, value in env.items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise RpcFailure("Invalid hooks environment variable %.100r" % (key,))
        text = value if isinstance(value, str) else str(value)
        if "\0" in text:
            raise RpcFailure("Hooks environment variable %s holds a NUL byte" % key)
        clean[key] = text
    return clean


def phase_dir(paths: Paths, hpath: str, phase: str) -> tuple[str, str]:
    """C{(subdir, absolute path)} of the scripts of C{hpath}'s C{phase}."""
    subdir = "%s-%s.d" % (hpath, phase)
    return subdir, os.path.join(paths.hooks_dir, subdir)


def runnable(path: str, name: str) -> bool:
    """Ganeti's test: a good name and an executable regular file."""
    if NAME_MASK.match(name) is None:
        return False
    return os.path.isfile(path) and os.access(path, os.X_OK)


def searchable(path: str) -> bool:
    """Whether the directory can be entered (for root too: some C{x} bit set)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return bool(mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)) and os.access(path, os.R_OK | os.X_OK)


def decode_output(data: bytes) -> str:
    """The script's output as text, stripped (undecodable bytes escaped)."""
    return data.decode("utf-8", "backslashreplace").strip()


class _Script(ProcessProtocol):
    """One hook script: C{done} fires with C{(exit code or None, output bytes, timed out)}."""

    def __init__(self) -> None:
        self.done: Deferred[tuple[int | None, bytes, bool]] = Deferred()
        self._out: list[bytes] = []
        self._err: list[bytes] = []
        self._size = 0
        self.timed_out = False

    def connectionMade(self) -> None:
        self.transport.closeStdin()  # type: ignore[union-attr]

    def _keep(self, chunks: list[bytes], data: bytes) -> None:
        self._size += len(data)
        chunks.append(data)
        while self._size > MAX_OUTPUT and len(chunks) > 1:
            self._size -= len(chunks.pop(0))

    def outReceived(self, data: bytes) -> None:
        self._keep(self._out, data)

    def errReceived(self, data: bytes) -> None:
        self._keep(self._err, data)

    def processEnded(self, reason: Failure) -> None:
        value = reason.value
        code: int | None
        if isinstance(value, ProcessDone):
            code = 0
        else:
            code = getattr(value, "exitCode", None)
        self.done.callback((code, b"".join(self._out) + b"".join(self._err), self.timed_out))


class HooksRunner:
    """Runs the hook scripts of one node root (the C{hooks_runner} procedure).

    @param timeout: seconds a script may run before it is killed
    """

    log = Logger()

    def __init__(self, paths: Paths, reactor: Any, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.paths = paths
        self._reactor = reactor
        self.timeout = timeout

    @handler(procedures.hooks_runner)
    async def hooks_runner(self, hpath: str, phase: str, env: dict[str, str]) -> list[list[Any]]:
        clean = check_request(hpath, phase, env)
        return await self.run_hooks(hpath, phase, clean)

    async def run_hooks(self, hpath: str, phase: str, env: dict[str, str]) -> list[list[Any]]:
        """Ganeti's C{RunHooks}: C{[[<subdir>/<name>, status, output], ...]}."""
        subdir, directory = phase_dir(self.paths, hpath, phase)
        if not os.path.isdir(directory):
            return []
        if not searchable(directory):
            self.log.warn("hooks: {dir} is not searchable: not run", dir=directory)
            return [[subdir, HKR_FAIL, "Hook script execution error: the hooks directory %s is not searchable"
                     " (mode %o): make it executable or remove it" % (directory, os.stat(directory).st_mode & 0o7777)]]
        try:
            names = sorted(name for name in os.listdir(directory) if not name.startswith("."))
        except OSError as e:
            self.log.warn("hooks: cannot list {dir}: {e}", dir=directory, e=e)
            return []
        results: list[list[Any]] = []
        for name in names:
            path = os.path.join(directory, name)
            script = "%s/%s" % (subdir, name)
            if not runnable(path, name):
                results.append([script, HKR_SKIP, ""])
                continue
            status, output = await self._run_one(path, env)
            self.log.info("hooks: {script} {status}", script=script,
                          status={HKR_SUCCESS: "succeeded", HKR_FAIL: "failed"}[status])
            results.append([script, status, output])
        return results

    async def _run_one(self, path: str, env: dict[str, str]) -> tuple[int, str]:
        protocol = _Script()
        argv = [SETSID, path] if os.access(SETSID, os.X_OK) else [path]
        try:
            transport = self._reactor.spawnProcess(protocol, argv[0], argv, env=env, path="/")
        except Exception as e:
            return HKR_FAIL, "Hook script execution error: %s" % e

        def kill() -> None:
            protocol.timed_out = True
            self.log.warn("hooks: {path} still running after {timeout}s: killed", path=path, timeout=self.timeout)
            pid = getattr(transport, "pid", None)
            if pid is not None and argv[0] == SETSID:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                transport.signalProcess("KILL")
            except Exception:  # gone already
                pass
            transport.loseConnection()  # a child holding the pipes must not hold the answer

        timer = self._reactor.callLater(self.timeout, kill)
        try:
            code, output, timed_out = await protocol.done
        finally:
            if timer.active():
                timer.cancel()
        text = decode_output(output)
        if timed_out:
            note = "Hook script execution error: timed out after %g seconds (killed)" % self.timeout
            return HKR_FAIL, (text + "\n" + note) if text else note
        if code == 0:
            return HKR_SUCCESS, text
        return HKR_FAIL, text

    # --- hooks a node runs for itself (Ganeti's RunLocalHooks) -------------------------------
    def _ssconf(self, key: str) -> str | None:
        try:
            with open(self.paths.ssconf(key)) as handle:
                return handle.read().strip() or None
        except OSError:
            return None

    def local_env(self, op_id: str, hpath: str, phase: str, variables: dict[str, Any],
                  pre: dict[str, Any] | None = None) -> dict[str, str]:
        """The environment of a local hook: Ganeti's fixed variables, the
        cluster and master from this node's ssconf, C{variables} prefixed
        C{GANETI_} (pre) or C{GANETI_POST_} (post, with the pre ones too)."""
        env: dict[str, Any] = {"PATH": HOOKS_PATH, "GANETI_HOOKS_VERSION": 2, "GANETI_OP_CODE": op_id,
                               "GANETI_DATA_DIR": "/var/lib/ganeti", "GANETI_HOOKS_PHASE": phase,
                               "GANETI_HOOKS_PATH": hpath, "GANETI_OBJECT_TYPE": "CLUSTER"}
        for key, value in (("GANETI_CLUSTER", self._ssconf("cluster_name")),
                           ("GANETI_MASTER", self._ssconf("master_node"))):
            if value is not None:
                env[key] = value
        prefix = "GANETI_" if phase == "pre" else "GANETI_POST_"
        env.update((prefix + key, value) for key, value in variables.items())
        if pre:
            env.update(("GANETI_" + key, value) for key, value in pre.items())
        return {key: str(value) for key, value in env.items()}

    async def run_local(self, op_id: str, hpath: str, variables: dict[str, Any],
                        action: Callable[[], Any]) -> Any:
        """Ganeti's C{RunLocalHooks} (the master IP's C{master-ip-turnup} and
        C{-turndown}): this node's pre hooks (a failure refuses the procedure
        with their output), C{action()}, then the post hooks (failures logged)."""
        pre = await self.run_hooks(hpath, "pre", self.local_env(op_id, hpath, "pre", variables))
        failed = ["%s: %s" % (script, output or "(no output)") for script, status, output in pre if status == HKR_FAIL]
        if failed:
            raise RpcFailure("Hooks of %s failed: %s" % (hpath, "; ".join(failed)))
        result = await maybeDeferred(action)
        post = await self.run_hooks(hpath, "post", self.local_env(op_id, hpath, "post", variables, variables))
        for script, status, output in post:
            if status == HKR_FAIL:
                self.log.warn("hooks: {script} failed, output: {output}", script=script, output=output)
        return result
