"""The machinery of opcodes: what a job asks for, declared as data (spec/opcodes.md).

The declarations live in the family modules of L{ganeti.opcodes}
(L{ganeti.opcodes.cluster}, L{ganeti.opcodes.instance}, ...), which import
only this module.

An opcode travels as a flat JSON object: C{OP_ID}, its own parameters and
the common ones (L{COMMON_PARAMS}).  Each opcode is declared once with
L{define}: its id, its parameters (name, type, default, doc) and the
parameter its one-line summary shows.  L{validate} checks a submitted dict
against the declaration and fills in defaults; L{summary} gives the short
form job lists show (C{"TEST_DELAY(0.001)"}).

Adding an opcode is a few lines::

    define("OP_INSTANCE_STARTUP", [
        P_INSTANCE_NAME, P_INSTANCE_UUID, P_FORCE, P_IGNORE_OFFLINE_NODES,
        Param("hvparams", T_DICT, {}, "temporary hvparams for this start"),
        ...
    ], summary="instance_name")

Parameters with a default may be omitted (the default is filled in);
parameters without one ("absent" in the spec) stay absent; a C{null} value
counts as not given.  A key that is not declared is refused, as Ganeti 3.0's
LuxiD refuses it ("superfluous dictionary keys"); parameters Ganeti has but
this cluster does not implement are declared with L{unsupported}: they may
be given as C{null} (Ganeti's own clients send every parameter), nothing else.
Numbers are finite, and durations and timeouts bounded (L{MAX_TEST_DELAY},
L{MAX_TIMEOUT}), so no job can ask to run for ever.
"""

from __future__ import annotations

import copy
import math
import sys
from typing import Any, Callable, Iterable

import attrs

from ganeti import errors
from ganeti.jobs import lifecycle

# --- types ------------------------------------------------------------------


@attrs.frozen
class Type:
    """A parameter type: a predicate and how error messages describe it."""

    desc: str
    check: Callable[[Any], bool]
    #: the Python annotation of a value of this type in the typed opcode
    #: classes (L{ganeti.opcodes.typed}), as source text
    py: str = "Any"
    #: whether C{null} passes (C{py} is then the annotation without C{None})
    nullable: bool = False

    @property
    def annotation(self) -> str:
        """C{py}, with C{| None} when null passes."""
        return "%s | None" % self.py if self.nullable and self.py not in ("Any", "None") else self.py

    def __call__(self, value: Any) -> bool:
        try:
            return bool(self.check(value))
        except (TypeError, ValueError):
            return False


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool)


T_ANY = Type("anything", lambda v: True)
T_BOOL = Type("a boolean", lambda v: isinstance(v, bool), "bool")
T_INT = Type("an integer", is_int, "int")
T_NONNEG_INT = Type("a non-negative integer", lambda v: is_int(v) and v >= 0, "int")
T_POS_INT = Type("a positive integer", lambda v: is_int(v) and v > 0, "int")
T_FLOAT = Type("a number", _is_number, "float")
T_NONNEG_FLOAT = Type("a non-negative number", lambda v: _is_number(v) and v >= 0, "float")
T_STR = Type("a string", lambda v: isinstance(v, str), "str")
T_NONEMPTY_STR = Type("a non-empty string", lambda v: isinstance(v, str) and v != "", "str")
T_DICT = Type("a dict", lambda v: isinstance(v, dict), "dict[str, Any]")


def t_seconds(low: float, high: float) -> Type:
    """A number of seconds within C{[low, high]}."""
    return Type("a number of seconds from %g to %g" % (low, high), lambda v: _is_number(v) and low <= v <= high,
                "float")


#: Longest OP_TEST_DELAY, in seconds, all repetitions together (Ganeti has
#: no bound; one day is far more than any test needs).
MAX_TEST_DELAY = 86400.0
#: Most repetitions of OP_TEST_DELAY.
MAX_TEST_REPEAT = 10000
#: Longest timeout an opcode may ask for, in seconds (one day).
MAX_TIMEOUT = 86400
T_TIMEOUT = Type(
    "a whole number of seconds from 0 to %d" % MAX_TIMEOUT, lambda v: is_int(v) and 0 <= v <= MAX_TIMEOUT, "int"
)
T_DELAY = Type(
    "a number of seconds from 0 to %g" % MAX_TEST_DELAY, lambda v: _is_number(v) and 0 <= v <= MAX_TEST_DELAY, "float"
)
#: The type of a parameter declared with L{unsupported}: only null passes
#: (and null counts as not given), or an empty dict or list (Ganeti's
#: C{gnt-cluster modify} sends C{{}} for "no change" of diskparams,
#: hv_state, data collectors...; L{validate} drops it), so any value is refused.
T_UNSUPPORTED = Type(
    "null (this cluster does not implement it)", lambda v: v is None or (isinstance(v, (dict, list)) and not v), "None"
)


