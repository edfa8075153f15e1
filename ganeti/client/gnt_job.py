"""gnt-job: examine and manipulate the job queue (Ganeti's commands and output).

    gnt-job list [--running|--pending|--finished|--error ...] [-o FIELDS] [ID...]
    gnt-job info ID...          gnt-job watch ID          gnt-job wait ID
    gnt-job cancel [--kill --yes-do-it] {--pending|--queued|--waiting | ID...}
    gnt-job change-priority --priority P {--pending|--queued|--waiting | ID...}
    gnt-job archive ID...       gnt-job autoarchive {AGE | all}
"""

from __future__ import annotations

import argparse

from ganeti import errors
from ganeti.client import options, prompt
from ganeti.client.command import EXIT_CONFIRMATION, EXIT_FAILURE, EXIT_SUCCESS, Command, Context
from ganeti.client.errorfmt import JobOutcomeUnknown, format_error
from ganeti.client.formatting import format_generic_info, format_log_message, format_query_result, format_timestamp
from ganeti.client.jobs import (
    AUTOARCHIVE_TIMEOUT,
    JOB_STATUS_ERROR,
    JOB_STATUS_QUEUED,
    JOB_STATUS_RUNNING,
    JOB_STATUS_WAITING,
    JOBS_FINALIZED,
    JOBS_PENDING,
    JobReporter,
    QuietReporter,
    poll_job,
)
from ganeti.client.options import (
    add_force_option,
    add_list_fields_options,
    add_list_options,
    add_priority_option,
    and_filters,
    make_simple_filter,
    parse_fields,
    parse_timespec,
)
from ganeti.client.qfilter import looks_like_filter, make_filter
from ganeti.client.queries import generic_list, generic_list_fields
from ganeti.client.runner import run
from ganeti.lighttyping import cast

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

#: default fields of C{gnt-job list}
LIST_DEF_FIELDS = ["id", "status", "summary"]

_INFO_FIELDS = [
    "id", "status", "ops", "opresult", "opstatus", "oplog",
    "opstart", "opexec", "opend", "received_ts", "start_ts", "end_ts",
]


def _join(value: Any) -> str:
    return ",".join(str(item) for item in value) if isinstance(value, (list, tuple)) else str(value)


def _timestamps(value: Any) -> str:
    return ",".join(map(format_timestamp, value)) if isinstance(value, (list, tuple)) else str(value)


#: how C{gnt-job list} shows job fields
LIST_FORMAT: dict[str, tuple[Callable[[Any], str], bool]] = {
    "status": (str, False),
    "summary": (_join, False),
    "opstart": (_timestamps, False),
    "opexec": (_timestamps, False),
    "opend": (_timestamps, False),
    "received_ts": (format_timestamp, False),
    "start_ts": (format_timestamp, False),
    "end_ts": (format_timestamp, False),
}


def _status_filter(opts: argparse.Namespace) -> list[Any] | None:
    """The filter of the status options given (any of them matches)."""
    selected: list[str] = []
    for statuses in getattr(opts, "status_filter", None) or []:
        selected.extend(s for s in statuses if s not in selected)
    return make_simple_filter("status", selected) if selected else None


# --- list, list-fields ---------------------------------------------------------------
def list_jobs(ctx: Context, opts: argparse.Namespace) -> int:
    fields = parse_fields(opts.output, LIST_DEF_FIELDS)
    if opts.archived and "archived" not in fields:
        fields.append("archived")
    if opts.force_filter or (len(opts.job_ids) == 1 and looks_like_filter(opts.job_ids[0])):
        wanted = make_filter(opts.job_ids, True, namefield="id")
    else:
        try:
            wanted = make_simple_filter("id", [options.job_id(text) for text in opts.job_ids])
        except argparse.ArgumentTypeError as e:
            ctx.usage_error("argument JOB_ID: %s" % e)
            raise
    qfilter = and_filters(wanted, _status_filter(opts))
    return generic_list(ctx, "job", fields, qfilter, LIST_FORMAT)


def list_job_fields(ctx: Context, opts: argparse.Namespace) -> int:
    return generic_list_fields(ctx, "job")


# --- info ----------------------------------------------------------------------------
def _delta(start: Any, end: Any) -> float:
    return cast("float", end[0] - start[0] + (end[1] - start[1]) / 1000000.0)


def _job_timestamp(name: str, ts: Any, into: list[Any], prior: Any = None) -> None:
    if ts is None:
        into.append((name, "unknown (%s)" % (ts,), "job_timestamp"))
        return
    delta = " (delta %.6fs)" % _delta(prior, ts) if prior is not None else ""
    into.append((name, format_timestamp(ts) + delta, "job_timestamp"))


def _op_timestamp(name: str, ts: Any, into: list[Any]) -> None:
    text = format_timestamp(ts) if isinstance(ts, (list, tuple)) else "N/A"
    into.append((name, text, "opcode_timestamp"))


