"""Ganeti's OS interface: the OS definitions of a node and their scripts.

An OS is a directory C{<search dir>/<name>} holding:
  - C{ganeti_api_version}: the OS API versions it speaks, one per line;
    we speak L{API_VERSIONS} and use the highest one both sides know;
  - the executable scripts C{create} (or C{create_untrusted}, which makes
    the OS untrusted), C{import}, C{export} and C{rename}; C{verify} is
    optional here (Ganeti requires it from API 20 on);
  - optional C{variants.list} (one variant per line, the first is the
    default) and C{parameters.list} (C{<name> <description>} per line).

The search path is the node's C{<root>/srv/ganeti/os}, then the OS
definitions shipped with this package (L{SHIPPED_DIR}: C{noop}, C{image}).
For a name, the first search directory holding it wins, valid or not.

A script runs in the OS directory with a clean environment describing the
instance (L{script_environment}), in its own session so that a timeout can
kill it and everything it started; stdout and stderr go to a log file
C{<log dir>/os/<op>-<os>-<instance>-<time>.log}, whose last lines are
quoted when the script fails.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from typing import Any, Callable, Iterable, Mapping, cast

import attrs
from twisted.internet import defer
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.interfaces import IProcessTransport, IReactorTime
from twisted.internet.protocol import ProcessProtocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti import errors
from ganeti.reactors import ITimeProcessReactor

#: OS API versions we speak, highest first
API_VERSIONS = (20, 15)
#: the first API version with variants
API_VARIANTS = 15
#: the first API version with OS parameters
API_PARAMETERS = 20

API_FILE = "ganeti_api_version"
VARIANTS_FILE = "variants.list"
PARAMETERS_FILE = "parameters.list"

SCRIPT_CREATE = "create"
SCRIPT_CREATE_UNTRUSTED = "create_untrusted"
SCRIPT_IMPORT = "import"
SCRIPT_EXPORT = "export"
SCRIPT_RENAME = "rename"
SCRIPT_VERIFY = "verify"

#: scripts every OS must have (besides one of the two create scripts)
REQUIRED_SCRIPTS = (SCRIPT_IMPORT, SCRIPT_EXPORT, SCRIPT_RENAME)
OPTIONAL_SCRIPTS = (SCRIPT_VERIFY,)

#: the OS definitions that ship with this package
SHIPPED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "os")

#: PATH of the scripts (their environment is built from scratch)
SCRIPT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#: seconds a script may run, per operation (below the RPC timeouts, so
#: that the master hears why)
TIMEOUTS = {SCRIPT_CREATE: 86400 - 600, SCRIPT_RENAME: 3600 - 60, SCRIPT_IMPORT: 86400 - 600,
            SCRIPT_EXPORT: 86400 - 600, SCRIPT_VERIFY: 300}
#: lines of the log quoted in a failure
TAIL_LINES = 20
#: largest OS definition file read (variants, parameters, API versions)
MAX_LIST_FILE = 64 * 1024

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ENV_KEY_RE = re.compile(r"[^A-Za-z0-9_]")

#: run by the interpreter: start a new session, then become the script
_SETSID_EXEC = "import os, sys; os.setsid(); os.execv(sys.argv[1], sys.argv[1:])"


class InvalidOS(errors.OpExecError):
    """An OS that does not exist here or is not a valid definition."""


class OSScriptError(errors.OpExecError):
    """An OS script failed, timed out or could not be started."""


@attrs.frozen
class OSDefinition:
    """One OS definition found on this node.

    @ivar api_versions: the versions the OS declares, in file order
    @ivar scripts: C{{script name: path}} of the executable scripts present
    @ivar parameters: C{[(name, description)]} from C{parameters.list}
    """

    name: str
    path: str
    api_versions: tuple[int, ...]
    variants: tuple[str, ...]
    parameters: tuple[tuple[str, str], ...]
    scripts: Mapping[str, str]
    trusted: bool

    @property
    def api_version(self) -> int:
        """The highest API version both the OS and we speak."""
        return max(v for v in self.api_versions if v in API_VERSIONS)

    def script(self, which: str) -> str:
        """The path of script C{which}; the create script of an untrusted OS
        is C{create_untrusted}.
        @raise InvalidOS: the OS has no such script
        """
        if which == SCRIPT_CREATE and not self.trusted:
            which = SCRIPT_CREATE_UNTRUSTED
        try:
            return self.scripts[which]
        except KeyError:
            raise InvalidOS("OS %s has no %s script" % (self.name, which)) from None


# --- finding and reading definitions ------------------------------------------------


def search_path(paths: Any) -> list[str]:
    """Where OS definitions are looked for on the node at C{paths}, in order."""
    return [paths.os_search_dir, SHIPPED_DIR]


def split_name(os_name: str) -> tuple[str, str]:
    """C{"name+variant"} -> C{("name", "variant")} (variant possibly empty)."""
    name, _, variant = os_name.partition("+")
    return name, variant


def check_name(name: Any) -> str:
    """C{name} if it can be an OS name (a plain directory name).
    @raise InvalidOS: otherwise
    """
    if not isinstance(name, str) or not _NAME_RE.match(name) or len(name) > 255:
        raise InvalidOS("Invalid OS name %.100r" % (name,))
    return name


def _read_lines(path: str) -> list[str] | None:
    """The non-empty, stripped lines of C{path}; C{None} if it is missing."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_LIST_FILE + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidOS("cannot read %s: %s" % (path, exc.strerror)) from None
    if len(data) > MAX_LIST_FILE:
        raise InvalidOS("%s is larger than %d bytes" % (path, MAX_LIST_FILE))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidOS("%s is not UTF-8 text" % path) from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def load(directory: str, name: str) -> OSDefinition:
    """Read the OS definition C{directory/name}.

    @raise InvalidOS: with the reason it is not a valid definition
    """
    check_name(name)
    path = os.path.join(directory, name)
    if not os.path.isdir(path):
        raise InvalidOS("OS %s: %s is not a directory" % (name, path))
    lines = _read_lines(os.path.join(path, API_FILE))
    if lines is None:
        raise InvalidOS("OS %s: %s is missing" % (name, API_FILE))
    try:
        versions = tuple(int(line) for line in lines)
    except ValueError:
        raise InvalidOS("OS %s: %s must hold one integer per line" % (name, API_FILE)) from None
    if not any(v in API_VERSIONS for v in versions):
        raise InvalidOS(
            "OS %s: API version mismatch (the OS speaks %s, this node %s)"
            % (name, ", ".join(map(str, versions)) or "none", ", ".join(map(str, API_VERSIONS)))
        )
    scripts: dict[str, str] = {}
    for script in (SCRIPT_CREATE, SCRIPT_CREATE_UNTRUSTED) + REQUIRED_SCRIPTS + OPTIONAL_SCRIPTS:
        script_path = os.path.join(path, script)
        if not os.path.lexists(script_path):
            continue
        if not os.path.isfile(script_path):
            raise InvalidOS("OS %s: %s is not a regular file" % (name, script_path))
        if not os.access(script_path, os.X_OK):
            raise InvalidOS("OS %s: %s is not executable" % (name, script_path))
        scripts[script] = script_path
    missing = [s for s in REQUIRED_SCRIPTS if s not in scripts]
    if SCRIPT_CREATE not in scripts and SCRIPT_CREATE_UNTRUSTED not in scripts:
        missing.insert(0, SCRIPT_CREATE)
    if missing:
        raise InvalidOS("OS %s: missing script(s) %s" % (name, ", ".join(missing)))
    api = max(v for v in versions if v in API_VERSIONS)
    variants: tuple[str, ...] = ()
    if api >= API_VARIANTS:
        variants = tuple(_read_lines(os.path.join(path, VARIANTS_FILE)) or ())
    parameters: list[tuple[str, str]] = []
    if api >= API_PARAMETERS:
        for line in _read_lines(os.path.join(path, PARAMETERS_FILE)) or ():
            pname, _, doc = line.partition(" ")
            parameters.append((pname, doc.strip()))
    return OSDefinition(
        name=name,
        path=path,
        api_versions=versions,
        variants=variants,
        parameters=tuple(parameters),
        scripts=scripts,
        trusted=SCRIPT_CREATE in scripts,
    )


