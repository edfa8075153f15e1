"""gnt-debug's job and daemon tests (Ganeti's names, options and output).

    gnt-debug submit-job [-v] [--op-repeat N] [--job-repeat N] [--timing-stats] [--each] FILE...
    gnt-debug iallocator [--dir in|out] [-I NAME] [-m MODE] [--memory M] [--disks S,...] ... NAME...
    gnt-debug test-osparams [--os-parameters-secret K=V,...]
    gnt-debug wconfd echo TEXT | cleanuplocks | listlocks JOBID | listalllocks | listalllocksowners
                     | flushconfig

C{submit-job} reads files holding a JSON list of opcodes (C{{"OP_ID": ...}})
and submits them as jobs, following each; C{test-jobqueue} is
L{ganeti.client.debug_jobqueue}.
"""

from __future__ import annotations

import argparse
import time

from ganeti import errors
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Context
from ganeti.client.instance_opts import parse_size
from ganeti.client.jobs import JobExecutor, opcode, submit_opcodes, submit_or_send
from ganeti.client.options import add_dry_run_option, add_priority_option, add_submit_options

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: OP_TEST_ALLOCATOR's modes and directions (Ganeti's names)
IALLOCATOR_MODES = ("allocate", "multi-allocate", "relocate", "allocate-secondary", "node-evacuate", "change-group")
EVAC_MODES = ("primary-only", "secondary-only", "all")


# --- submit-job ----------------------------------------------------------------------------


def _load_ops(path: str) -> list[dict[str, Any]]:
    from ganeti import serializer  # (orjson: not on the path of the other debug commands)

    try:
        with open(path) as handle:
            data = serializer.loads(handle.read())
    except (OSError, ValueError) as e:
        raise errors.OpPrereqError("Cannot read opcodes from %s: %s" % (path, e), errors.ECODE_INVAL) from None
    if not (isinstance(data, list) and all(isinstance(op, dict) and isinstance(op.get("OP_ID"), str)
                                           for op in data)):
        raise errors.OpPrereqError("%s must hold a JSON list of opcodes ({\"OP_ID\": ...})" % path,
                                   errors.ECODE_INVAL)
    return data


