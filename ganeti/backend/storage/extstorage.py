"""Ganeti's ExtStorage interface on a node: providers and their scripts.

A provider is a directory named after it, the first one found on the
search path (L{search_path}): Ganeti's C{/srv/ganeti/extstorage},
C{/usr/local/lib/ganeti/extstorage}, C{/usr/lib/ganeti/extstorage} and
C{/usr/share/ganeti/extstorage}, each under the node's root, then the
providers shipped with this package (L{SHIPPED_DIR}: C{loopback}), which an
admin's copy of the same name earlier on the path overrides.  It holds:

  - the executables C{create attach detach remove grow setinfo verify}
    (required) and C{snapshot open close} (optional: absent, the action is
    skipped), regular files with the owner's execute bit;
  - C{parameters.list}: C{<name> <description>} per line.

A script runs with no arguments, in the provider's directory, with noded's
environment plus C{LC_ALL=C} and the volume's variables
(L{environment}), in its own session so that a timeout kills everything it
started.  C{attach} prints the device path on its first line (possibly
empty) and URIs on the following ones (L{parse_attach}); every other
action's output goes to C{<log dir>/extstorage/<action>-<provider>-<volume>-
<time>.log}, whose last 20 lines are quoted when it fails.

Unlike Ganeti 3.0, the disk's parameters are checked against
C{parameters.list} (L{check_params}): an unknown one is refused before any
script runs.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from typing import Any, Mapping

import attrs
from twisted.logger import Logger

from ganeti import errors
from ganeti.backend import osapi

#: the provider directories Ganeti's Debian build searches, relative to the root
SEARCH_DIRS = ("srv/ganeti/extstorage", "usr/local/lib/ganeti/extstorage", "usr/lib/ganeti/extstorage",
               "usr/share/ganeti/extstorage")
#: the providers shipped with this package
SHIPPED_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "extstorage")

CREATE, ATTACH, DETACH, REMOVE, GROW, SETINFO, VERIFY = ("create", "attach", "detach", "remove", "grow", "setinfo",
                                                         "verify")
SNAPSHOT, OPEN, CLOSE = "snapshot", "open", "close"
REQUIRED_SCRIPTS = (CREATE, ATTACH, DETACH, REMOVE, GROW, SETINFO, VERIFY)
OPTIONAL_SCRIPTS = (SNAPSHOT, OPEN, CLOSE)
PARAMETERS_FILE = "parameters.list"

#: disk parameters every ext disk may carry besides its provider's own
PARAM_PROVIDER = "provider"
PARAM_ACCESS = "access"
GENERIC_PARAMS = (PARAM_PROVIDER, PARAM_ACCESS)
ACCESS_KERNEL, ACCESS_USER = "kernelspace", "userspace"

#: seconds an action may take before it is killed
TIMEOUT = 300.0
#: lines of a failed action's log quoted in the error
TAIL_LINES = 20
#: longest metadata text handed to setinfo (Ganeti's limit)
MAX_METADATA = 128

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
_PARAM_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_METADATA_BAD = re.compile(r"[^-A-Za-z0-9_+.]")


class ExtStorageError(errors.OpExecError):
    """A provider is missing or invalid, a parameter is refused, or an action failed."""


@attrs.frozen
class Provider:
    """A valid provider: its scripts (C{None} for a missing optional one)
    and its C{[[name, description], ...]} parameters."""

    name: str
    path: str
    scripts: Mapping[str, str | None]
    parameters: list[list[str]]

    @property
    def parameter_names(self) -> list[str]:
        return [p[0] for p in self.parameters]


def check_name(name: Any, what: str = "ExtStorage provider") -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ExtStorageError("Invalid %s name %.100r" % (what, name))
    return name


def search_path(root: str) -> list[str]:
    """Where providers are looked for on the node rooted at C{root}, in order."""
    return [os.path.join(root, d) for d in SEARCH_DIRS] + [SHIPPED_DIR]


def _check_file(directory: str, filename: str, required: bool) -> str | None:
    path = os.path.join(directory, filename)
    try:
        st = os.stat(path)
    except OSError as exc:
        if not required:
            return None
        raise ExtStorageError("File '%s' under path '%s' is missing (%s)"
                              % (filename, directory, exc.strerror or exc)) from None
    if not stat.S_ISREG(st.st_mode):
        raise ExtStorageError("File '%s' under path '%s' is not a regular file" % (filename, directory))
    if filename != PARAMETERS_FILE and not st.st_mode & stat.S_IXUSR:
        raise ExtStorageError("File '%s' under path '%s' is not executable" % (filename, directory))
    return path


def parse_parameters(text: str) -> list[list[str]]:
    """C{parameters.list}: C{[[name, description], ...]}; blank lines skipped.
    @raise ExtStorageError: a malformed parameter name
    """
    out = []
    for line in text.splitlines():
        fields = line.split(None, 1)
        if not fields:
            continue
        if not _PARAM_RE.match(fields[0]):
            raise ExtStorageError("Invalid parameter name %.100r in %s" % (fields[0], PARAMETERS_FILE))
        out.append([fields[0], fields[1].strip() if len(fields) > 1 else ""])
    return out


def load(directory: str, name: str) -> Provider:
    """The provider in C{directory}.
    @raise ExtStorageError: a required file is missing or invalid
    """
    scripts: dict[str, str | None] = {}
    for script in REQUIRED_SCRIPTS + OPTIONAL_SCRIPTS:
        scripts[script] = _check_file(directory, script, script in REQUIRED_SCRIPTS)
    params_path = _check_file(directory, PARAMETERS_FILE, True)
    try:
        with open(params_path or "", encoding="utf-8", errors="replace") as handle:
            parameters = parse_parameters(handle.read())
    except OSError as exc:
        raise ExtStorageError("Error while reading the EXT parameters file at %s: %s"
                              % (params_path, exc.strerror or exc)) from None
    return Provider(name=name, path=directory, scripts=scripts, parameters=parameters)


def find(root: str, name: Any) -> Provider:
    """The provider C{name} on the node rooted at C{root}: the first
    directory of that name on the search path, which must be valid.
    @raise ExtStorageError: not found, or invalid
    """
    check_name(name)
    for base in search_path(root):
        directory = os.path.join(base, name)
        if os.path.isdir(directory):
            try:
                return load(directory, name)
            except ExtStorageError as exc:
                raise ExtStorageError("ExtStorage provider %s is invalid: %s" % (name, exc)) from None
    raise ExtStorageError("Directory for External Storage Provider %s not found in search path (%s)"
                          % (name, ", ".join(search_path(root))))


def diagnose(root: str) -> list[list[Any]]:
    """Every provider directory on the search path, first of a name only,
    as C{extstorage_diagnose} answers: C{[name, path, ok, diagnose,
    parameters]}."""
    seen: set[str] = set()
    out: list[list[Any]] = []
    for base in search_path(root):
        try:
            names = sorted(os.listdir(base))
        except OSError:
            continue
        for name in names:
            directory = os.path.join(base, name)
            if name in seen or not os.path.isdir(directory):
                continue
            seen.add(name)
            try:
                provider = load(directory, check_name(name))
            except ExtStorageError as exc:
                out.append([name, directory, False, str(exc), []])
            else:
                out.append([name, directory, True, "", provider.parameters])
    return out


def check_params(provider: Provider, params: Mapping[str, Any]) -> dict[str, str]:
    """The disk's parameters as strings, all known to C{provider} (or generic).
    @raise ExtStorageError: an unknown parameter or a non-scalar value
    """
    unknown = sorted(k for k in params if k not in GENERIC_PARAMS and k not in provider.parameter_names)
    if unknown:
        raise ExtStorageError("The following ExtStorage parameters are not supported by the ExtStorage provider"
                              " %s: %s (it takes: %s)" % (provider.name, ", ".join(unknown),
                                                          ", ".join(provider.parameter_names) or "none"))
    out = {}
    for key, value in params.items():
        if not isinstance(key, str) or not _PARAM_RE.match(key):
            raise ExtStorageError("Invalid ExtStorage parameter name %.100r" % (key,))
        if not isinstance(value, (str, int, float, bool)) or "\0" in str(value):
            raise ExtStorageError("Invalid value of ExtStorage parameter %s: %.100r" % (key, value))
        out[key] = str(value)
    return out


def environment(vol_name: str, params: Mapping[str, str], *, size: int | None = None, grow: int | None = None,
                metadata: str | None = None, name: str | None = None, uuid: str | None = None,
                snap_name: str | None = None, snap_size: int | None = None, exclusive: bool | None = None,
                base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of an action (Ganeti's C{_ExtStorageEnvironment})
    on top of C{base} (noded's environment by default) and C{LC_ALL=C}."""
    env = dict(os.environ if base is None else base)
    env["LC_ALL"] = "C"
    env["VOL_NAME"] = vol_name
    for key, value in params.items():
        env["EXTP_%s" % key.upper()] = str(value)
    optional = {"VOL_SIZE": size, "VOL_NEW_SIZE": grow, "VOL_METADATA": metadata, "VOL_CNAME": name,
                "VOL_UUID": uuid, "VOL_SNAPSHOT_NAME": snap_name, "VOL_SNAPSHOT_SIZE": snap_size,
                "VOL_OPEN_EXCLUSIVE": exclusive}
    for key, val in optional.items():
        if val is not None:
            env[key] = str(val)
    return env