def job_info_data(row: list[list[Any]]) -> Any:
    """What C{gnt-job info} shows of one job (a L{format_generic_info} tree)."""
    cells = dict(zip(_INFO_FIELDS, row))
    job_id = cells["id"][1]
    if cells["status"][0] != 0:
        return "Job ID %s not found" % job_id
    values = {name: cell[1] for name, cell in cells.items()}
    info: list[Any] = [("Job ID", job_id), ("Status", values["status"])]
    recv_ts, start_ts, end_ts = values["received_ts"], values["start_ts"], values["end_ts"]
    _job_timestamp("Received", recv_ts, info)
    _job_timestamp("Processing start", start_ts, info, prior=recv_ts)
    _job_timestamp("Processing end", end_ts, info, prior=start_ts)
    if end_ts is not None and recv_ts is not None:
        info.append(("Total processing time", "%.6f seconds" % _delta(recv_ts, end_ts)))
    else:
        info.append(("Total processing time", "N/A"))
    opcodes = []
    for op, result, status, log, s_ts, x_ts, e_ts in zip(
        values["ops"], values["opresult"], values["opstatus"], values["oplog"],
        values["opstart"], values["opexec"], values["opend"],
    ):
        op_info: list[Any] = [
            ("Opcode", op.get("OP_ID") if isinstance(op, dict) else op),
            ("Status", status),
        ]
        _op_timestamp("Processing start", s_ts, op_info)
        _op_timestamp("Execution start", x_ts, op_info)
        _op_timestamp("Processing end", e_ts, op_info)
        op_info.append(("Input fields", op))
        op_info.append(("Result", result))
        entries = []
        for serial, log_ts, log_type, message in log or []:
            entries.append([
                ("Time", format_timestamp(log_ts)),
                ("Content", (serial, log_type, format_log_message(log_type, message))),
            ])
        op_info.append(("Execution log", entries))
        opcodes.append(op_info)
    info.append(("Opcodes", opcodes))
    return info


def show_jobs(ctx: Context, opts: argparse.Namespace) -> int:
    response = ctx.client().query("job", _INFO_FIELDS, make_simple_filter("id", opts.job_ids))
    jobs = [job_info_data(row) for row in response["data"]]
    if jobs:
        ctx.out(format_generic_info(jobs))
    return EXIT_SUCCESS


# --- watch, wait ---------------------------------------------------------------------
def _follow(ctx: Context, job_id: int, reporter: JobReporter) -> int:
    try:
        poll_job(ctx.client(), job_id, reporter)
    except JobOutcomeUnknown as e:  # never "failed": the job may have ended well
        code, text = format_error(e)
        ctx.err(text)
        return code
    except errors.GenericError as e:
        code, text = format_error(e)
        ctx.err("Job %s failed: %s" % (job_id, text))
        return code
    return EXIT_SUCCESS


def watch_job(ctx: Context, opts: argparse.Namespace) -> int:
    header = "Output from job %s follows" % opts.job_id
    ctx.out(header)
    ctx.out("-" * len(header))
    return _follow(ctx, opts.job_id, JobReporter(ctx))


def wait_job(ctx: Context, opts: argparse.Namespace) -> int:
    return _follow(ctx, opts.job_id, QuietReporter(ctx))


# --- cancel, change-priority ---------------------------------------------------------
def _multi_job_action(
    ctx: Context, opts: argparse.Namespace, question: str, action: Callable[[Any, int], Any]
) -> int:
    qfilter = _status_filter(opts)
    if bool(opts.job_ids) == (qfilter is not None):
        ctx.usage_error("either a status filter or job ID(s) must be specified and never both")
    client = ctx.client()
    if qfilter is not None:
        response = client.query("job", ["id", "status", "summary"], qfilter)
        job_ids = [row[0][1] for row in response["data"]]
        if not job_ids:
            raise errors.OpPrereqError("No jobs with the requested status have been found", errors.ECODE_STATE)
        if not opts.force:
            _, lines = format_query_result(response, overrides=LIST_FORMAT)
            for line in lines:
                ctx.out(line)
            if not prompt.ask_user(question):
                return EXIT_CONFIRMATION
    else:
        job_ids = opts.job_ids
    result = EXIT_SUCCESS
    for job_id in job_ids:
        success, message = action(client, job_id)
        if not success:
            result = EXIT_FAILURE
        ctx.out(str(message))
    return result


def cancel_jobs(ctx: Context, opts: argparse.Namespace) -> int:
    if opts.kill and not opts.yes_do_it:
        raise errors.OpPrereqError("The --kill option must be confirmed with --yes-do-it", errors.ECODE_INVAL)
    name = "KILL" if opts.kill else "Cancel"
    return _multi_job_action(
        ctx, opts, "%s job(s) listed above?" % name, lambda client, job_id: client.cancel_job(job_id, opts.kill)
    )


def change_priority(ctx: Context, opts: argparse.Namespace) -> int:
    return _multi_job_action(
        ctx, opts, "Change priority of job(s) listed above?",
        lambda client, job_id: client.change_job_priority(job_id, opts.priority),
    )


