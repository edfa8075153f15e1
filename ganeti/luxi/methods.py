"""Every method LuxiD serves: the LUXI contract (standard library and L{ganeti.errors} only).

Each stub below declares one method (see L{ganeti.contract}): its wire
name, its positional arguments in wire order with their JSON types, its
result type and, in its docstring, what it does (spec/luxi.md section 3).
The same table serves every side:

  - a client builds a typed request with C{methods.NAME.call(...)} (mypy
    checks the arguments against the stub; LuxiD checks their values) and
    runs it: C{LuxiClient.run(request)} returns the result,
    C{AsyncLuxiClient.run(request)} a Deferred of it; the blocking client's
    snake_case methods (C{submit_job}, ...) are L{Blocking} views of the
    same declarations;
  - LuxiD (L{ganeti.luxi.server.DeclaredHandler}) pairs each declaration
    with its C{luxi_<Name>} handler when it starts, refuses to start when
    one is missing or undeclared, and refuses a request whose arguments do
    not fit before the handler runs.

A default makes an argument optional on the wire (C{CancelJob}'s
C{kill}); a L{filled} default is one the client sends for a caller who
leaves it out but the wire requires.  The client always sends every
argument, as Ganeti's does.

Refusals keep the shapes LuxiD has always answered bad requests with: a
wrong number of arguments is C{LuxiError("Wrong number of arguments for X:
expected N, got M")}, an argument of the wrong type is
C{OpPrereqError("X: name must be ..., not ... (argument N)",
"wrong_input")}, which Ganeti's tools print as a bad parameter.

Types are checked strictly (L{ganeti.contract.STRICT}): a flag is a JSON
boolean (C{"false"} and C{1} are not), elements of lists are checked.  A
job id is a number or a string of digits, as Ganeti's tools send either.
"""

# mypy: disable-error-code="empty-body"
# (the stubs are declarations: their bodies are never run)

from __future__ import annotations

from ganeti import contract, errors
from ganeti.contract import ContractError, filled
from ganeti.lighttyping import Generic, ParamSpec, TypeVar, cast
from ganeti.plaintuple import plain_tuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, NamedTuple, Sequence, overload

__all__ = ["TABLE", "Blocking", "ContractError", "Method", "Request", "filled"]

P = ParamSpec("P")
R = TypeVar("R")


if TYPE_CHECKING:

    class Request(NamedTuple, Generic[R]):
        """One LUXI call, ready to send: C{method} with positional C{args}.
        C{R} is the type of the result LuxiD answers."""

        method: str
        args: tuple[Any, ...]

else:
    Request = plain_tuple("Request", ("method", "args"), __name__,
                          "One LUXI call, ready to send: C{method} with positional C{args}.")


class Method(contract.Declaration[P, R]):
    """One LUXI method, declared from a typed stub (see the module docstring)."""

    strictness = contract.STRICT
    kind_name = "method"
    send_all = True

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Request[R]:
        """The request with these arguments (positional or by name), every
        argument given (defaults filled in).  mypy checks their types; LuxiD
        checks their values (a check here would only repeat its answer).

        @raise errors.LuxiError: too many, too few or unknown arguments
        """
        return Request(self.name, self.bind_unchecked(*args, **kwargs))

    def refuse_count(self, message: str, given: int | None = None) -> Exception:
        if given is None:
            return errors.LuxiError(message)
        return errors.LuxiError("Wrong number of arguments for %s: expected %s, got %d" % (self.name, self.arity(), given))

    def refuse_type(self, index: int, argument: contract.Argument, value: Any) -> Exception:
        return errors.OpPrereqError("%s: %s must be %s, not %.100r (argument %d)" % (
            self.name, argument.name, argument.describe(), value, index + 1), errors.ECODE_INVAL)


class Table(contract.Table["Method[Any, Any]"]):
    """The LUXI methods, by wire name."""

    kind_name = "method"

    def declare(self, stub: Callable[P, R]) -> Method[P, R]:
        """Decorator: the stub below declares a method of its name."""
        method = Method(stub)
        self.add(method)
        return method


class Blocking(Generic[P, R]):
    """A method of the blocking client calling a declared method: C{client.NAME(*args)}
    is C{client.run(method.call(*args))}, typed as the stub."""

    def __init__(self, method: Method[P, R]) -> None:
        self.method = method  # its doc is read on first use: importing the client stays cheap

    if TYPE_CHECKING:

        @overload
        def __get__(self, client: None, owner: type) -> Blocking[P, R]: ...

        @overload
        def __get__(self, client: object, owner: type) -> Callable[P, R]: ...

    def __get__(self, client: object, owner: type) -> Blocking[P, R] | Callable[P, R]:
        if client is None:
            return self
        method, run = self.method, cast("Any", client).run

        def bound(*args: P.args, **kwargs: P.kwargs) -> R:
            result: R = run(method.call(*args, **kwargs))
            return result

        bound.__doc__ = method.doc
        return bound


#: Every method LuxiD serves, by name.
TABLE = Table()
declare = TABLE.declare

# ("Any" quoted: typing is not imported when this runs, see ganeti.lighttyping; the contract resolves it)
#: an opcode as a client sends it: C{{"OP_ID": ..., parameter: value, ...}} (opcodes.md)
Opcode = dict[str, "Any"]
#: a job id: Ganeti's tools send a number or a string of digits
JobId = int | str
#: a qlang filter (spec/luxi.md section 4), or C{None} for every item
Filter = list["Any"] | None
#: a row of plain values, in the order of the fields asked for
Row = list["Any"]

