"""The list and list-fields commands of the gnt-* tools (Ganeti's C{GenericList}).

L{generic_list} runs a LUXI C{Query} and prints the answer as a table;
L{generic_list_fields} describes the fields of a resource.  Unknown
fields: a warning on stderr, and exit status 14
(L{ganeti.client.formatting.EXIT_UNKNOWN_FIELD}).
"""

from __future__ import annotations

from ganeti.client.command import EXIT_SUCCESS, Context
from ganeti.client.formatting import (
    EXIT_UNKNOWN_FIELD,
    QR_UNKNOWN,
    format_query_result,
    format_table,
    qft_name,
    unknown_fields,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping


def generic_list(
    ctx: Context,
    resource: str,
    fields: list[str],
    qfilter: Any = None,
    overrides: Mapping[str, tuple[Callable[[Any], str], bool]] | None = None,
) -> int:
    """Query C{resource} and print it as a table; Ganeti's C{GenericList}.

    Uses the options of L{add_list_options}.  Unknown fields: a warning,
    their cells shown as C{??}, exit status 14.
    """
    opts = ctx.opts
    response = ctx.client().query(resource, fields, qfilter)
    unknown = unknown_fields(response["fields"])
    if unknown:
        ctx.err("Warning: Queried for unknown fields %s" % ", ".join(unknown))
    status, lines = format_query_result(
        response,
        unit=getattr(opts, "units", None),
        overrides=overrides,
        separator=getattr(opts, "separator", None),
        header=not getattr(opts, "no_headers", False),
        verbose=getattr(opts, "verbose", False),
    )
    if lines:
        ctx.out("\n".join(lines))  # one write, not one per row (10,000 instances)
    return EXIT_UNKNOWN_FIELD if status == QR_UNKNOWN else EXIT_SUCCESS


def generic_list_fields(ctx: Context, resource: str) -> int:
    """Describe the query fields of C{resource}; Ganeti's C{GenericListFields}."""
    opts = ctx.opts
    response = ctx.client().query_fields(resource, opts.fields or None)
    unknown = unknown_fields(response["fields"])
    if unknown:
        ctx.err("Warning: Queried for unknown fields %s" % ", ".join(unknown))
    rows = [[f["name"], qft_name(f["kind"]), f["title"], f["doc"]] for f in response["fields"]]
    titles = None if opts.no_headers else ["Name", "Type", "Title", "Description"]
    for line in format_table(rows, titles, [False] * 4, opts.separator):
        ctx.out(line)
    return EXIT_UNKNOWN_FIELD if unknown else EXIT_SUCCESS