# --- archive, autoarchive ------------------------------------------------------------
def archive_jobs(ctx: Context, opts: argparse.Namespace) -> int:
    client = ctx.client()
    result = EXIT_SUCCESS
    for job_id in opts.job_ids:
        if not client.archive_job(job_id):
            ctx.err("Failed to archive job with ID '%s'" % job_id)
            result = EXIT_FAILURE
    return result


def auto_archive_jobs(ctx: Context, opts: argparse.Namespace) -> int:
    archived, left = ctx.client().auto_archive_jobs(opts.age, AUTOARCHIVE_TIMEOUT)
    ctx.out("Archived %s jobs, %s unchecked left" % (archived, left))
    return EXIT_SUCCESS


# --- options -------------------------------------------------------------------------
def _age(value: str) -> int:
    if value == "all":
        return -1
    try:
        return parse_timespec(value)
    except errors.OpPrereqError as e:
        raise argparse.ArgumentTypeError(str(e.args[0])) from None


def _status_options(parser: argparse.ArgumentParser, *which: str) -> None:
    choices = {
        "pending": (JOBS_PENDING, "Select jobs pending execution or being cancelled"),
        "queued": ((JOB_STATUS_QUEUED,), "Select queued jobs only"),
        "waiting": ((JOB_STATUS_WAITING,), "Select waiting jobs only"),
        "running": ((JOB_STATUS_RUNNING,), "Show jobs currently running only"),
        "error": ((JOB_STATUS_ERROR,), "Show failed jobs only"),
        "finished": (JOBS_FINALIZED, "Show finished jobs only"),
    }
    for name in which:
        statuses, text = choices[name]
        parser.add_argument(
            "--" + name, dest="status_filter", action="append_const", const=tuple(statuses),
            help=text + " (status options add up)",
        )


def _setup_list(parser: argparse.ArgumentParser) -> None:
    add_list_options(parser, LIST_DEF_FIELDS)
    _status_options(parser, "pending", "running", "error", "finished")
    parser.add_argument(
        "--archived", action="store_true", help="Include archived jobs in list (slow and expensive)"
    )
    parser.add_argument("-F", "--filter", dest="force_filter", action="store_true",
                        help="Whether command argument should be treated as filter")
    parser.add_argument("job_ids", nargs="*", metavar="JOB_ID", help="jobs to list, or one filter (default: all)")


def _setup_info(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job_ids", nargs="*", type=options.job_id, metavar="JOB_ID", help="jobs to show (default: all)")


def _setup_one(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job_id", type=options.job_id, metavar="JOB_ID")


def _setup_many(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job_ids", nargs="+", type=options.job_id, metavar="JOB_ID")


def _setup_multi(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser, help="Do not ask for confirmation")
    _status_options(parser, "pending", "queued", "waiting")
    parser.add_argument("job_ids", nargs="*", type=options.job_id, metavar="JOB_ID")


def _setup_cancel(parser: argparse.ArgumentParser) -> None:
    _setup_multi(parser)
    parser.add_argument("--kill", action="store_true", help="Kill running jobs (SIGTERM, then SIGKILL after 5 s); they end canceled")
    parser.add_argument("--yes-do-it", "--ya-rly", action="store_true", help="Really use --kill")


def _setup_change_priority(parser: argparse.ArgumentParser) -> None:
    add_priority_option(parser, required=True)
    _setup_multi(parser)


def _setup_autoarchive(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("age", type=_age, metavar="AGE", help="an age like 3600, 30m, 1d, 4w; or 'all'")


def _setup_list_fields(parser: argparse.ArgumentParser) -> None:
    add_list_fields_options(parser)


COMMANDS: dict[str, Command] = {
    "list": Command(
        list_jobs, _setup_list,
        "Lists the jobs and their status. The available fields can be shown using the"
        ' "list-fields" command (see the man page for details). The default field list is'
        " (in order): %s." % ", ".join(LIST_DEF_FIELDS),
    ),
    "list-fields": Command(list_job_fields, _setup_list_fields, "Lists all available fields for jobs"),
    "info": Command(show_jobs, _setup_info, "Show detailed information about the specified jobs"),
    "watch": Command(watch_job, _setup_one, "Follows a job and prints its output as it arrives"),
    "wait": Command(wait_job, _setup_one, "Wait for a job to finish"),
    "cancel": Command(
        cancel_jobs, _setup_cancel, "Cancel jobs",
        "Only jobs that have not started to run (queued or waiting) can be canceled, unless"
        " --kill --yes-do-it is given. With a status option, the matching jobs are listed and"
        " confirmation is asked (skip it with --force).",
    ),
    "change-priority": Command(
        change_priority, _setup_change_priority, "Change the priority of jobs",
        "Running jobs only have the priority of their remaining opcodes changed.",
    ),
    "archive": Command(archive_jobs, _setup_many, "Archive specified jobs"),
    "autoarchive": Command(auto_archive_jobs, _setup_autoarchive, "Auto archive jobs older than the given age"),
}

ALIASES = {"show": "info"}


def main(argv: list[str] | None = None) -> int:
    return run("gnt-job", COMMANDS, argv, aliases=ALIASES)


if __name__ == "__main__":
    raise SystemExit(main())
