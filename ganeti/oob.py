"""The out-of-band (OOB) protocol of Ganeti 3.0 (stdlib only, no I/O).

A node's C{oob_program} node parameter names an executable that manages the
node's power and health out of band (a BMC, a PDU...).  The master runs it
(through its own NodeD: RPC C{run_oob}) as::

    <oob_program> <command> <node name>

with C{command} one of L{COMMANDS}; it is killed after the opcode's timeout.
A non-zero exit is a failure.  Its standard output is JSON (empty: null):

  - C{power-on}, C{power-off}, C{power-cycle}: nothing;
  - C{power-status}: C{{"powered": true|false}};
  - C{health}: C{[[item, status], ...]}, each status one of L{STATUSES}.

An answer of another shape makes that node's result "no data"
(L{RS_NODATA}), as in Ganeti.  L{decode} and L{check_payload} are the
parsing; L{ganeti.noded.oob} runs the program, L{ganeti.cmdlib.oob} is the
logical unit.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

POWER_ON = "power-on"
POWER_OFF = "power-off"
POWER_CYCLE = "power-cycle"
POWER_STATUS = "power-status"
HEALTH = "health"
#: every command of the protocol (Ganeti's C{OOB_COMMANDS})
COMMANDS = (POWER_ON, POWER_OFF, POWER_CYCLE, POWER_STATUS, HEALTH)
#: commands that never run on the master (refused if named, skipped for "all nodes")
SKIP_MASTER = (POWER_OFF, POWER_CYCLE)
#: seconds the helper may run (Ganeti's C{OOB_TIMEOUT})
TIMEOUT = 60
#: seconds between two nodes powered on (Ganeti's C{OOB_POWER_DELAY})
POWER_DELAY = 2.0

#: the key of C{power-status}'s answer
POWERED = "powered"

STATUS_OK = "OK"
STATUS_WARNING = "WARNING"
STATUS_CRITICAL = "CRITICAL"
STATUS_UNKNOWN = "UNKNOWN"
#: the states of a health item (Ganeti's C{OOB_STATUSES})
STATUSES = (STATUS_OK, STATUS_WARNING, STATUS_CRITICAL, STATUS_UNKNOWN)

#: the node_verify check of the helpers' paths, and cluster verify's error code for a bad one
NV_OOB_PATHS = "oob-paths"
CV_ENODEOOBPATH = "ENODEOOBPATH"

#: Ganeti's query result statuses (C{RS_*}) as an OOB result uses them
RS_NORMAL = 0
RS_NODATA = 2
RS_UNAVAIL = 3
#: how the CLI shows a status other than L{RS_NORMAL} (Ganeti's C{RSS_DESCRIPTION}, verbose text)
RS_TEXT = {1: "(unknown)", RS_NODATA: "(nodata)", RS_UNAVAIL: "(unavail)", 4: "(offline)"}


class OobError(Exception):
    """The helper's answer is not what the protocol allows."""


def decode(stdout: bytes) -> Any:
    """The payload of the helper's standard output: JSON, or C{None} when
    it printed nothing (or only whitespace).

    @raise OobError: not UTF-8 JSON
    """
    text = stdout.strip()
    if not text:
        return None
    try:
        return json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        shown = text[:200].decode("utf-8", "replace")
        raise OobError("its output is not valid JSON (%s): %r" % (exc, shown)) from None


def check_payload(command: str, payload: Any) -> list[str]:
    """What is wrong with C{payload} as the answer to C{command} (Ganeti's
    C{_CheckPayload}, and also a C{power-status} without a boolean
    C{powered} and health items that are not pairs); empty when valid."""
    errs: list[str] = []
    if command == HEALTH:
        if not isinstance(payload, list):
            errs.append("command 'health' is expected to return a list but got %s" % type(payload).__name__)
        else:
            for entry in payload:
                if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
                    errs.append("health item %r is not a pair [item, status]" % (entry,))
                elif entry[1] not in STATUSES:
                    errs.append("health item '%s' has invalid status '%s'" % (entry[0], entry[1]))
    elif command == POWER_STATUS:
        if not isinstance(payload, dict):
            errs.append("power-status is expected to return a dict but got %s" % type(payload).__name__)
        elif not isinstance(payload.get(POWERED), bool):
            errs.append("power-status is expected to return a boolean '%s' but got %r" % (POWERED, payload))
    elif command in (POWER_ON, POWER_OFF, POWER_CYCLE):
        if payload is not None:
            errs.append("%s is expected to not return payload but got '%s'" % (command, payload))
    else:
        errs.append("unknown out-of-band command '%s'" % command)
    return errs


def health_warnings(payload: list[list[str]]) -> list[tuple[str, str]]:
    """The C{(item, status)} pairs of a valid health answer that deserve a warning."""
    return [(item, status) for item, status in payload if status in (STATUS_WARNING, STATUS_CRITICAL)]


def result_text(status: int) -> str:
    """The CLI's text for a non-normal result status (Ganeti's C{FormatResultError}, verbose)."""
    return RS_TEXT.get(status, "(unknown)")