#: parameters for which an empty dict or list is "no change", as for
#: L{T_UNSUPPORTED} ones (Ganeti's gnt-cluster modify sends C{diskparams={}})
EMPTY_IS_ABSENT = frozenset({"diskparams"})


def t_list(elem: Type) -> Type:
    """A list whose every element is C{elem}."""
    return Type("a list of items each %s" % elem.desc, lambda v: isinstance(v, list) and all(elem(x) for x in v),
                "list[%s]" % elem.annotation)


def t_dict_of(value: Type) -> Type:
    """A dict with string keys and C{value} values."""
    return Type(
        "a dict with string keys and values each %s" % value.desc,
        lambda v: isinstance(v, dict) and all(isinstance(k, str) and value(x) for k, x in v.items()),
        "dict[str, %s]" % value.annotation,
    )


def t_one_of(*values: Any) -> Type:
    """One of C{values} (compared with C{==}, but never a bool for an int)."""
    allowed = list(values)

    def check(v: Any) -> bool:
        return any(v == a and type(v) is type(a) for a in allowed)

    kinds = sorted({type(a).__name__ for a in allowed})
    return Type("one of %s" % ", ".join(repr(a) for a in allowed), check, " | ".join(kinds) or "Any")


def t_maybe(inner: Type) -> Type:
    """C{inner} or C{null}."""
    return Type("%s or null" % inner.desc, lambda v: v is None or inner(v), inner.py, True)


def t_tuple(*elems: Type) -> Type:
    """A list of exactly C{len(elems)} items of the given types."""
    desc = "a list [%s]" % ", ".join(e.desc for e in elems)

    def check(v: Any) -> bool:
        return isinstance(v, (list, tuple)) and len(v) == len(elems) and all(e(x) for e, x in zip(elems, v))

    return Type(desc, check, "list[Any]")



# --- enumerations (spec/opcodes.md section 2) -------------------------------------
TAG_CLUSTER = "cluster"
TAG_INSTANCE = "instance"
TAG_NODE = "node"
TAG_NODEGROUP = "nodegroup"
TAG_NETWORK = "network"
TAG_KINDS = (TAG_CLUSTER, TAG_INSTANCE, TAG_NODE, TAG_NODEGROUP, TAG_NETWORK)

ALLOC_POLICIES = ("preferred", "last_resort", "unallocable")
HYPERVISORS = ("kvm", "xen-pvm", "xen-hvm", "lxc", "chroot", "fake")
DISK_TEMPLATES = ("plain", "drbd", "file", "sharedfile", "blockdev", "rbd", "ext", "gluster", "diskless")
MIGRATION_MODES = ("live", "non-live")
EVAC_MODES = ("primary-only", "secondary-only", "all")
REBOOT_TYPES = ("soft", "hard", "full")
INSTANCE_CREATE_MODES = ("create", "import", "remote-import")
ADMIN_STATE_SOURCES = ("admin", "user")

#: Priorities a submitted opcode may carry (spec/jobs.md section 2).
SUBMIT_PRIORITIES = (-10, 0, 10)
_FINALIZED = tuple(s for s in lifecycle.STATUS_ORDER if s in lifecycle.FINALIZED)
#: Default shutdown timeout in seconds.
DEFAULT_SHUTDOWN_TIMEOUT = 120

T_TAG_KIND = t_one_of(*TAG_KINDS)
T_ALLOC_POLICY = t_one_of(*ALLOC_POLICIES)
T_HYPERVISOR = t_one_of(*HYPERVISORS)
T_DISK_TEMPLATE = t_one_of(*DISK_TEMPLATES)
T_PRIORITY = t_one_of(*SUBMIT_PRIORITIES)
T_DEPENDS = t_maybe(t_list(t_tuple(T_INT, t_list(t_one_of(*_FINALIZED)))))
T_REASON = t_list(t_tuple(T_STR, T_STR, T_FLOAT))


# --- parameters -------------------------------------------------------------


class _Marker:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


