"""How the gnt-* tools format what they print.

The output formatting the tools share, kept as Ganeti prints it so that
scripts written for Ganeti keep working:

  - tables: columns separated by one space and padded to the widest cell
    (numbers right-aligned, the last column not padded), or joined by
    C{--separator} without padding; C{--no-headers} drops the title row;
  - query cells without a value: C{??} unknown field, C{?} no data,
    C{-} not applicable, C{*} node offline (C{-v}: C{(unknown)}, ...);
  - sizes in MiB: C{512M}, C{1.5G}, C{2.0T} in tables, plain MiB with a
    separator; booleans C{Y}/C{N}; times C{2024-01-31 12:00:00[.123456]};
  - C{gnt-job info} style nested output (valid YAML, like Ganeti's
    C{PrintGenericInfo}).

Standard library only: every tool imports this.
"""

from __future__ import annotations

import time

from ganeti.jobs.lifecycle import ELOG_MESSAGE
from ganeti.querydefs import (  # noqa: F401  (RS_NORMAL re-exported for the tools)
    QFT_BOOL,
    QFT_FLOAT,
    QFT_NUMBER,
    QFT_OTHER,
    QFT_TEXT,
    QFT_TIMESTAMP,
    QFT_UNIT,
    QFT_UNKNOWN,
    RS_NODATA,
    RS_NORMAL,
    RS_OFFLINE,
    RS_UNAVAIL,
    RS_UNKNOWN,
)
from ganeti.units import format_unit  # noqa: F401  (re-exported for the tools)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping, Sequence

#: exit status of a query naming unknown fields (Ganeti's EXIT_UNKNOWN_FIELD)
EXIT_UNKNOWN_FIELD = 14

#: cell status -> (verbose text, terse text)
RSS_DESCRIPTION = {
    RS_UNKNOWN: ("(unknown)", "??"),
    RS_NODATA: ("(nodata)", "?"),
    RS_UNAVAIL: ("(unavail)", "-"),
    RS_OFFLINE: ("(offline)", "*"),
}

#: overall status of a formatted query result
QR_NORMAL = 0
QR_UNKNOWN = 1
QR_INCOMPLETE = 2

_QFT_NAMES = {
    QFT_UNKNOWN: "Unknown",
    QFT_TEXT: "Text",
    QFT_BOOL: "Boolean",
    QFT_NUMBER: "Number",
    QFT_FLOAT: "Floating-point number",
    QFT_UNIT: "Storage size",
    QFT_TIMESTAMP: "Timestamp",
    QFT_OTHER: "Custom",
}


#: how to show a value of a field: (function, align right)
Formatter = "tuple[Callable[[Any], str], bool]"


def qft_name(kind: str) -> str:
    """The user-visible name of a field kind (C{list-fields} "Type" column)."""
    return _QFT_NAMES.get(kind, kind)


# --- scalar values ----------------------------------------------------------------
def format_bool(value: Any) -> str:
    return "Y" if value else "N"


