"""The master's side of disk transfers between nodes (see L{ganeti.noded.impexp}).

L{transfer} opens a listener on the receiving node, tells the sending node
to stream to it (TLS with the cluster certificate, a one-time token), asks
both for their status (soon after the start, then every L{POLL_INTERVAL}
seconds; noded answers at once when a transfer ends) and writes the
progress (bytes, rate, percentage, ETA) into the job log every
L{PROGRESS_INTERVAL} seconds.  When anything fails, or the job is
canceled, both ends are aborted, and the receiving node removes what it
wrote.
"""

from __future__ import annotations

from typing import Any

import attrs

from ganeti import errors
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib.base import LogicalUnit
from ganeti.opcodes.typed import OpCode
from ganeti.rpc import procedures

#: seconds between status requests: the first after L{FIRST_POLL}, doubling up to L{POLL_INTERVAL}
FIRST_POLL = 0.05
POLL_INTERVAL = 1.0
#: seconds between progress lines in the job log
PROGRESS_INTERVAL = 5.0
#: seconds the receiver waits for the sender's connection
CONNECT_TIMEOUT = 60.0
#: the compressions noded does
COMPRESSIONS = ("none", "gzip", "gzip-fast", "gzip-slow")


@attrs.frozen
class Endpoint:
    """One end of a transfer: a node and what it reads or writes (an IO dict)."""

    node_uuid: str
    io: dict[str, Any]


def check_compression(lu: LogicalUnit[OpCode], compress: str) -> str:
    """C{compress} if the transfers can use it: C{none} or a gzip tool the
    cluster lists in C{compression_tools}.
    @raise errors.OpPrereqError: otherwise
    """
    tools = lu.cfg.cluster.compression_tools
    if tools is None:
        tools = ["gzip", "gzip-fast", "gzip-slow"]
    if compress != "none" and compress not in tools:
        raise errors.OpPrereqError("Compression tool '%s' is not enabled in the cluster (enabled: %s)"
                                   % (compress, ", ".join(["none"] + list(tools))), errors.ECODE_INVAL)
    if compress not in COMPRESSIONS:
        raise errors.OpPrereqError("Compression tool '%s' is not supported (supported: %s)"
                                   % (compress, ", ".join(COMPRESSIONS)), errors.ECODE_INVAL)
    return compress


def format_size(nbytes: float) -> str:
    """Ganeti's style for sizes in progress lines: C{512.0M}, C{1.5G}."""
    mib = nbytes / (1024.0 * 1024.0)
    if mib >= 1024:
        return "%.1fG" % (mib / 1024.0)
    return "%.1fM" % mib


def format_progress(label: str, nbytes: int, rate: float, total: int | None) -> str:
    """One progress line: C{disk/0 sent 512.0M, 120.3 MiB/s, 50%, ETA 4s}."""
    parts = ["%s sent %s" % (label, format_size(nbytes)), "%.1f MiB/s" % (rate / (1024.0 * 1024.0))]
    if total:
        parts.append("%d%%" % min(100, int(100 * nbytes / total)))
        if rate > 0 and nbytes < total:
            parts.append("ETA %ds" % int((total - nbytes) / rate + 0.5))
    return ", ".join(parts)


async def _status(lu: LogicalUnit[OpCode], node_uuid: str, tid: str, wait: float = 0.0) -> dict[str, Any]:
    """Transfer C{tid}'s status; with C{wait}, once it ends or after C{wait} seconds."""
    payload = await iu.call_node(lu, node_uuid, procedures.impexp_status.call([tid], wait) if wait else procedures.impexp_status.call([tid]),
                                 what="ask for a transfer's status")
    if not isinstance(payload, list) or len(payload) != 1 or not isinstance(payload[0], dict):
        raise errors.OpExecError("Node %s lost transfer %s" % (iu.node_name(lu.cfg, node_uuid), tid))
    return payload[0]


async def _stop(lu: LogicalUnit[OpCode], node_uuid: str, procedure: procedures.Procedure[[list[str]], None],
                tid: str) -> None:
    result = await iu.call_node_result(lu, node_uuid, procedure.call([tid]))
    if result.failed:
        await lu.log_warning("Could not %s transfer %s on node %s: %s", procedure.name.split("_")[1], tid,
                             iu.node_name(lu.cfg, node_uuid), result.fail_msg)