#: defaults the client fills in, which the wire requires (see L{filled})
NO_FILTER: Filter = filled(None)
ALL_FIELDS: list[str] | None = filled(None)
NO_LOCKING: bool = filled(False)


# --- jobs -------------------------------------------------------------------------------


@declare
def SubmitJob(ops: list[Opcode]) -> int:
    """Submit one job of opcodes; its id.  Refused with C{JobQueueDrainError}
    while the queue is drained, with C{OpPrereqError} when an opcode is invalid
    (nothing is submitted then)."""


@declare
def SubmitJobToDrainedQueue(ops: list[Opcode]) -> int:
    """Submit one job of opcodes even while the queue is drained; its id."""


@declare
def SubmitManyJobs(jobs: list[list[Opcode]]) -> list[list[Any]]:
    """Submit several jobs at once: C{[[true, id] | [false, message], ...]},
    one per job; one invalid job refuses them all."""


@declare
def WaitForJobChange(job_id: JobId, fields: list[str], prev_job_info: list[Any] | None,
                     prev_log_serial: int | None, timeout: float) -> Any:
    """Wait up to C{timeout} seconds for the job's C{fields} or log to change:
    C{[[values...], [log entries after prev_log_serial...]]}, or C{"nochange"}."""


@declare
def CancelJob(job_id: JobId, kill: bool = False) -> list[Any]:
    """Cancel a job (with C{kill}, also one whose process runs): C{[ok, message]}."""


@declare
def ArchiveJob(job_id: JobId) -> bool:
    """Archive a finished job; whether it was archived."""


@declare
def AutoArchiveJobs(age: float, timeout: float) -> list[int]:
    """Archive the jobs finished C{age} seconds ago or earlier (C{-1}: every
    finished one), for at most C{timeout} seconds: C{[archived, left unchecked]}."""


@declare
def ChangeJobPriority(job_id: JobId, priority: int) -> list[Any]:
    """Change the priority of a job not yet finished: C{[ok, message]}."""


@declare
def QueryJobs(job_ids: Sequence[JobId] | None, fields: list[str]) -> list[Row | None]:
    """A row of C{fields} per job (C{None} or C{[]}: every job; a C{None} row
    for an unknown one)."""


@declare
def SetDrainFlag(flag: bool) -> bool:
    """Drain the job queue (refuse new jobs) or undrain it; C{true}."""


@declare
def PickupJob(job_id: JobId) -> None:
    """Internal to Ganeti's own daemons: always refused with C{GenericError}."""


# --- queries ----------------------------------------------------------------------------


@declare
def Query(what: str, fields: list[str], qfilter: Filter = NO_FILTER) -> dict[str, Any]:
    """Query the items of resource C{what} that match C{qfilter}:
    C{{"fields": [field definitions], "data": [[[status, value], ...], ...]}}."""


@declare
def QueryFields(what: str, fields: list[str] | None = ALL_FIELDS) -> dict[str, Any]:
    """The definitions of C{fields} of resource C{what} (C{None}: all):
    C{{"fields": [field definitions]}}."""


@declare
def QueryInstances(names: list[str], fields: list[str], use_locking: bool = NO_LOCKING) -> list[Row]:
    """A row of C{fields} per instance of C{names} (C{[]}: every one); C{use_locking} is refused."""


@declare
def QueryNodes(names: list[str], fields: list[str], use_locking: bool = NO_LOCKING) -> list[Row]:
    """A row of C{fields} per node of C{names} (C{[]}: every one); C{use_locking} is refused."""


@declare
def QueryGroups(names: list[str], fields: list[str], use_locking: bool = NO_LOCKING) -> list[Row]:
    """A row of C{fields} per node group of C{names} (C{[]}: every one); C{use_locking} is refused."""


@declare
def QueryNetworks(names: list[str], fields: list[str], use_locking: bool = NO_LOCKING) -> list[Row]:
    """A row of C{fields} per network of C{names} (C{[]}: every one); C{use_locking} is refused."""


@declare
def QueryExports(nodes: list[str] | None, use_locking: bool = NO_LOCKING) -> list[list[str]]:
    """The exports on C{nodes} (C{None} or C{[]}: every online node): C{[[node, export], ...]}."""


@declare
def QueryClusterInfo() -> dict[str, Any]:
    """The cluster's parameters and versions (spec/luxi.md section 3 lists the keys)."""


@declare
def QueryConfigValues(names: list[str]) -> list[Any]:
    """The values of the config entries C{names}, in order (C{None} for an unknown one)."""


@declare
def QueryTags(kind: str, name: str) -> list[str]:
    """The tags of the C{kind} (cluster, instance, node, nodegroup, network) named
    C{name} (C{""} for the cluster)."""


@declare
def SetWatcherPause(until: float | None = None) -> float | None:
    """Pause the watcher until C{until} (an epoch), or end the pause (C{None}); the value set."""


# --- job filter rules (design-optables) -------------------------------------------------


@declare
def QueryFilters(uuids: list[str] | None, fields: list[str]) -> list[Row]:
    """A row of C{fields} per job filter rule of C{uuids} (C{None} or C{[]}: every
    one; an unknown uuid gives no row)."""


@declare
def ReplaceFilter(uuid: str | None, priority: int, predicates: list[Any], action: Any,
                  reason: list[Any]) -> str:
    """Replace job filter rule C{uuid}, or add it (C{None}: under a new uuid); its
    watermark is the newest job id.  Answers the uuid.  A malformed predicate or
    action, or a uuid that is no UUID, is refused with C{OpPrereqError} and nothing
    is stored."""


@declare
def DeleteFilter(uuid: str) -> None:
    """Remove job filter rule C{uuid} (C{OpPrereqError} C{ECODE_NOENT} if unknown)."""
