"""The test opcodes: C{OP_TEST_DELAY}, C{OP_TEST_JQUEUE}, C{OP_TEST_ALLOCATOR}, C{OP_TEST_OS_PARAMS},
C{OP_TEST_DUMMY}.

Declared with L{ganeti.opcodes.base.define}; imported by L{ganeti.opcodes}.
"""

from __future__ import annotations

from typing import Any

from ganeti.opcodes.base import (
    ABSENT,
    EVAC_MODES,
    MAX_TEST_DELAY,
    MAX_TEST_REPEAT,
    REQUIRED,
    T_ANY,
    T_BOOL,
    T_DELAY,
    T_DICT,
    T_DISK_TEMPLATE,
    T_HYPERVISOR,
    T_NONEMPTY_STR,
    T_NONNEG_INT,
    T_STR,
    Param,
    Type,
    define,
    is_int,
    t_list,
    t_maybe,
    t_one_of,
)


def _test_delay_total(op: dict[str, Any]) -> str | None:
    total = op["duration"] * max(1, op["repeat"])
    if total > MAX_TEST_DELAY:
        return "'duration' times 'repeat' must be at most %g seconds, not %g" % (MAX_TEST_DELAY, total)
    return None


define(
    "OP_TEST_DELAY",
    [
        Param("duration", T_DELAY, REQUIRED, "seconds to sleep (at most %g)" % MAX_TEST_DELAY),
        Param("on_master", T_BOOL, True, "also sleep on the master"),
        Param("on_nodes", t_list(T_STR), [], "node names to sleep on"),
        Param("on_node_uuids", t_maybe(t_list(T_STR)), ABSENT, "internal: resolved UUIDs"),
        Param(
            "repeat",
            Type("a whole number from 0 to %d" % MAX_TEST_REPEAT, lambda v: is_int(v) and 0 <= v <= MAX_TEST_REPEAT,
                 "int"),
            0,
            "repeat count (0 = once; at most %d)" % MAX_TEST_REPEAT,
        ),
        Param("interruptible", T_BOOL, False, "can be interrupted through a socket"),
        Param("no_locks", T_BOOL, True, "skip lock acquisition"),
    ],
    doc="Sleep for a while (testing).",
    summary="duration",
    check=_test_delay_total,
)

#: Most test messages of one OP_TEST_JQUEUE (each is a socket handshake).
MAX_JQUEUE_MESSAGES = 1000

define(
    "OP_TEST_JQUEUE",
    [
        Param("notify_waitlock", T_BOOL, False, "tell the client when names are expanded (job waiting)"),
        Param("notify_exec", T_BOOL, False, "tell the client when the opcode executes"),
        Param(
            "log_messages",
            Type(
                "a list of at most %d strings" % MAX_JQUEUE_MESSAGES,
                lambda v: isinstance(v, list) and len(v) <= MAX_JQUEUE_MESSAGES and all(isinstance(x, str) for x in v),
                "list[str]",
            ),
            [],
            "test messages to log, each announced to the client",
        ),
        Param("fail", T_BOOL, False, "fail the opcode at the end"),
    ],
    doc="Test the job queue with the client following the job (testing).",
    result="True",
)

#: OP_TEST_ALLOCATOR's modes (Ganeti's C{IALLOCATOR_MODE_*}) and directions
IALLOCATOR_MODES = ("allocate", "multi-allocate", "relocate", "allocate-secondary", "node-evacuate", "change-group")
IALLOCATOR_DIRECTIONS = ("in", "out")

define(
    "OP_TEST_ALLOCATOR",
    [
        Param("direction", t_one_of(*IALLOCATOR_DIRECTIONS), REQUIRED,
              "in: answer the allocator's input; out: run it and answer its output"),
        Param("mode", t_one_of(*IALLOCATOR_MODES), REQUIRED, "request type"),
        Param("name", T_NONEMPTY_STR, REQUIRED, "the instance (new one for allocate)"),
        Param("nics", t_maybe(t_list(T_DICT)), ABSENT, "NICs of the new instance"),
        Param("disks", t_maybe(t_list(T_ANY)), ABSENT, "disks of the new instance ({size, mode})"),
        Param("hypervisor", t_maybe(T_HYPERVISOR), ABSENT, "hypervisor (default: the cluster's)"),
        Param("iallocator", t_maybe(T_STR), ABSENT, "allocator to run (direction out)"),
        Param("tags", t_list(T_NONEMPTY_STR), [], "tags of the new instance"),
        Param("memory", t_maybe(T_NONNEG_INT), ABSENT, "memory of the new instance (MiB)"),
        Param("vcpus", t_maybe(T_NONNEG_INT), ABSENT, "VCPUs of the new instance"),
        Param("os", t_maybe(T_STR), ABSENT, "OS of the new instance"),
        Param("disk_template", t_maybe(T_DISK_TEMPLATE), ABSENT, "disk template of the new instance"),
        Param("instances", t_maybe(t_list(T_NONEMPTY_STR)), ABSENT, "instances (node-evacuate, change-group)"),
        Param("evac_mode", t_maybe(t_one_of(*EVAC_MODES)), ABSENT, "evacuation mode (node-evacuate)"),
        Param("target_groups", t_maybe(t_list(T_NONEMPTY_STR)), ABSENT, "destination groups (change-group)"),
        Param("spindle_use", T_NONNEG_INT, 1, "spindles of the new instance"),
        Param(
            "count",
            Type("a whole number from 0 to 1000", lambda v: is_int(v) and 0 <= v <= 1000, "int"),
            1,
            "how many instances (multi-allocate)",
        ),
        Param("group_name", t_maybe(T_STR), ABSENT, "node group of the new instance"),
    ],
    doc="Show an allocator's input or output for a request (testing).",
    result="string",
    summary="iallocator",
)

define(
    "OP_TEST_OS_PARAMS",
    [Param("osparams_secret", t_maybe(T_DICT), ABSENT, "secret OS parameters to pass through the job")],
    doc="Test that secret OS parameters reach the job unlogged (testing).",
)

define(
    "OP_TEST_DUMMY",
    [
        Param("result", T_ANY, ABSENT, "the opcode's result"),
        Param("messages", T_ANY, ABSENT, "messages to log (a list of strings)"),
        Param("fail", T_ANY, ABSENT, "fail the opcode (true)"),
        Param("submit_jobs", T_ANY, ABSENT, "jobs to submit (lists of opcodes): the result names them"),
    ],
    doc="Log messages, then fail, submit jobs or return a result (testing).",
)