def submit_job(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{GenericOpCodes}: submit the files' opcode lists as jobs and follow them."""
    if opts.rep_op < 1 or opts.rep_job < 1:
        raise errors.OpPrereqError("--op-repeat and --job-repeat must be at least 1", errors.ECODE_INVAL)
    loaded = [(path, _load_ops(path)) for path in opts.files]
    executor = JobExecutor(ctx, verbose=opts.verbose)
    op_count = job_count = 0
    if opts.timing_stats:
        ctx.out("Loading...")
    for index in range(opts.rep_job):
        for path, ops in loaded:
            job = []
            for op in ops * opts.rep_op:
                params = {k: v for k, v in op.items() if k != "OP_ID"}
                built = opcode(ctx, op["OP_ID"], **params)
                for key in ("priority", "dry_run"):  # the file's own values win
                    if key in op:
                        built[key] = op[key]
                job.append(built)
            executor.queue_job("file %s/%d" % (path, index), *job)
            op_count += len(job)
            job_count += 1
    started = time.time()
    if opts.timing_stats:
        ctx.out("Submitting...")
    if opts.each:
        queued, executor._queue = executor._queue, []
        for name, ops in queued:
            try:
                executor.add_job_id(name, True, ctx.client().submit_job(ops))
            except errors.GenericError as e:
                executor.add_job_id(name, False, str(e))
    else:
        executor.submit_pending()
    submitted = time.time()
    if opts.timing_stats:
        ctx.out("Executing...")
    results = executor.get_results()
    done = time.time()
    if opts.timing_stats:
        ctx.out("C:op     %4d" % op_count)
        ctx.out("C:job    %4d" % job_count)
        ctx.out("T:submit %4.4f" % (submitted - started))
        ctx.out("T:exec   %4.4f" % (done - submitted))
        ctx.out("T:total  %4.4f" % (done - started))
    return EXIT_SUCCESS if all(ok for ok, _ in results) else EXIT_FAILURE


def setup_submit_job(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="store_true", help="Announce the submitted job ids")
    parser.add_argument("--op-repeat", type=int, default=1, dest="rep_op",
                        help="Repeat the opcode sequence this number of times")
    parser.add_argument("--job-repeat", type=int, default=1, dest="rep_job",
                        help="Repeat the job this number of times")
    parser.add_argument("--timing-stats", action="store_true", help="Show timing stats")
    parser.add_argument("--each", action="store_true", help="Submit each job separately")
    add_dry_run_option(parser)
    add_priority_option(parser)
    parser.add_argument("files", metavar="FILE", nargs="+", help="a JSON list of opcodes")


# --- iallocator ----------------------------------------------------------------------------


def iallocator(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{TestAllocator}: OP_TEST_ALLOCATOR, its result printed."""
    try:
        disks = [{"size": parse_size(value), "mode": "rw"} for value in opts.disks.split(",")]
    except (errors.GenericError, ValueError) as e:
        ctx.err("Invalid disks parameter '%s': %s" % (opts.disks, e))
        return EXIT_FAILURE
    nics = []
    for text in opts.nics.split(","):
        mac, ip, bridge = ([part or None for part in text.split("/")] + [None, None, None])[:3]
        nics.append({"mac": mac, "ip": ip, "bridge": bridge})
    params: dict[str, Any] = {
        "mode": opts.mode, "name": opts.names[0], "instances": list(opts.names), "memory": opts.memory,
        "disks": disks, "nics": nics, "vcpus": opts.vcpus, "tags": opts.tags.split(",") if opts.tags else [],
        "direction": opts.direction, "evac_mode": opts.evac_mode, "target_groups": list(opts.target_groups),
        "spindle_use": opts.spindle_use, "count": opts.count,
    }
    for key in ("disk_template", "os", "iallocator"):
        if getattr(opts, key):
            params[key] = getattr(opts, key)
    (result,) = submit_opcodes(ctx, [opcode(ctx, "OP_TEST_ALLOCATOR", **params)])
    ctx.out("%s" % (result,))
    return EXIT_SUCCESS


def setup_iallocator(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", dest="direction", default="in", choices=("in", "out"),
                        help="Show allocator input (in) or allocator results (out)")
    parser.add_argument("-I", "--iallocator", metavar="NAME", help="The allocator to run (direction out)")
    parser.add_argument("-m", "--mode", default="relocate", choices=IALLOCATOR_MODES,
                        help="Request mode (one of %s)" % ", ".join(IALLOCATOR_MODES))
    parser.add_argument("--memory", type=parse_size, default=128, help="Memory size for the instance (MiB)")
    parser.add_argument("--disks", default="4096,4096", help="Comma separated list of disk sizes (MiB)")
    parser.add_argument("-t", "--disk-template", dest="disk_template", metavar="TEMPLATE",
                        help="Disk template of the instance")
    parser.add_argument("--nics", default="00:11:22:33:44:55",
                        help="Comma separated list of nics, each nic definition is of form mac/ip/bridge, if missing"
                        " values are replace by None")
    parser.add_argument("-o", "--os-type", dest="os", metavar="OS", help="What OS to run")
    parser.add_argument("-p", "--vcpus", type=int, default=1, help="Select number of VCPUs for the instance")
    parser.add_argument("--tags", default=None, help="Comma separated list of tags")
    parser.add_argument("--evac-mode", default="all", choices=EVAC_MODES,
                        help="Node evacuation mode (one of %s)" % ", ".join(EVAC_MODES))
    parser.add_argument("--target-groups", action="append", default=[], help="Target groups for relocation")
    parser.add_argument("--spindle-use", type=int, default=1, help="How many spindles to use")
    parser.add_argument("--count", type=int, default=2, help="How many instances to allocate")
    add_dry_run_option(parser)
    add_priority_option(parser)
    parser.add_argument("names", metavar="NAME", nargs="+", help="the instance (and more for some modes)")


# --- test-osparams -------------------------------------------------------------------------


def _key_values(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError("expected key=value,..., got %r" % item)
        out[key] = value
    return out


def test_osparams(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{TestOsParams}: OP_TEST_OS_PARAMS with the secret parameters."""
    submit_or_send(ctx, opcode(ctx, "OP_TEST_OS_PARAMS", osparams_secret=opts.osparams_secret))
    return EXIT_SUCCESS


def setup_test_osparams(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--os-parameters-secret", dest="osparams_secret", type=_key_values, default=None,
                        metavar="PARAM=VALUE,...", help="OS parameters to pass as secret (not logged nor stored)")
    add_submit_options(parser)


# --- wconfd --------------------------------------------------------------------------------

#: the wconfd commands and the number of arguments each takes
WCONFD_COMMANDS = {"echo": 1, "cleanuplocks": 0, "listlocks": 1, "listalllocks": 0, "listalllocksowners": 0,
                   "flushconfig": 0}


async def _wconfd(reactor: Any, socket_path: str, command: str, args: list[str]) -> str:
    from ganeti.wconfd.client import WConfdClient

    client = await WConfdClient.connect(reactor, socket_path)
    try:
        if command == "echo":
            return "Answer: %s" % (await client.echo(args[0]),)
        if command == "cleanuplocks":
            await client.cleanup_locks()
            return "Stale locks cleaned up."
        if command == "listlocks":
            job_id = int(args[0])
            held = [[lock, mode] for lock, holders in await client.list_all_locks_owners()
                    for owner, mode in holders if owner and owner[0] == job_id]
            return "Answer: %s" % (held,)
        if command == "listalllocks":
            return "Answer: %s" % (await client.list_all_locks(),)
        if command == "listalllocksowners":
            return "Answer: %s" % (await client.list_all_locks_owners(),)
        await client.flush_config()
        return "Configuration flushed."
    finally:
        await client.close()


def wconfd(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{Wconfd}: talk to this node's WConfD directly."""
    command, args = opts.args[0], opts.args[1:]
    if command not in WCONFD_COMMANDS:
        ctx.err("Command '%s' not supported" % command)
        return EXIT_FAILURE
    if len(args) != WCONFD_COMMANDS[command]:
        ctx.err("Command '%s' takes %s." % (command, "precisely one argument" if WCONFD_COMMANDS[command]
                                             else "no arguments"))
        return EXIT_FAILURE
    if command == "listlocks" and not args[0].isdigit():
        ctx.err("Command 'listlocks' takes a job id, not %r" % args[0])
        return EXIT_FAILURE
    from twisted.internet import defer, task

    from ganeti.paths import Paths

    socket_path = Paths.from_option(ctx.root).wconfd_socket
    out: list[Any] = []

    def go(reactor: Any) -> Any:
        d = defer.ensureDeferred(_wconfd(reactor, socket_path, command, args))
        return d.addBoth(out.append)

    try:
        task.react(go)
    except SystemExit:
        pass
    if out and isinstance(out[0], str):
        ctx.out(out[0])
        return EXIT_SUCCESS
    failure = out[0] if out else None
    why = getattr(getattr(failure, "value", None), "description", None) or getattr(failure, "value", failure)
    raise errors.OpExecError("WConfD at %s: %s" % (socket_path, why))


def setup_wconfd(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("args", metavar="CMD", nargs="+",
                        help="echo TEXT, cleanuplocks, listlocks JOBID, listalllocks, listalllocksowners, flushconfig")


# --- metad ---------------------------------------------------------------------------------------
#: what Ganeti's ganeti-metad is, and why there is none here
NO_METAD = ("There is no metadata daemon on this cluster: Ganeti's ganeti-metad serves the OS parameters of"
            " instances to their instance communication NICs (169.254.169.254); here such NICs get an address"
            " on the instance communication network but no metadata service.")


def metad(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{Metad}: its argument checks, then the answer that there is no metad here."""
    command, args = opts.args[0], opts.args[1:]
    if command != "echo":
        ctx.err("Command '%s' not supported" % command)
        return EXIT_FAILURE
    if len(args) != 1:
        ctx.err("Command 'echo' takes only precisely argument.")
        return EXIT_FAILURE
    ctx.err(NO_METAD)
    return EXIT_FAILURE


def setup_metad(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("args", metavar="CMD", nargs="+", help="echo TEXT (Ganeti's only metad command)")