async def transfer(lu: LogicalUnit[OpCode], label: str, source: Endpoint, dest: Endpoint, compress: str,
                   total_bytes: int | None) -> int:
    """Stream C{source} to C{dest}; the bytes moved.

    @raise errors.OpExecError: the transfer failed (both ends were aborted)
    """
    cfg = lu.cfg
    dest_node = iu.get_node(cfg, dest.node_uuid)
    listen = await iu.call_node(lu, dest.node_uuid, procedures.impexp_listen.call({
        "bind": dest_node.secondary_ip or iu.node_address(dest_node), "dest": dest.io, "compress": compress,
        "connect_timeout": CONNECT_TIMEOUT,
    }), what="open the transfer of %s" % label)
    receiver = listen["id"]
    sender: str | None = None
    try:
        sent = await iu.call_node(lu, source.node_uuid, procedures.impexp_send.call({
            "host": dest_node.secondary_ip or iu.node_address(dest_node), "port": listen["port"],
            "token": listen["token"], "source": source.io, "compress": compress,
        }), what="start sending %s" % label)
        sender = sent["id"]
        moved = await _follow(lu, label, source.node_uuid, sender, dest.node_uuid, receiver, total_bytes)
    except Exception:  # not GeneratorExit & co (nothing may be awaited then: noded's lease cleans up)
        if sender is not None:
            await _stop(lu, source.node_uuid, procedures.impexp_abort, sender)
        await _stop(lu, dest.node_uuid, procedures.impexp_abort, receiver)
        raise
    await _stop(lu, dest.node_uuid, procedures.impexp_cleanup, receiver)
    await _stop(lu, source.node_uuid, procedures.impexp_cleanup, sender)
    return moved


async def _follow(lu: LogicalUnit[OpCode], label: str, source_uuid: str, sender: str, dest_uuid: str, receiver: str,
                  total_bytes: int | None) -> int:
    """Poll both ends until both are done; report progress; the bytes moved."""
    clock = lu.ctx.clock
    last_report = clock.seconds()
    interval = FIRST_POLL
    into: dict[str, Any] = {}
    while True:
        # the receiver ends last (it confirms when all is stored): wait for
        # its end, or the sender's once it has ended; no later than C{interval}
        if into.get("done"):
            await _status(lu, source_uuid, sender, interval)
        else:
            await _status(lu, dest_uuid, receiver, interval)
        interval = min(POLL_INTERVAL, interval * 2)
        out = await _status(lu, source_uuid, sender)
        into = await _status(lu, dest_uuid, receiver)
        if any(s.get("done") and not s.get("success") for s in (out, into)):
            # the first side to fail is the cause: ask the sender again, whose
            # failure (a dying export script) the receiver only sees as a lost connection
            out = await _status(lu, source_uuid, sender)
            problems = ["while %s: %s" % (side, status.get("error")) for side, status in
                        (("sending", out), ("receiving", into)) if status.get("done") and not status.get("success")]
            raise errors.OpExecError("Transfer of %s failed %s" % (label, "; ".join(problems)))
        if out.get("done") and into.get("done"):
            await lu.feedback("%s: done, %s at %.1f MiB/s" % (
                label, format_size(into.get("bytes", 0)), (into.get("rate") or 0.0) / (1024.0 * 1024.0)))
            return int(into.get("bytes", 0))
        now = clock.seconds()
        if now - last_report >= PROGRESS_INTERVAL:
            last_report = now
            await lu.feedback(format_progress(label, int(out.get("bytes", 0)), float(out.get("rate") or 0.0),
                                              total_bytes))


async def follow_one(lu: LogicalUnit[OpCode], label: str, node_uuid: str, tid: str, total_bytes: int | None) -> int:
    """Poll one end of a transfer (the other is on another cluster) until it
    is done; report progress; the bytes moved.  Aborts it on failure.
    @raise errors.OpExecError: it failed
    """
    clock = lu.ctx.clock
    last_report = clock.seconds()
    interval = FIRST_POLL
    try:
        while True:
            status = await _status(lu, node_uuid, tid, interval)
            interval = min(POLL_INTERVAL, interval * 2)
            if status.get("done"):
                if not status.get("success"):
                    raise errors.OpExecError("Transfer of %s failed: %s" % (label, status.get("error")))
                await lu.feedback("%s: done, %s at %.1f MiB/s" % (
                    label, format_size(status.get("bytes", 0)), (status.get("rate") or 0.0) / (1024.0 * 1024.0)))
                break
            now = clock.seconds()
            if now - last_report >= PROGRESS_INTERVAL:
                last_report = now
                await lu.feedback(format_progress(label, int(status.get("bytes", 0)),
                                                  float(status.get("rate") or 0.0), total_bytes))
    except Exception:
        await _stop(lu, node_uuid, procedures.impexp_abort, tid)
        raise
    await _stop(lu, node_uuid, procedures.impexp_cleanup, tid)
    return int(status.get("bytes", 0))
