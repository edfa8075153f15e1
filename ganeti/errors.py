"""Exceptions shared by every daemon, and their wire encoding.

LUXI and RAPI send an error as C{[ClassName, [args...]]}; Ganeti's Python
client maps C{ClassName} back to a class in C{ganeti.errors} and raises
C{cls(*args)}.  The class names here are Ganeti's so that its tools see the
errors they expect.  AMP (WConfD) carries them as C{Exc(str(original))}.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# OpPrereqError codes (second argument), as Ganeti names them.
ECODE_RESOLVER = "resolver_error"
ECODE_NORES = "insufficient_resources"
ECODE_TEMP_NORES = "temp_insufficient_resources"
ECODE_INVAL = "wrong_input"
ECODE_STATE = "wrong_state"
ECODE_NOENT = "unknown_entity"
ECODE_EXISTS = "already_exists"
ECODE_NOTUNIQUE = "resource_not_unique"
ECODE_FAULT = "internal_error"
ECODE_ENVIRON = "environment_error"


class GenericError(Exception):
    """Base of every error this project raises on purpose."""


class LockError(GenericError):
    """A lock request is malformed or breaks the lock order."""


class PendingRequestError(LockError):
    """The owner already has a different lock request waiting."""


class ConfigurationError(GenericError):
    """The configuration is missing, corrupt or cannot be changed as asked."""


class UnknownEntity(ConfigurationError):
    """No such entity in the configuration (WConfD's AMP layer maps this to its own code)."""


class MacInUse(ConfigurationError):
    """A NIC's MAC address is already used by another instance (or twice).

    Its own error so that a creator can generate another address and retry.
    """


class IpInUse(ConfigurationError):
    """A NIC's IP address is already taken in its network's pool by another NIC.

    Its own error so that a creator drawing from the pool can draw again.
    """


class ConfigVerifyError(ConfigurationError):
    """A change would leave the configuration inconsistent.

    C{errors} lists every problem found, one sentence each.
    """

    def __init__(self, msg: str, errors: list[str] | None = None) -> None:
        super().__init__(msg, list(errors or []))
        self.msg = msg
        self.errors = list(errors or [])

    def __str__(self) -> str:
        if not self.errors:
            return self.msg
        return "%s: %s" % (self.msg, "; ".join(self.errors))


class ConfigVersionMismatch(ConfigurationError):
    """config.data has a version this code does not read."""


class ProgrammerError(GenericError):
    """An internal invariant was broken."""


class OpPrereqError(GenericError):
    """A precondition of an operation does not hold (second arg: ECODE_*)."""


class OpExecError(GenericError):
    """An operation failed while it ran."""


class HooksFailure(GenericError):
    """Hooks could not be run (no node answered the pre phase)."""


class HooksAbort(HooksFailure):
    """A pre-phase hook failed: C{args[0]} is C{[(node, script, output), ...]}."""


class JobLost(GenericError):
    """The job is not known (any more)."""


class JobQueueError(GenericError):
    """The job queue cannot take the request."""


class JobQueueDrainError(JobQueueError):
    """The queue is drained: no new jobs."""


class JobQueueFull(JobQueueError):
    """Too many jobs in the queue."""


class LuxiError(GenericError):
    """A LUXI request could not be handled."""


class QueryFilterParseError(OpPrereqError):
    """A query filter is malformed."""


class ParameterError(GenericError):
    """A parameter is missing or has the wrong type."""


class RapiTestResult(GenericError):
    """Result of a RAPI test call (compatibility name)."""


_BY_NAME: dict[str, type[GenericError]] = {
    cls.__name__: cls
    for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, GenericError)
}


def encode(exc: BaseException) -> list[Any]:
    """Encode an exception as Ganeti's C{[ClassName, [args...]]}.

    Exceptions that are not ours travel as C{GenericError} with their text,
    so a client never sees a Python class name it cannot map.
    """
    if isinstance(exc, GenericError):
        return [type(exc).__name__, [_plain(a) for a in exc.args]]
    return ["GenericError", ["%s: %s" % (type(exc).__name__, exc)]]


def decode(value: Any) -> GenericError:
    """Turn a wire-encoded error back into an exception instance.

    Unknown shapes become a L{LuxiError} that carries the raw value.
    """
    if (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], (list, tuple))
    ):
        cls = _BY_NAME.get(value[0], GenericError)
        try:
            return cls(*value[1])
        except TypeError:
            return GenericError(*value[1])
    return LuxiError(value)


def _plain(value: Any) -> Any:
    """Make an exception argument JSON-safe."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)