def find(paths: Any, os_name: str) -> tuple[OSDefinition, str]:
    """The definition of C{os_name} (C{name[+variant]}) and the variant to use.

    An OS without variants ignores the variant part; one with variants
    takes its first when none is given and refuses one it does not list.
    @raise InvalidOS: the OS is unknown, invalid or lacks the variant
    """
    if not isinstance(os_name, str) or not os_name:
        raise InvalidOS("No OS given")
    name, variant = split_name(os_name)
    check_name(name)
    for directory in search_path(paths):
        if os.path.isdir(os.path.join(directory, name)):
            definition = load(directory, name)
            break
    else:
        raise InvalidOS("OS %s not found in %s" % (name, ", ".join(search_path(paths))))
    if definition.api_version < API_VARIANTS or not definition.variants:
        return definition, ""
    if not variant:
        return definition, definition.variants[0]
    if variant not in definition.variants:
        raise InvalidOS("OS %s has no variant %r (it has: %s)" % (name, variant, ", ".join(definition.variants)))
    return definition, variant


def diagnose(paths: Any) -> list[list[Any]]:
    """Every OS directory in the search path, valid or not, in Ganeti's
    C{os_diagnose} shape: C{[name, path, status, diagnose, variants,
    parameters, api_versions, trusted]}.
    """
    result: list[list[Any]] = []
    for directory in search_path(paths):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            if not os.path.isdir(path) or not _NAME_RE.match(name):
                continue
            try:
                found = load(directory, name)
            except InvalidOS as exc:
                result.append([name, path, False, str(exc), [], [], [], False])
                continue
            result.append([
                name, path, True, "", list(found.variants),
                [list(p) for p in found.parameters], list(found.api_versions), found.trusted,
            ])
    return result


