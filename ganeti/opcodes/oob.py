"""The power opcodes: C{OP_OOB_COMMAND} and C{OP_NODE_POWERCYCLE}, and C{OP_RESTRICTED_COMMAND}
(Ganeti 3.0's parameters).

Declared with L{ganeti.opcodes.base.define}; imported by L{ganeti.opcodes}.
The protocol itself (commands, answers) is L{ganeti.oob}.
"""

from __future__ import annotations

from ganeti import oob
from ganeti.opcodes.base import (
    ABSENT,
    MAX_TIMEOUT,
    P_FORCE,
    P_NODE_NAME,
    P_NODE_UUID,
    REQUIRED,
    T_BOOL,
    T_NONEMPTY_STR,
    Param,
    Type,
    define,
    is_int,
    t_list,
    t_maybe,
    t_one_of,
)

#: the commands of the protocol (Ganeti's C{OOB_COMMANDS})
OOB_COMMANDS = oob.COMMANDS
#: longest power delay accepted (one hour)
MAX_POWER_DELAY = 3600.0

define(
    "OP_OOB_COMMAND",
    [
        Param("node_names", t_list(T_NONEMPTY_STR), [], "nodes to run the OOB command against (empty: all)"),
        Param("node_uuids", t_maybe(t_list(T_NONEMPTY_STR)), ABSENT, "internal: resolved UUIDs"),
        Param("command", t_one_of(*OOB_COMMANDS), REQUIRED, "OOB command to run"),
        Param("timeout",
              Type("a whole number of seconds from 1 to %d" % MAX_TIMEOUT, lambda v: is_int(v) and 1 <= v <= MAX_TIMEOUT,
                   "int"),
              oob.TIMEOUT, "seconds before the OOB helper is killed"),
        Param("ignore_status", T_BOOL, False, "ignore the node offline status for power off"),
        Param("power_delay",
              Type("a number of seconds from 0 to %g" % MAX_POWER_DELAY,
                   lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= MAX_POWER_DELAY, "float"),
              oob.POWER_DELAY, "seconds to wait between powering on nodes"),
    ],
    doc="Interact with the out-of-band helpers of nodes.",
    result="list, by node name, of [[0, node_name], [status, payload]] (status 0 ok, 2 no data, 3 no OOB program)",
)

define(
    "OP_NODE_POWERCYCLE",
    [P_NODE_NAME, P_NODE_UUID, P_FORCE],
    doc="Hard powercycle a node (the master only with force).",
    result="the node's answer (\"Reboot scheduled in 5 seconds\")",
    summary="node_name",
)

define(
    "OP_RESTRICTED_COMMAND",
    [
        Param("use_locking", T_BOOL, False, "take the nodes' locks (shared)"),
        Param("nodes", t_list(T_NONEMPTY_STR), REQUIRED, "nodes to run the command on (at least one)"),
        Param("node_uuids", t_maybe(t_list(T_NONEMPTY_STR)), ABSENT, "internal: resolved UUIDs"),
        Param("command", T_NONEMPTY_STR, REQUIRED, "the restricted command's name"),
    ],
    doc="Run a restricted command (one of each node's own) on nodes.",
    result="[[success, output or error], ...] in the order of the nodes",
    summary="command",
)