def parse_attach(output: str) -> tuple[str | None, list[str]]:
    """C{(device path or None, URIs)} from C{attach}'s stdout.
    @raise ExtStorageError: neither a device nor a URI
    """
    lines = output.split("\n")
    dev_path = lines[0].strip() or None
    uris = [line.strip() for line in lines[1:] if line.strip()]
    if dev_path is None and not uris:
        raise ExtStorageError("Neither a block device nor a userspace URI is available")
    if dev_path is not None and not dev_path.startswith("/"):
        raise ExtStorageError("attach printed %.100r, not an absolute device path" % dev_path)
    return dev_path, uris


def kvm_uri(uris: list[str]) -> str | None:
    """The first C{kvm:} URI (case-insensitive), its prefix stripped."""
    for uri in uris:
        if uri[:4].lower() == "kvm:":
            return uri[4:]
    return None


def check_block_device(path: str) -> None:
    """C{path} must be a block device.
    @raise ExtStorageError: it is not
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ExtStorageError("Cannot stat %s: %s" % (path, exc.strerror or exc)) from None
    if not stat.S_ISBLK(st.st_mode):
        raise ExtStorageError("%s is not a block device" % path)


def device_size(path: str) -> int:
    """Size in bytes of the block device (or file) at C{path} (C{blockdev --getsize64})."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def sanitize_metadata(text: str) -> str:
    """Ganeti's SetInfo text: characters outside C{[-A-Za-z0-9_+.]} become
    C{_}, a leading C{-} too, at most L{MAX_METADATA} characters."""
    text = _METADATA_BAD.sub("_", text)
    if text.startswith("-"):
        text = "_" + text[1:]
    return text[:MAX_METADATA]