# --- the script environment ---------------------------------------------------------


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return str(value)


def _env_key(name: str) -> str:
    return _ENV_KEY_RE.sub("_", name)


def script_environment(
    definition: OSDefinition,
    variant: str,
    instance: Any,
    disks: Iterable[tuple[Any, str]],
    debug: int = 0,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of an OS script run for C{instance}.

    @param instance: an L{ganeti.objects.Instance} with filled parameters
    @param disks: C{(disk record, path on this node)} for each disk, in order
    @param extra: added last (e.g. C{OLD_INSTANCE_NAME})
    """
    api = definition.api_version
    env = {
        "PATH": SCRIPT_PATH,
        "OS_API_VERSION": "%d" % api,
        "OS_NAME": definition.name,
        "OS_VARIANT": variant,
        "DEBUG_LEVEL": "%d" % debug,
        "INSTANCE_NAME": _text(instance.name),
        "INSTANCE_OS": _text(instance.os),
        "HYPERVISOR": _text(instance.hypervisor),
    }
    if instance.uuid:
        env["INSTANCE_UUID"] = instance.uuid
    hvparams = instance.hvparams or {}
    disk_list = list(disks)
    env["DISK_COUNT"] = "%d" % len(disk_list)
    for index, (disk, path) in enumerate(disk_list):
        prefix = "DISK_%d_" % index
        env[prefix + "PATH"] = path
        env[prefix + "ACCESS"] = _text(disk.mode or "rw")
        if disk.uuid:
            env[prefix + "UUID"] = disk.uuid
        if disk.name:
            env[prefix + "NAME"] = disk.name
        if hvparams.get("disk_type"):
            env[prefix + "FRONTEND_TYPE"] = _text(hvparams["disk_type"])
        logical_id = disk.logical_id
        if disk.dev_type in ("file", "sharedfile", "gluster") and isinstance(logical_id, list) and logical_id:
            env[prefix + "BACKEND_TYPE"] = "file:%s" % _text(logical_id[0])
        else:
            env[prefix + "BACKEND_TYPE"] = "block"
    nics = instance.nics or []
    env["NIC_COUNT"] = "%d" % len(nics)
    for index, nic in enumerate(nics):
        prefix = "NIC_%d_" % index
        params = nic.nicparams or {}
        env[prefix + "MAC"] = _text(nic.mac)
        if nic.ip:
            env[prefix + "IP"] = _text(nic.ip)
        env[prefix + "MODE"] = _text(params.get("mode"))
        if params.get("link"):
            env[prefix + "LINK"] = _text(params["link"])
            if params.get("mode") == "bridged":
                env[prefix + "BRIDGE"] = _text(params["link"])
        if params.get("vlan"):
            env[prefix + "VLAN"] = _text(params["vlan"])
        if nic.uuid:
            env[prefix + "UUID"] = nic.uuid
        if nic.name:
            env[prefix + "NAME"] = nic.name
        if hvparams.get("nic_type"):
            env[prefix + "FRONTEND_TYPE"] = _text(hvparams["nic_type"])
    for kind, params in (("BE", instance.beparams), ("HV", hvparams)):
        for key, value in (params or {}).items():
            env["INSTANCE_%s_%s" % (kind, _env_key(key))] = _text(value)
    if api >= API_PARAMETERS:
        merged = dict(instance.osparams or {})
        merged.update(instance.osparams_private or {})
        for key, value in merged.items():
            env["OSP_%s" % _env_key(key.upper())] = _text(value)
    env.update(extra or {})
    return env


# --- running scripts -----------------------------------------------------------------


class ScriptProtocol(ProcessProtocol):
    """Waits for one script; kills its whole session after C{timeout} seconds.

    The script's output goes straight to a file (not through this
    protocol), so L{ended} fires when the script exits even if something it
    started in the background keeps the file open.

    @ivar ended: fires with C{None} on exit status 0, fails with
        L{OSScriptError} (the reason, without the log) otherwise
    """

    @property
    def _connected(self) -> IProcessTransport:
        """The transport, in methods that run only while connected."""
        return cast(IProcessTransport, self.transport)

    def __init__(self, clock: IReactorTime, timeout: float, kill_group: Any = os.killpg) -> None:
        self._clock = clock
        self._timeout = timeout
        self._kill_group = kill_group
        self._timer: Any = None
        self.timed_out = False
        self.ended: defer.Deferred[None] = defer.Deferred()

    def connectionMade(self) -> None:
        self._timer = self._clock.callLater(self._timeout, self._expire)

    def _expire(self) -> None:
        self.timed_out = True
        pid = getattr(self.transport, "pid", None)
        if pid:
            try:
                self._kill_group(pid, signal.SIGKILL)  # the script leads its own session
                return
            except OSError:
                pass
        try:
            self._connected.signalProcess("KILL")
        except Exception:
            pass

    def processEnded(self, reason: Failure) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        problem = exit_problem(reason)
        if self.timed_out:
            self.ended.errback(OSScriptError("timed out after %g seconds and was killed" % self._timeout))
        elif problem is None:
            self.ended.callback(None)
        else:
            self.ended.errback(OSScriptError(problem))


def exit_problem(reason: Failure) -> str | None:
    """How a child process ended, from C{processEnded}'s C{reason}: C{None}
    when it exited 0, else C{"killed by signal N"}, C{"exit code N"} or the
    failure's text."""
    if reason.check(ProcessDone):
        return None
    if reason.check(ProcessTerminated):
        value = reason.value
        if value.signal is not None:
            return "killed by signal %d" % value.signal
        return "exit code %s" % value.exitCode
    return str(reason.value)


