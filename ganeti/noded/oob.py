"""The node procedures C{run_oob} (run an out-of-band helper, L{ganeti.oob})
and C{node_powercycle}.

Ganeti runs the helper on the master (its LU calls the master's NodeD), as
C{<program> <command> <node>}; so do we.  The helper runs in its own
session with C{/dev/null} as input and its output in unlinked temporary
files, so a helper that leaves something running in the background does not
hold the answer back; after C{timeout} seconds its whole session is killed
and the call fails saying so.  Nothing is run when the program is not an
absolute path to an executable file or the command is not one of the
protocol's.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from typing import Any, Callable

from twisted.logger import Logger

from ganeti import oob
from ganeti.backend import osapi
from ganeti.noded.dispatch import handler
from ganeti.noded.failure import RpcFailure
from ganeti.rpc import procedures

#: the environment of a helper (Ganeti's RunCmd: C locale)
_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
#: the node_verify check of the helpers' paths (L{verify_paths})
NV_OOB_PATHS = oob.NV_OOB_PATHS
#: seconds between the answer to C{node_powercycle} and the reboot
POWERCYCLE_DELAY = 5
#: the hypervisor names C{node_powercycle} accepts
HYPERVISORS = ("kvm", "xen-pvm", "xen-hvm", "lxc", "chroot", "fake")
#: bytes of a helper's output kept at most
MAX_OUTPUT = 1024 * 1024
#: longest timeout accepted, seconds
MAX_TIMEOUT = 86400


def check_program(path: Any) -> str:
    """C{path} if it names an executable file by its absolute path.
    @raise RpcFailure: it does not, saying why
    """
    if not isinstance(path, str) or not os.path.isabs(path):
        raise RpcFailure("OOB program %r is not an absolute path" % (path,))
    if not os.path.isfile(path):
        raise RpcFailure("OOB program '%s' does not exist" % path)
    if not os.access(path, os.X_OK):
        raise RpcFailure("OOB program '%s' is not executable" % path)
    return path


def verify_paths(paths: Any) -> list[str | None]:
    """node_verify's C{oob-paths} check (Ganeti's words): per path C{None}
    when it is an executable file, else what is wrong with it."""
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise RpcFailure("oob-paths must be a list of paths")
    out: list[str | None] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError as err:
            out.append("error stating out of band helper: %s" % err)
            continue
        if not stat.S_ISREG(st.st_mode):
            out.append("out of band helper %s is not a file" % path)
        elif not stat.S_IMODE(st.st_mode) & stat.S_IXUSR:
            out.append("out of band helper %s is not executable" % path)
        else:
            out.append(None)
    return out


def _read(handle: Any) -> bytes:
    handle.seek(0)
    return bytes(handle.read(MAX_OUTPUT))


def linux_powercycle() -> None:
    """Reboot the machine at once (Ganeti's C{LinuxPowercycle}): the sysrq
    trigger, else C{reboot -n -f}."""
    try:
        fd = os.open("/proc/sysrq-trigger", os.O_WRONLY)
        try:
            os.write(fd, b"b")
        finally:
            os.close(fd)
    except OSError:
        os.spawnv(os.P_WAIT, "/sbin/reboot", ["reboot", "-n", "-f"])


class OobProcedures:
    """C{run_oob} and C{node_powercycle} for one node (L{ganeti.noded.procedures.NodeProcedures}).

    @param root: the node's root directory: C{node_powercycle} is refused
        unless it is C{/} (a node under another root shares its machine)
    @param powercycle: what reboots the machine (tests replace it)
    """

    log = Logger()

    def __init__(self, reactor: Any, root: str = "/", powercycle: Callable[[], None] = linux_powercycle) -> None:
        self._reactor = reactor
        self._root = root
        self._powercycle = powercycle

    @handler(procedures.node_powercycle)
    def node_powercycle(self, hypervisor: Any, hvparams: Any = None) -> str:
        """Schedule the reboot (Ganeti's C{PowercycleNode}: every hypervisor
        of ours powercycles the Linux way)."""
        if hypervisor not in HYPERVISORS:
            raise RpcFailure("Unknown hypervisor %r" % (hypervisor,))
        if os.path.realpath(self._root) != "/":
            raise RpcFailure("Refusing to powercycle: this node runs under the root %s and shares its machine with"
                             " other nodes" % self._root)
        self.log.warn("hard powercycle of this node requested: rebooting in {delay} seconds", delay=POWERCYCLE_DELAY)
        self._reactor.callLater(POWERCYCLE_DELAY, self._powercycle)
        return "Reboot scheduled in %d seconds" % POWERCYCLE_DELAY

    @handler(procedures.run_oob)
    async def run_oob(self, oob_program: Any, command: Any, remote_node: Any, timeout: Any) -> Any:
        """Run the helper; its answer decoded (L{oob.decode})."""
        if command not in oob.COMMANDS:
            raise RpcFailure("Unknown out-of-band command %r (known: %s)" % (command, ", ".join(oob.COMMANDS)))
        if not isinstance(remote_node, str) or not remote_node or remote_node.startswith("-"):
            raise RpcFailure("Invalid node name %r for the OOB program" % (remote_node,))
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT:
            raise RpcFailure("OOB timeout must be a number of seconds from 1 to %d, not %r" % (MAX_TIMEOUT, timeout))
        program = check_program(oob_program)
        shown = "%s %s %s" % (program, command, remote_node)
        self.log.info("running out-of-band command '{cmd}' (timeout {timeout}s)", cmd=shown, timeout=timeout)
        protocol = osapi.ScriptProtocol(self._reactor, float(timeout))
        null_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            argv = [sys.executable, "-I", "-S", "-c", osapi._SETSID_EXEC, program, command, remote_node]
            try:
                self._reactor.spawnProcess(protocol, sys.executable, argv, env=dict(_ENV), path="/",
                                           childFDs={0: null_fd, 1: out.fileno(), 2: err.fileno()})
            except Exception as exc:
                raise RpcFailure("'%s' could not be started: %s" % (shown, exc)) from None
            finally:
                os.close(null_fd)
            try:
                await protocol.ended
                failure = None
            except osapi.OSScriptError as exc:
                failure = str(exc)
            stdout, stderr = _read(out), _read(err)
        if failure is not None:
            output = (stdout + stderr).decode("utf-8", "replace").strip()
            if protocol.timed_out:
                raise RpcFailure("'%s' failed with reason 'timeout': it did not end within %s seconds and was killed"
                                 % (shown, timeout))
            raise RpcFailure("'%s' failed with reason '%s'; output: %s" % (shown, failure, output))
        try:
            return oob.decode(stdout)
        except oob.OobError as exc:
            raise RpcFailure("'%s': %s" % (shown, exc)) from None
