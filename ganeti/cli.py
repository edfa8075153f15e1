"""The names of the gnt-* tools' shared machinery, in one place (a facade).

The machinery lives in L{ganeti.client}'s modules: L{ganeti.client.command}
(L{Command}, L{Context}, exit statuses), L{ganeti.client.options},
L{ganeti.client.runner} (L{run}), L{ganeti.client.errorfmt},
L{ganeti.client.jobs}, L{ganeti.client.formatting},
L{ganeti.client.queries}, L{ganeti.client.tags} and
L{ganeti.client.prompt}.  Code inside this project imports those modules;
this one only re-exports their public names for code written against
C{ganeti.cli} (C{from ganeti import cli}; C{cli.run(...)}), and defines
nothing itself.
"""

from __future__ import annotations

from ganeti.client.command import (
    EXIT_CONFIRMATION,
    EXIT_FAILURE,
    EXIT_SUCCESS,
    EXIT_USAGE,
    Command,
    CommandFunc,
    Context,
)
from ganeti.client.errorfmt import JobCanceled, JobSubmitted, RemoteError, decode_error, format_error
from ganeti.client.formatting import (
    EXIT_UNKNOWN_FIELD,
    QR_UNKNOWN,
    format_generic_info,
    format_log_message,
    format_query_result,
    format_table,
    format_time,
    format_timestamp,
    format_unit,
    qft_name,
    unknown_fields,
)
from ganeti.client.jobs import (
    AUTOARCHIVE_TIMEOUT,
    JOB_NOTCHANGED,
    JOB_STATUS_CANCELED,
    JOB_STATUS_CANCELING,
    JOB_STATUS_ERROR,
    JOB_STATUS_QUEUED,
    JOB_STATUS_RUNNING,
    JOB_STATUS_SUCCESS,
    JOB_STATUS_WAITING,
    JOBS_FINALIZED,
    JOBS_PENDING,
    REASON_SRC_CLIENT,
    REASON_SRC_USER,
    WFJC_TIMEOUT,
    JobReporter,
    QuietReporter,
    job_result,
    opcode,
    poll_job,
    reason_trail,
    report_changes,
    submit_opcodes,
    submit_or_send,
)
from ganeti.client.options import (
    PRIORITIES,
    add_common_options,
    add_dry_run_option,
    add_force_option,
    add_list_fields_options,
    add_list_options,
    add_priority_option,
    add_submit_options,
    add_tag_source_option,
    and_filters,
    build_parser,
    job_id,
    make_simple_filter,
    parse_fields,
    parse_timespec,
    priority,
    yes_no,
)
from ganeti.client.prompt import ask_user
from ganeti.client.queries import generic_list, generic_list_fields
from ganeti.client.runner import format_usage, run
from ganeti.client.tags import (
    TAG_CLUSTER,
    TAG_INSTANCE,
    TAG_NODE,
    TAG_NODEGROUP,
    add_tags,
    list_tags,
    read_tags,
    remove_tags,
    tag_commands,
)

__all__ = [
    "AUTOARCHIVE_TIMEOUT", "EXIT_CONFIRMATION", "EXIT_FAILURE", "EXIT_SUCCESS", "EXIT_UNKNOWN_FIELD", "EXIT_USAGE",
    "JOB_NOTCHANGED", "JOB_STATUS_CANCELED", "JOB_STATUS_CANCELING", "JOB_STATUS_ERROR", "JOB_STATUS_QUEUED",
    "JOB_STATUS_RUNNING", "JOB_STATUS_SUCCESS", "JOB_STATUS_WAITING", "JOBS_FINALIZED", "JOBS_PENDING",
    "PRIORITIES", "QR_UNKNOWN", "REASON_SRC_CLIENT", "REASON_SRC_USER", "TAG_CLUSTER", "TAG_INSTANCE", "TAG_NODE",
    "TAG_NODEGROUP", "WFJC_TIMEOUT",
    "Command", "CommandFunc", "Context", "JobCanceled", "JobReporter", "JobSubmitted", "QuietReporter", "RemoteError",
    "add_common_options", "add_dry_run_option", "add_force_option", "add_list_fields_options", "add_list_options",
    "add_priority_option", "add_submit_options", "add_tag_source_option", "add_tags", "and_filters", "ask_user",
    "build_parser", "decode_error", "format_error", "format_generic_info", "format_log_message",
    "format_query_result", "format_table", "format_time", "format_timestamp", "format_unit", "format_usage",
    "generic_list", "generic_list_fields", "job_id", "job_result", "list_tags", "make_simple_filter", "opcode",
    "parse_fields", "parse_timespec", "poll_job", "priority", "qft_name", "read_tags", "reason_trail",
    "remove_tags", "report_changes", "run", "submit_opcodes", "submit_or_send", "tag_commands", "unknown_fields",
    "yes_no",
]