class _AttachProtocol(osapi.ScriptProtocol):
    """L{osapi.ScriptProtocol} that also keeps stdout (attach's answer)."""

    def __init__(self, clock: Any, timeout: float) -> None:
        super().__init__(clock, timeout)
        self.out: list[bytes] = []

    def outReceived(self, data: bytes) -> None:
        if sum(map(len, self.out)) < 64 * 1024:
            self.out.append(data)


class Runner:
    """Runs provider actions for the node at C{paths} on C{reactor}."""

    log = Logger()

    def __init__(self, paths: Any, reactor: Any, timeout: float = TIMEOUT) -> None:
        self.paths = paths
        self._reactor = reactor
        self.timeout = timeout

    @property
    def log_dir(self) -> str:
        return os.path.join(self.paths.log_dir, "extstorage")

    async def run(self, provider: Provider, action: str, vol_name: str, env: Mapping[str, str]) -> str | None:
        """Run C{action}: C{attach}'s stdout, C{""} for the others, C{None}
        when an optional script is absent (the action is skipped).
        @raise ExtStorageError: the script failed (its log's last lines quoted)
        """
        executable = provider.scripts.get(action)
        if executable is None:
            self.log.info("optional action {action} is not supported by provider {provider}, skipping",
                          action=action, provider=provider.name)
            return None
        null_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        log_path: str | None = None
        if action == ATTACH:
            protocol: osapi.ScriptProtocol = _AttachProtocol(self._reactor, self.timeout)
            log_path, err_fd = osapi.open_log(self.log_dir, action, provider.name, vol_name)
            fds: dict[int, Any] = {0: null_fd, 1: "r", 2: err_fd}
            close = [null_fd, err_fd]
        else:
            protocol = osapi.ScriptProtocol(self._reactor, self.timeout)
            log_path, log_fd = osapi.open_log(self.log_dir, action, provider.name, vol_name)
            fds = {0: null_fd, 1: log_fd, 2: log_fd}
            close = [null_fd, log_fd]
        argv = [sys.executable, "-I", "-S", "-c", osapi._SETSID_EXEC, executable]
        try:
            self._reactor.spawnProcess(protocol, sys.executable, argv, env=dict(env), path=provider.path,
                                       childFDs=fds)
        except Exception as exc:
            raise ExtStorageError("cannot start %s: %s" % (executable, exc)) from None
        finally:
            for fd in close:
                os.close(fd)
        try:
            await protocol.ended
        except osapi.OSScriptError as exc:
            raise ExtStorageError("External storage's %s script failed (%s), last lines of output (%s):\n%s"
                                  % (action, exc, log_path, osapi.log_tail(log_path or "", TAIL_LINES)
                                     or "(no output)")) from None
        if isinstance(protocol, _AttachProtocol):
            return b"".join(protocol.out).decode("utf-8", "replace")
        return ""
