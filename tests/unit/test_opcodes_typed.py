"""Tests for the typed opcodes (L{ganeti.opcodes.typed}, written by
L{ganeti.opcodes.generate}) and their use by the logical units.

  - the checked-in modules are what the declarations give (the
    declarations stay the one source);
  - every declared opcode has its class, and a validated dict built into
    it and back is the same dict (minimal, and with every parameter given);
  - every registered LU is generic over the class of its own opcode;
  - a value of the wrong type on the wire is refused by C{validate} before
    any LU is built;
  - an LU reading a field its opcode does not declare is a mypy error (run
    only when the project's mypy cache is warm enough to be quick: the
    mypy run of C{scripts/lint} checks every LU anyway).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
import typing
from pathlib import Path
from typing import Any

import attrs
from twisted.trial.unittest import SkipTest, SynchronousTestCase

from ganeti import errors, opcodes
from ganeti.cmdlib import REGISTRY
from ganeti.cmdlib.base import LogicalUnit, op_class, register
from ganeti.jobs import model
from ganeti.opcodes import base, generate, typed
from ganeti.opcodes.typed import OpCode, OpInstanceStartup, OpTestDelay
from tests.unit.test_processor import ProcessorTestCase, registry

ROOT = Path(__file__).resolve().parents[2]

# --- sample values -----------------------------------------------------------------


def _enumerations() -> list[Any]:
    """Every value of the enumerations the opcode modules declare."""
    values: list[Any] = []
    for module in (base, opcodes.test, opcodes.cluster, opcodes.instance, opcodes.verify, opcodes.backup,
                   opcodes.network, opcodes.oob):
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, tuple) and all(isinstance(v, (str, int)) for v in value):
                values.extend(value)
    return values


#: Values tried, in order, for each parameter: the first its type accepts is used.
CANDIDATES: list[Any] = [
    "node1.example.test", 1, 0, 1.5, True, {}, [], ["node1.example.test"], [{}], {"default": {}},
    [["add", {}]], [[1, ["success"]]], [["user", "text", 1]], "192.0.2.0/24", "192.0.2.1", ["192.0.2.1"],
    "2001:db8::/64", "2001:db8::1",
] + _enumerations()


def sample(param: opcodes.Param) -> Any:
    """A value of C{param}'s type (not null)."""
    for value in CANDIDATES:
        if value is not None and param.type(value):
            return value
    raise AssertionError("no sample value for %s (%s)" % (param.name, param.type.desc))


def minimal(opdef: opcodes.OpDef) -> dict[str, Any]:
    op: dict[str, Any] = {"OP_ID": opdef.op_id}
    for param in opdef.params:
        if param.required:
            op[param.name] = sample(param)
    return op


def full(opdef: opcodes.OpDef) -> dict[str, Any]:
    """Every parameter given (unsupported ones as null)."""
    op = minimal(opdef)
    for param in opdef.all_params:
        if param.name in op or param.name == "depends":
            continue
        op[param.name] = None if param.type is opcodes.T_UNSUPPORTED else sample(param)
    return op


def without_nulls(op: dict[str, Any]) -> dict[str, Any]:
    """C{op} as the typed form gives it back: a null counts as not given."""
    return {k: v for k, v in op.items() if v is not None}