def log_tail(path: str, lines: int = TAIL_LINES) -> str:
    """The last C{lines} lines of the file at C{path} (empty if unreadable)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            data = handle.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def _safe_component(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]", "_", text)[:100] or "_"


def open_log(log_dir: str, operation: str, os_name: str, instance_name: str, clock: Callable[[], float] = time.time) -> tuple[str, int]:
    """Create C{<log_dir>/<op>-<os>-<instance>-<time>.log}; its path and a
    write descriptor."""
    os.makedirs(log_dir, mode=0o750, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d_%H_%M_%S", time.localtime(clock()))
    base = "%s-%s-%s-%s" % (_safe_component(operation), _safe_component(os_name),
                            _safe_component(instance_name), stamp)
    for attempt in range(1000):
        path = os.path.join(log_dir, base + (".%d" % attempt if attempt else "") + ".log")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o640)
        except FileExistsError:
            continue
        return path, fd
    raise OSScriptError("cannot create a log file %s*.log" % os.path.join(log_dir, base))


class OSRunner:
    """Runs OS scripts for the node at C{paths} with C{reactor}.

    @param timeouts: seconds per script name, overriding L{TIMEOUTS}
    """

    log = Logger()

    def __init__(self, paths: Any, reactor: ITimeProcessReactor, timeouts: Mapping[str, float] | None = None) -> None:
        self.paths = paths
        self._reactor = reactor
        self._timeouts: dict[str, float] = dict(TIMEOUTS)
        self._timeouts.update(timeouts or {})

    async def run(
        self,
        definition: OSDefinition,
        script: str,
        env: Mapping[str, str],
        instance_name: str,
        os_name: str,
        args: Iterable[str] = (),
    ) -> str:
        """Run C{script} of C{definition}; the path of its log.

        @raise OSScriptError: it did not exit with status 0; the message
            names the log and quotes its last lines
        """
        executable = definition.script(script)
        log_path, log_fd = open_log(self.paths.os_log_dir, script, os_name, instance_name)
        try:
            null_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            os.close(log_fd)
            raise
        protocol = ScriptProtocol(self._reactor, self._timeouts.get(script, TIMEOUTS[SCRIPT_CREATE]))
        argv = [sys.executable, "-I", "-S", "-c", _SETSID_EXEC, executable, *args]
        self.log.info("running {script} of OS {os} for instance {instance}, log {log}",
                      script=script, os=os_name, instance=instance_name, log=log_path)
        try:
            self._reactor.spawnProcess(
                protocol, sys.executable, argv, env=dict(env), path=definition.path,
                childFDs={0: null_fd, 1: log_fd, 2: log_fd},
            )
        except Exception as exc:
            raise OSScriptError("cannot start %s: %s" % (executable, exc)) from None
        finally:
            os.close(null_fd)
            os.close(log_fd)
        try:
            await protocol.ended
        except OSScriptError as exc:
            tail = log_tail(log_path)
            raise OSScriptError(
                "%s script of OS %s for instance %s failed (%s); the log %s ends with:\n%s"
                % (script, os_name, instance_name, exc, log_path, tail or "(no output)")
            ) from None
        return log_path
