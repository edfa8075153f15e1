"""How the gnt-* tools report errors: Ganeti's C{FormatError}.

L{format_error} gives the exit status and the text Ganeti prints for an
error; L{decode_error} turns the C{[ClassName, [args...]]} a failed job
records back into an exception (L{RemoteError} for classes only the server
side knows).  Standard library plus L{ganeti.errors}.
"""

from __future__ import annotations

from ganeti import errors
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class JobSubmitted(Exception):
    """A job was submitted with C{--submit}: not an error, the tool prints
    C{JobID: <id>} and exits 0."""


class JobCanceled(errors.GenericError):
    """The job followed was canceled (Ganeti's C{JobCanceled})."""


class JobOutcomeUnknown(errors.GenericError):
    """A job was submitted and followed, and the master went away for longer
    than the client waits: how it ends is unknown (not failed).

    C{args}: the job id, and why it could not be followed."""


class RemoteError(errors.GenericError):
    """An encoded error whose class this project does not define
    (C{TagError}, C{HooksAbort}, ...); keeps Ganeti's class name."""

    def __init__(self, name: str, *args: Any) -> None:
        super().__init__(*args)
        self.ganeti_name = name


def decode_error(value: Any) -> errors.GenericError | None:
    """The exception encoded as C{[ClassName, [args...]]}, else C{None}."""
    if not (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], (list, tuple))
    ):
        return None
    exc = errors.decode(value)
    if type(exc).__name__ != value[0]:
        return RemoteError(value[0], *value[1])
    return exc


# Ganeti's error hierarchy, for classes only the server side knows.
_PARENTS = {
    "HooksAbort": "HooksFailure",
    "JobQueueDrainError": "JobQueueError",
    "JobQueueFull": "JobQueueError",
    "ConfigVerifyError": "ConfigurationError",
    "ConfigVersionMismatch": "ConfigurationError",
    "QueryFilterParseError": "OpPrereqError",
}


def _error_names(err: BaseException) -> set[str]:
    names = {cls.__name__ for cls in type(err).__mro__}
    name = getattr(err, "ganeti_name", None)
    while name:
        names.add(name)
        name = _PARENTS.get(name)
    return names


def format_error(err: BaseException) -> tuple[int, str]:
    """Ganeti's C{FormatError}: the exit status and the text for C{err}."""
    names = _error_names(err)
    msg = str(err)
    args = err.args
    code = EXIT_FAILURE
    if "JobSubmitted" in names:
        return EXIT_SUCCESS, "JobID: %s" % args[0]
    if "JobOutcomeUnknown" in names:
        return EXIT_FAILURE, "Outcome unknown, job %s: check with gnt-job info %s\n(%s)" % (args[0], args[0], args[1])
    if "ConfigurationError" in names:
        text = "Corrupt configuration file: %s\nAborting." % msg
        code = 2
    elif "HooksAbort" in names:
        lines = ["Failure: hooks execution failed:"]
        for entry in args[0] if args and isinstance(args[0], (list, tuple)) else []:
            node, script, out = (list(entry) + [None, None, None])[:3]
            if out:
                lines.append("  node: %s, script: %s, output: %s" % (node, script, out))
            else:
                lines.append("  node: %s, script: %s (no output)" % (node, script))
        text = "\n".join(lines)
    elif "HooksFailure" in names:
        text = "Failure: hooks general failure: %s" % msg
    elif "ResolverError" in names:
        text = "Failure: can't resolve hostname '%s'" % (args[0] if args else msg)
    elif "QueryFilterParseError" in names:
        text = "Error while parsing query filter: %s" % (args[0] if args else msg)
    elif "OpPrereqError" in names:
        if len(args) == 2:
            text = "Failure: prerequisites not met for this operation:\nerror type: %s, error details:\n%s" % (
                args[1],
                args[0],
            )
        else:
            text = "Failure: prerequisites not met for this operation:\n%s" % msg
    elif "OpExecError" in names:
        text = "Failure: command execution error:\n%s" % msg
    elif "TagError" in names:
        text = "Failure: invalid tag(s) given:\n%s" % msg
    elif "JobQueueDrainError" in names:
        text = "Failure: the job queue is marked for drain and doesn't accept new requests"
    elif "JobQueueFull" in names:
        text = "Failure: the job queue is full and doesn't accept new job submissions until old jobs are archived"
    elif "TypeEnforcementError" in names:
        text = "Parameter Error: %s" % msg
    elif "ParameterError" in names:
        text = "Failure: unknown/wrong parameter name '%s'" % msg
    elif "LuxiError" in names:
        if msg.startswith("cannot connect to the master daemon"):
            text = (
                "Cannot communicate with the master daemon.\n"
                "Is the process running and listening for connections?\n(%s)" % msg
            )
        elif "timed out" in msg:
            text = (
                "Timeout while talking to the master daemon. Jobs might have been submitted and will"
                " continue to run even if the call timed out. Useful commands in this situation are"
                ' "gnt-job list", "gnt-job cancel" and "gnt-job watch". Error:\n%s' % msg
            )
        else:
            text = "Unhandled protocol error while talking to the master daemon:\n%s" % msg
    elif "JobLost" in names:
        text = "Error checking job status: %s" % msg
    elif "GenericError" in names:
        text = "Unhandled Ganeti error: %s" % msg
    else:
        text = "Unhandled exception: %s" % msg
    return code, text.rstrip("\n")
