"""The overview's alerts from C{gnt-cluster verify}: the last run, read from its jobs.

C{gnt-cluster verify} submits C{OP_CLUSTER_VERIFY}, whose result names the
jobs that check (C{OP_CLUSTER_VERIFY_CONFIG}, one C{OP_CLUSTER_VERIFY_GROUP}
per group); each reports a problem as a line of its log in Ganeti's format,
C{"  - ERROR: node node2: ..."} or C{"  - WARNING: ..."} (with
C{--error-codes}: C{"  - ERROR:ENODENET:node:node2:..."}).  L{last_run}
finds the newest C{OP_CLUSTER_VERIFY} job in the queue, whoever submitted it
(the command line, a cron job, the web console's own "Verify now" button),
and collects those lines from its jobs: the alerts, with the run's status.
Nothing is kept here: the job queue is the record, so every candidate that
becomes master answers the same.
"""

from __future__ import annotations

import re
from typing import Any

from ganeti.luxi import methods

VERIFY_OP = "OP_CLUSTER_VERIFY"
#: its jobs' summary (L{ganeti.opcodes.base.summary}): C{CLUSTER_VERIFY}, or C{CLUSTER_VERIFY(group)}
SUMMARY = "CLUSTER_VERIFY"
#: a problem line of the verify LUs (plain or with error codes)
_LINE = re.compile(r"^\s*- (ERROR|WARNING)(?::([A-Z0-9_]+):([a-z]+):([^:]*):(.*)|: (.*))$")
_FINAL = ("success", "error", "canceled")
#: alerts answered at most (a broken cluster can report one per instance and node)
MAX_ALERTS = 200


def parse_line(message: Any) -> dict[str, str] | None:
    """C{{"severity", "text"}} of a verify problem line, C{None} for any other log line (pure)."""
    if not isinstance(message, str):
        return None
    found = _LINE.match(message)
    if found is None:
        return None
    severity = found.group(1).lower()
    if found.group(6) is not None:
        return {"severity": severity, "text": found.group(6).strip()}
    kind, item, text = found.group(3), found.group(4), found.group(5)
    return {"severity": severity, "text": ("%s %s: %s" % (kind, item, text) if item else "%s: %s" % (kind, text)),
            "code": found.group(2)}


def _ts(value: Any) -> float | None:
    if isinstance(value, list) and len(value) == 2:
        return float(value[0] + value[1] / 1e6)
    return None


async def last_run(luxi: Any) -> dict[str, Any]:
    """The newest verify run: C{{"job", "status", "time", "finished", "alerts", "errors", "warnings"}}
    (C{{"job": null}} when the queue has none)."""
    rows = await luxi.call(methods.QueryJobs.name, None, ["id", "summary"])
    parents = [row[0] for row in rows if row and any(isinstance(s, str) and (s == SUMMARY or s.startswith(SUMMARY + "("))
                                                      for s in row[1] or [])]
    if not parents:
        return {"job": None, "alerts": [], "errors": 0, "warnings": 0, "finished": True}
    parent = max(parents)
    ((status, opresult, end_ts),) = await luxi.call(methods.QueryJobs.name, [parent],
                                                    ["status", "opresult", "end_ts"])
    children: list[int] = []
    for result in opresult or []:
        if isinstance(result, dict):
            children += [int(j[1]) for j in result.get("jobs") or [] if isinstance(j, list) and len(j) == 2 and j[0]]
    alerts: list[dict[str, Any]] = []
    finished = status in _FINAL
    ended = _ts(end_ts)
    failed: list[int] = []
    if children:
        for job_id, row in zip(children, await luxi.call(methods.QueryJobs.name, children,
                                                         ["status", "oplog", "end_ts"])):
            if row is None:
                continue
            child_status, oplog, child_end = row
            finished = finished and child_status in _FINAL
            if child_status in ("error", "canceled"):
                failed.append(job_id)
            child_ts = _ts(child_end)
            if child_ts is not None and (ended is None or child_ts > ended):
                ended = child_ts
            for entries in oplog or []:
                for entry in entries or []:
                    found = parse_line(entry[3] if isinstance(entry, list) and len(entry) == 4 else None)
                    if found is not None and len(alerts) < MAX_ALERTS:
                        alerts.append(dict(found, job=job_id))
    for job_id in failed:
        alerts.append({"severity": "error", "text": "verify job %d failed" % job_id, "job": job_id})
    if status in ("error", "canceled"):
        alerts.append({"severity": "error", "text": "verify job %d %s" % (parent, status), "job": parent})
    return {"job": parent, "status": status, "time": ended, "finished": finished, "alerts": alerts,
            "errors": sum(1 for a in alerts if a["severity"] == "error"),
            "warnings": sum(1 for a in alerts if a["severity"] == "warning")}
