"""Asking the user a question on the terminal (Ganeti's C{AskUser}).

Without a terminal (C{/dev/tty} cannot be opened, or it is closed) the
answer is the last choice's value, which for the default yes/no is "no".
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def ask_user(text: str, choices: list[tuple[str, Any, str]] | None = None, tty: str = "/dev/tty") -> Any:
    """Ask a question on the terminal; without one, the last choice's value.

    @param choices: C{(key, value, description)}; default yes/no.
    """
    if choices is None:
        choices = [("y", True, "Perform the operation"), ("n", False, "Do not perform the operation")]
    answer = choices[-1][1]
    try:
        handle = open(tty, "r+")
    except OSError:
        return answer
    keys = [c[0] for c in choices]
    prompt = "/".join(keys[:-1] + ["[%s]" % keys[-1], "?"])
    values = {c[0]: c[1] for c in choices}
    with handle:
        while True:
            handle.write("%s\n%s: " % (text, prompt))
            handle.flush()
            line = handle.readline()
            if not line:
                return answer
            reply = line.strip().lower()
            if reply in values:
                return values[reply]
            if reply == "":
                return answer
            if reply == "?":
                for key, _, description in choices:
                    handle.write(" %s - %s\n" % (key, description))
                handle.write("\n")