def format_time(value: Any, usecs: Any = None) -> str:
    """Local time C{YYYY-MM-DD HH:MM:SS[.uuuuuu]} of epoch seconds, or C{N/A}."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "N/A"
    text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
    if usecs is not None:
        text += ".%06d" % usecs
    return text


def format_timestamp(ts: Any) -> str:
    """A job timestamp C{[seconds, microseconds]}, or C{?}."""
    if not isinstance(ts, (list, tuple)) or len(ts) != 2:
        return "?"
    return format_time(ts[0], usecs=ts[1])


def safe_encode(text: str) -> str:
    """Escape what a terminal should not interpret (Ganeti's C{SafeEncode}):
    tabs, newlines and other control characters become C{\\t}, C{\\n}, C{\\xNN}."""
    if text.isprintable():
        return text
    out = []
    for char in text:
        if char == "\t":
            out.append("\\t")
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif not char.isprintable():
            code = ord(char)
            out.append("\\x%02x" % code if code < 256 else "\\u%04x" % code)
        else:
            out.append(char)
    return "".join(out)


def format_log_message(log_type: str, message: Any) -> str:
    """The text of a job log entry."""
    if log_type != ELOG_MESSAGE or not isinstance(message, str):
        message = str(message)
    return safe_encode(message)


# --- tables ----------------------------------------------------------------------
def format_table(
    rows: Sequence[Sequence[str]],
    titles: Sequence[str] | None,
    align_right: Sequence[bool],
    separator: str | None,
) -> list[str]:
    """Lay out rows of strings (Ganeti's C{FormatTable}).

    @param titles: the header row, or C{None} for none (C{--no-headers}).
    @param separator: joins the cells as they are; C{None}: one space
        between columns padded to their widest cell, the last column not
        padded unless it is right-aligned.
    """
    data = ([list(titles)] if titles is not None else []) + [list(row) for row in rows]
    if separator is not None:
        return [separator.join(row) for row in data]
    if not align_right:
        return ["" for _ in data]
    width = len(align_right)
    if data and all(len(row) == width for row in data):
        return _format_columns(list(zip(*data)), align_right)
    widths = [0] * len(align_right)
    for row in data:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))
    if not align_right[-1]:
        widths[-1] = 0
    lines = []
    for row in data:
        cells = [
            cell.rjust(width) if right else cell.ljust(width)
            for cell, width, right in zip(row, widths, align_right)
        ]
        lines.append(" ".join(cells))
    return lines


def _format_columns(columns: Sequence[Sequence[str]], align_right: Sequence[bool]) -> list[str]:
    """L{format_table} of rows given as their columns, all of the same length:
    one pass per column (10,000 instances: 50,000 cells)."""
    padded: list[Sequence[str]] = []
    last = len(columns) - 1
    for index, (column, right) in enumerate(zip(columns, align_right)):
        width = max(map(len, column)) if column else 0
        if right:
            padded.append([cell.rjust(width) for cell in column])
        elif index == last or not width:
            padded.append(column)
        else:
            padded.append([cell.ljust(width) for cell in column])
    return list(map(" ".join, zip(*padded)))


def _default_formatter(kind: str, unit: str) -> tuple[Callable[[Any], str], bool]:
    if kind == QFT_UNIT:
        return (lambda value: format_unit(value, unit)), True
    if kind == QFT_BOOL:
        return format_bool, False
    if kind in (QFT_NUMBER, QFT_FLOAT):
        return str, True
    if kind == QFT_TIMESTAMP:
        return format_time, False
    return str, False


def unknown_fields(fdefs: Sequence[dict[str, Any]]) -> list[str]:
    """Names of the fields the server did not know."""
    return [f["name"] for f in fdefs if f.get("kind") == QFT_UNKNOWN]


def format_query_result(
    response: dict[str, Any],
    unit: str | None = None,
    overrides: Mapping[str, tuple[Callable[[Any], str], bool]] | None = None,
    separator: str | None = None,
    header: bool = True,
    verbose: bool = False,
) -> tuple[int, list[str]]:
    """Lay out a LUXI C{Query} answer (Ganeti's C{FormatQueryResult}).

    @param unit: for C{unit} fields; default C{h} in tables, C{m} with a separator.
    @param overrides: field name -> (function, align right), replacing the
        formatting of the field's kind.
    @return: (L{QR_NORMAL}, L{QR_UNKNOWN} if a field is unknown, or
        L{QR_INCOMPLETE} if some cell has no value; the lines).
    """
    if unit is None:
        unit = "m" if separator else "h"
    overrides = overrides or {}
    fdefs = response.get("fields") or []
    columns = [overrides.get(f["name"]) or _default_formatter(f.get("kind", QFT_OTHER), unit) for f in fdefs]
    seen: set[int] = set()
    data = response.get("data") or []
    width = len(columns)
    if data and width and all(len(row) == width for row in data):
        rows: list[Any] = _format_cells(data, columns, verbose, seen)
    else:
        rows = []
        for row in data:
            cells = []
            for (status, value), (fn, _) in zip(row, columns):
                seen.add(status)
                if status == RS_NORMAL:
                    cells.append(fn(value))
                else:
                    verbose_text, terse = RSS_DESCRIPTION.get(status, ("(status %s)" % status, "?%s" % status))
                    cells.append(verbose_text if verbose else terse)
            rows.append(cells)
    titles = [f["title"] for f in fdefs] if header else None
    lines = format_table(rows, titles, [right for _, right in columns], separator)
    if RS_UNKNOWN in seen or (not rows and unknown_fields(fdefs)):
        status = QR_UNKNOWN
    elif seen - {RS_NORMAL}:
        status = QR_INCOMPLETE
    else:
        status = QR_NORMAL
    return status, lines


def _format_cells(data: Sequence[Sequence[Any]], columns: Sequence[tuple[Callable[[Any], str], bool]], verbose: bool,
                  seen: set[int]) -> list[tuple[str, ...]]:
    """The text rows of query cells C{data} (rows of C{[status, value]}, each
    as long as C{columns}), formatted column by column; adds the statuses
    met to C{seen}."""
    texts: list[list[str]] = []
    for column, (fn, _) in zip(zip(*data), columns):
        statuses = {cell[0] for cell in column}
        seen |= statuses
        if statuses == {RS_NORMAL}:
            texts.append([fn(cell[1]) for cell in column])
            continue
        out = []
        for status, value in column:
            if status == RS_NORMAL:
                out.append(fn(value))
            else:
                verbose_text, terse = RSS_DESCRIPTION.get(status, ("(status %s)" % status, "?%s" % status))
                out.append(verbose_text if verbose else terse)
        texts.append(out)
    return list(zip(*texts))


# --- nested information (gnt-job info) ----------------------------------------------
def format_generic_info(data: Any) -> str:
    """Nested data as indented YAML, the layout of Ganeti's C{PrintGenericInfo}.

    @param data: dicts (printed with sorted keys); lists of C{(key, value)}
        or C{(key, value, group)} tuples (ordered dicts; values of entries
        sharing a group are aligned); lists; tuples of scalars (printed
        inline as C{[a, b]}); anything else is printed with C{str}.
    """
    out: list[str] = []
    _info(out, data, 0, False)
    return "".join(out).rstrip("\n")


_INDENT = "  "


def _is_container(value: Any) -> bool:
    return isinstance(value, (list, dict, tuple))


def _info(out: list[str], data: Any, level: int, after_key: bool) -> None:
    if isinstance(data, dict):
        if not data:
            out.append("\n")
        else:
            _info_entries(out, [(key, data[key]) for key in sorted(data)], level, after_key)
    elif isinstance(data, list) and data and isinstance(data[0], tuple):
        _info_entries(out, data, level, after_key)
    elif isinstance(data, tuple) and not any(_is_container(item) for item in data):
        out.append("[%s]\n" % ", ".join(str(item) for item in data))
    elif isinstance(data, (list, tuple)):
        if not data:
            out.append("\n")
            return
        if after_key:
            out.append("\n")
        for index, item in enumerate(data):
            if index or after_key:
                out.append(_INDENT * level)
            out.append("- ")
            _info(out, item, level + 1, False)
    else:
        out.append("%s\n" % (data,))


def _info_entries(out: list[str], entries: Sequence[Any], level: int, after_key: bool) -> None:
    widths: dict[Any, int] = {}
    for entry in entries:
        if len(entry) > 2:
            widths[entry[2]] = max(widths.get(entry[2], 0), len(str(entry[0])))
    if after_key:
        out.append("\n")
    for index, entry in enumerate(entries):
        key, value = str(entry[0]), entry[1]
        if index or after_key:
            out.append(_INDENT * level)
        out.append(key + ": ")
        if len(entry) > 2:
            out.append(" " * (widths[entry[2]] - len(key)))
        _info(out, value, level + 1, True)


_ROMAN = ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
          (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"))


def to_roman(value: Any, convert: bool = True) -> Any:
    """C{value} in Roman numerals (C{--roman}), as Ganeti's C{TryToRoman}:
    integers 1 to 4999 only, anything else unchanged."""
    if not convert or isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 5000:
        return value
    out = []
    for number, letters in _ROMAN:
        count, value = divmod(value, number)
        out.append(letters * count)
    return "".join(out)


def grouped_params(params: Any, roman: bool = False) -> Any:
    """Nested parameters with string values (Ganeti's C{_FormatGroupedParams})."""
    if isinstance(params, dict):
        return {key: grouped_params(value, roman) for key, value in params.items()}
    return str(to_roman(params, roman))