class GeneratedModulesTests(SynchronousTestCase):
    def test_checked_in_modules_are_current(self) -> None:
        """The modules of L{ganeti.opcodes.typed} are what
        C{python -m ganeti.opcodes.generate} writes from the declarations."""
        self.assertEqual(generate.stale(), [], "run: python -m ganeti.opcodes.generate")

    def test_stale_names_a_changed_or_extra_file(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            where = Path(tmp)
            for name, text in generate.render().items():
                (where / name).write_text(text)
            self.assertEqual(generate.stale(where), [])
            (where / "base.py").write_text("# edited\n")
            (where / "extra.py").write_text("")
            self.assertEqual(generate.stale(where), ["base.py", "extra.py"])

    def test_field_declarations(self) -> None:
        """Required: the type, no default; a default: the type and it; absent: Optional, None."""
        lines = {p.name: generate.field_line(p) for p in opcodes.OPCODES["OP_INSTANCE_STARTUP"].all_params}
        self.assertEqual(lines["instance_name"], "instance_name: str")
        self.assertEqual(lines["force"], "force: bool = False")
        self.assertEqual(lines["hvparams"], "hvparams: dict[str, Any] = attrs.Factory(dict)")
        self.assertEqual(lines["instance_uuid"], "instance_uuid: str | None = None")
        self.assertEqual(lines["reason"], "reason: list[list[Any]] = attrs.Factory(list)")
        self.assertEqual(lines["priority"], "priority: int = 0")

    def test_module_sizes(self) -> None:
        for name, text in generate.render().items():
            self.assertLess(text.count("\n"), 800, name)


class RoundTripTests(SynchronousTestCase):
    def test_every_opcode_has_its_class(self) -> None:
        self.assertEqual(set(typed.CLASSES), set(opcodes.OPCODES))
        for op_id, cls in typed.CLASSES.items():
            self.assertEqual(cls.OP_ID, op_id)
            self.assertEqual(cls.__name__, generate.class_name(op_id))
            fields = {f.name for f in attrs.fields(cls)}
            self.assertEqual(fields, {p.name for p in opcodes.OPCODES[op_id].all_params})

    def test_minimal_and_full_dicts_round_trip(self) -> None:
        for opdef in opcodes.OPCODES.values():
            for op in (minimal(opdef), full(opdef)):
                valid = opcodes.validate(op)
                built = typed.from_dict(valid)
                self.assertIsInstance(built, typed.CLASSES[opdef.op_id])
                self.assertEqual(built.to_dict(), without_nulls(valid), opdef.op_id)
                self.assertEqual(opcodes.validate(built.to_dict()), without_nulls(valid), opdef.op_id)

    def test_defaults_are_filled_and_fresh(self) -> None:
        one = OpTestDelay.from_dict(opcodes.validate({"OP_ID": "OP_TEST_DELAY", "duration": 1}))
        self.assertEqual((one.on_master, one.repeat, one.on_nodes, one.priority, one.reason),
                         (True, 0, [], 0, []))
        two = OpTestDelay(duration=1.0)
        self.assertIsNot(one.on_nodes, two.on_nodes)

    def test_frozen(self) -> None:
        op = OpInstanceStartup(instance_name="web1")
        with self.assertRaises(attrs.exceptions.FrozenInstanceError):
            op.instance_name = "web2"
        self.assertEqual(attrs.evolve(op, instance_uuid="u1").to_dict()["instance_uuid"], "u1")

    def test_from_dict_refuses_another_opcode_or_an_unknown_field(self) -> None:
        with self.assertRaises(errors.ProgrammerError):
            OpTestDelay.from_dict({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "x"})
        with self.assertRaises(errors.ProgrammerError):
            OpTestDelay.from_dict({"OP_ID": "OP_TEST_DELAY", "duration": 1, "durration": 2})


class RegisteredLUTests(SynchronousTestCase):
    def test_every_lu_reads_its_own_opcode_class(self) -> None:
        """C{class LUX(LogicalUnit[OpX])}: the class the processor builds for its OP_ID."""
        for op_id, lu_class in REGISTRY.items():
            self.assertIs(op_class(lu_class), typed.CLASSES[op_id], lu_class.__name__)

    def test_register_refuses_an_lu_reading_another_opcode(self) -> None:
        class Mismatch(LogicalUnit[OpInstanceStartup]):
            OP_ID = "OP_TEST_DELAY"

        with self.assertRaises(errors.ProgrammerError):
            register(Mismatch)
        self.assertIsNot(REGISTRY["OP_TEST_DELAY"], Mismatch)

    def test_register_takes_the_op_id_of_the_opcode_class(self) -> None:
        class Implicit(LogicalUnit[OpTestDelay]):
            pass

        saved = dict(REGISTRY)
        try:
            del REGISTRY["OP_TEST_DELAY"]
            self.assertIs(register(Implicit), Implicit)
            self.assertEqual(Implicit.OP_ID, "OP_TEST_DELAY")
            self.assertIs(REGISTRY["OP_TEST_DELAY"], Implicit)
        finally:
            REGISTRY.clear()
            REGISTRY.update(saved)


class Spy(LogicalUnit[OpInstanceStartup]):
    """Records every LU built (there must be none)."""

    OP_ID = "OP_INSTANCE_STARTUP"
    built: typing.ClassVar[list[OpCode]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        Spy.built.append(self.op)

    async def exec_(self, feedback: Any) -> Any:
        return None


class WireTypeTests(ProcessorTestCase):
    def test_wrong_type_refused_before_any_lu(self) -> None:
        """A string field given a number fails the opcode (OpPrereqError,
        naming the parameter) before the processor builds the LU."""
        Spy.built = []
        job = self.env.execute(1, [{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": 5}],
                               registry=registry(OP_INSTANCE_STARTUP=Spy))
        (op,) = job.ops
        self.assertEqual(op.status, model.ERROR)
        self.assertEqual(op.result[0], "OpPrereqError")
        self.assertIn("'instance_name' must be a string", op.result[1][0])
        self.assertEqual(Spy.built, [])

    def test_the_lu_gets_the_typed_opcode(self) -> None:
        Spy.built = []
        self.env.execute(1, [{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "gone.example.test",
                              "comment": "c", "reason": [["user", "why", 1]]}],
                         registry=registry(OP_INSTANCE_STARTUP=Spy))
        (built, *_) = Spy.built
        self.assertIsInstance(built, OpInstanceStartup)
        self.assertEqual((built.instance_name, built.comment, built.reason[0], built.force, built.shutdown_timeout),
                         ("gone.example.test", "c", ["user", "why", 1], False, opcodes.DEFAULT_SHUTDOWN_TIMEOUT))


_SNIPPET = '''
from __future__ import annotations

from ganeti.cmdlib.base import LogicalUnit
from ganeti.opcodes.typed import OpInstanceStartup


class LUMisspelt(LogicalUnit[OpInstanceStartup]):
    OP_ID = "OP_INSTANCE_STARTUP"

    def expand_names(self) -> None:
        print(self.op.instance_name, self.op.force)
        print(self.op.instance_nmae)
'''

#: Longest a warm-cache mypy run may take before the test gives up (seconds).
MYPY_BUDGET = 60.0


class MypyTests(SynchronousTestCase):
    def test_undeclared_field_is_a_type_error(self) -> None:
        """mypy reports C{self.op.instance_nmae} and nothing else.  Skipped
        without the project's mypy cache (a cold run takes minutes under
        load); C{scripts/lint} runs mypy on every LU anyway."""
        cache = ROOT / ".mypy_cache"
        if not cache.is_dir() or os.environ.get("GANETI_SKIP_MYPY_TEST"):
            raise SkipTest("no warm mypy cache (scripts/lint makes one)")
        with tempfile.TemporaryDirectory() as tmp:
            snippet = Path(tmp) / "misspelt_lu.py"
            snippet.write_text(textwrap.dedent(_SNIPPET))
            started = time.monotonic()
            try:
                done = subprocess.run(
                    # the options of scripts/lint's run, so that its cache serves
                    [sys.executable, "-m", "mypy", "--cache-dir", str(cache), "--no-error-summary", str(snippet)],
                    cwd=ROOT, capture_output=True, text=True, timeout=MYPY_BUDGET,
                )
            except subprocess.TimeoutExpired:
                raise SkipTest("mypy took longer than %ss" % MYPY_BUDGET) from None
            elapsed = time.monotonic() - started
        errors_found = [line for line in done.stdout.splitlines() if ": error:" in line and "misspelt_lu" in line]
        self.assertEqual(len(errors_found), 1, done.stdout + done.stderr)
        self.assertIn('"OpInstanceStartup" has no attribute "instance_nmae"', errors_found[0])
        self.assertIn("misspelt_lu.py:13:", errors_found[0])
        self.assertLess(elapsed, MYPY_BUDGET)