#: Default of a parameter that must be given.
REQUIRED: Any = _Marker("REQUIRED")
#: Default of an optional parameter without a default: it stays absent.
ABSENT: Any = _Marker("ABSENT")


@attrs.frozen
class Param:
    """One opcode parameter.

    @ivar default: the value filled in when the parameter is not given,
        L{REQUIRED} or L{ABSENT}; mutable defaults are copied per use.
    """

    name: str
    type: Type
    default: Any = ABSENT
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def has_default(self) -> bool:
        return self.default is not REQUIRED and self.default is not ABSENT


#: Parameters every opcode has (spec/opcodes.md section 2).
COMMON_PARAMS: tuple[Param, ...] = (
    Param("dry_run", t_maybe(T_BOOL), ABSENT, "only run the prerequisite checks"),
    Param("debug_level", t_maybe(T_NONNEG_INT), ABSENT, "debug level"),
    Param("priority", T_PRIORITY, 0, "opcode priority (-10, 0 or 10; lower is more urgent)"),
    Param("depends", T_DEPENDS, ABSENT, "job dependencies: [[job_id, [status, ...]], ...]"),
    Param("comment", t_maybe(T_STR), ABSENT, "free text"),
    Param("reason", T_REASON, [], "reason trail: [[source, text, timestamp_ns], ...]"),
)
COMMON_NAMES = frozenset(p.name for p in COMMON_PARAMS)

# Parameters shared by many opcodes: use these in new declarations.
P_FORCE = Param("force", T_BOOL, False, "override safety checks")
P_INSTANCE_NAME = Param("instance_name", T_STR, REQUIRED, "instance (FQDN; short names expanded)")
P_INSTANCE_UUID = Param("instance_uuid", t_maybe(T_NONEMPTY_STR), ABSENT, "internal: resolved UUID")
P_NODE_NAME = Param("node_name", T_NONEMPTY_STR, REQUIRED, "node (short names are expanded)")
P_NODE_UUID = Param("node_uuid", t_maybe(T_NONEMPTY_STR), ABSENT, "internal: resolved UUID")
P_GROUP_NAME = Param("group_name", T_NONEMPTY_STR, REQUIRED, "node group name")
P_SHUTDOWN_TIMEOUT = Param(
    "shutdown_timeout", T_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT, "seconds to wait for clean shutdown"
)
P_IGNORE_OFFLINE_NODES = Param("ignore_offline_nodes", T_BOOL, False, "tolerate offline nodes")
P_IGNORE_IPOLICY = Param("ignore_ipolicy", T_BOOL, False, "ignore instance-policy violations")
P_IALLOCATOR = Param("iallocator", t_maybe(T_NONEMPTY_STR), ABSENT, "allocator script name (e.g. hail)")
P_NDPARAMS = Param("ndparams", t_maybe(T_DICT), ABSENT, "node params (e.g. ssh_port, oob_program)")
P_DISKPARAMS = Param("diskparams", t_maybe(t_dict_of(T_DICT)), ABSENT, "per-disk-template params")
P_IPOLICY = Param("ipolicy", t_maybe(T_DICT), ABSENT, "instance policy")
P_HV_STATE = Param("hv_state", t_maybe(T_DICT), ABSENT, "static hypervisor state")
P_DISK_STATE = Param("disk_state", t_maybe(T_DICT), ABSENT, "static disk state")
P_TAG_KIND = Param("kind", T_TAG_KIND, REQUIRED, "cluster, instance, node, nodegroup or network")
P_TAG_NAME = Param("name", t_maybe(T_STR), ABSENT, "object name (omit or null for cluster)")
P_TAGS = Param("tags", t_list(T_STR), REQUIRED, "tags")


def unsupported(name: str, doc: str = "") -> Param:
    """A parameter Ganeti's opcode has and this cluster does not implement:
    accepted only as C{null} or absent (Ganeti's clients send it as null)."""
    return Param(name, T_UNSUPPORTED, ABSENT, doc or "not implemented here: null or absent")


@attrs.frozen
class OpDef:
    """The declaration of one opcode.

    @ivar check: an optional check of the whole (type-checked, defaulted)
        opcode, for bounds that involve several parameters; it returns an
        error message, or C{None} when the opcode is fine.
    """

    op_id: str
    params: tuple[Param, ...]
    doc: str = ""
    result: str = "null"
    summary: str | Callable[[dict[str, Any]], str | None] | None = None
    check: Callable[[dict[str, Any]], str | None] | None = None
    #: the module that declared it (L{ganeti.opcodes.generate} writes one
    #: module of typed classes per declaring module)
    module: str = ""

    @property
    def all_params(self) -> tuple[Param, ...]:
        return self.params + COMMON_PARAMS

    def param(self, name: str) -> Param:
        for p in self.all_params:
            if p.name == name:
                return p
        raise KeyError(name)


#: Every declared opcode, by OP_ID.
OPCODES: dict[str, OpDef] = {}


def define(
    op_id: str,
    params: Iterable[Param],
    *,
    doc: str = "",
    result: str = "null",
    summary: str | Callable[[dict[str, Any]], str | None] | None = None,
    check: Callable[[dict[str, Any]], str | None] | None = None,
) -> OpDef:
    """Declare an opcode (once)."""
    if not op_id.startswith("OP_"):
        raise errors.ProgrammerError("opcode ids start with OP_: %r" % op_id)
    if op_id in OPCODES:
        raise errors.ProgrammerError("opcode %s is declared twice" % op_id)
    params = tuple(params)
    names = [p.name for p in params]
    clash = sorted({n for n in names if names.count(n) > 1} | (set(names) & COMMON_NAMES))
    if clash:
        raise errors.ProgrammerError("opcode %s declares %s twice" % (op_id, ", ".join(clash)))
    module = sys._getframe(1).f_globals.get("__name__", "")
    opdef = OpDef(op_id, params, doc=doc, result=result, summary=summary, check=check, module=module)
    OPCODES[op_id] = opdef
    return opdef


# --- validation -------------------------------------------------------------


def _fail(op_id: str, message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError("%s: %s" % (op_id, message), errors.ECODE_INVAL)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def lookup(op: Any) -> OpDef:
    """The declaration for an opcode dict; L{errors.OpPrereqError} if none."""
    if not isinstance(op, dict):
        raise errors.OpPrereqError("an opcode must be a JSON object, not %s" % _short(op), errors.ECODE_INVAL)
    op_id = op.get("OP_ID")
    if not isinstance(op_id, str) or not op_id:
        raise errors.OpPrereqError("opcode without OP_ID: %s" % _short(op), errors.ECODE_INVAL)
    opdef = OPCODES.get(op_id)
    if opdef is None:
        raise _fail(op_id, "unknown opcode")
    return opdef


def validate(op: Any) -> dict[str, Any]:
    """Check an opcode dict; return a copy with the defaults filled in.

    @raise errors.OpPrereqError: (C{ECODE_INVAL}) unknown C{OP_ID}, a
        parameter the opcode does not have, a required parameter missing or
        C{null}, a value of the wrong type or out of bounds; the message
        names the opcode and the parameter.
    """
    opdef = lookup(op)
    known = {p.name for p in opdef.all_params}
    unknown = sorted(str(k) for k in op if k != "OP_ID" and k not in known)
    if unknown:
        raise _fail(opdef.op_id, "unknown parameter(s) %s" % ", ".join("'%s'" % _clip(k) for k in unknown))
    out = dict(op)
    for param in opdef.all_params:
        value = out.get(param.name)
        if value is None:
            if param.required:
                raise _fail(opdef.op_id, "parameter '%s' is required" % param.name)
            if param.has_default:
                out[param.name] = copy.deepcopy(param.default)
            continue
        if (param.type is T_UNSUPPORTED or param.name in EMPTY_IS_ABSENT) and T_UNSUPPORTED(value):
            del out[param.name]  # an empty "no change": as if not given
            continue
        if not param.type(value):
            raise _fail(
                opdef.op_id, "parameter '%s' must be %s, not %s" % (param.name, param.type.desc, _short(value))
            )
    if opdef.check is not None:
        problem = opdef.check(out)
        if problem:
            raise _fail(opdef.op_id, problem)
    return out


def _clip(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def summary(op: Any) -> str:
    """Ganeti's one-line summary: C{OP_ID} without C{OP_}, plus a key value."""
    if not isinstance(op, dict) or not isinstance(op.get("OP_ID"), str):
        return "INVALID"
    op_id: str = op["OP_ID"]
    short = op_id[3:] if op_id.startswith("OP_") else op_id
    opdef = OPCODES.get(op_id)
    if opdef is None or opdef.summary is None:
        return short
    if callable(opdef.summary):
        value = opdef.summary(op)
    else:
        value = op.get(opdef.summary)
    if value is None:
        return short
    return "%s(%s)" % (short, value if isinstance(value, str) else _summary_text(value))


def _summary_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)
