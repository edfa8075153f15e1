"""The gnt-* console scripts: a tool's command list without importing the tool.

C{gnt-instance} with no command, or with only C{--help}, prints the list
of its commands (Ganeti's usage text) from L{ganeti.client.helptable}, a
table generated from the tools' own C{COMMANDS}; anything else imports the
tool and runs its C{main}.  A tool module imports its options, the job
machinery and the LUXI contract, several times what printing the list
costs, so the list is answered before any of that is loaded.

After adding or changing a command, regenerate the table (a test fails
while it is stale)::

    python -m ganeti.client.launch --write

Standard library only, and only C{sys} before a tool is chosen; argparse is imported without C{gettext}
(L{_argparse_untranslated}).
"""

from __future__ import annotations

import sys

#: console script -> the module whose C{main} runs it
TOOLS = {
    "gnt-backup": "ganeti.client.gnt_backup",
    "gnt-cluster": "ganeti.client.gnt_cluster",
    "gnt-debug": "ganeti.client.gnt_debug",
    "gnt-filter": "ganeti.client.gnt_filter",
    "gnt-group": "ganeti.client.gnt_group",
    "gnt-instance": "ganeti.client.gnt_instance",
    "gnt-job": "ganeti.client.gnt_job",
    "gnt-network": "ganeti.client.gnt_network",
    "gnt-node": "ganeti.client.gnt_node",
    "gnt-os": "ganeti.client.gnt_os",
    "gnt-storage": "ganeti.client.gnt_storage",
}


def usage_lines(prog: str, commands: dict[str, str]) -> list[str]:
    """Ganeti's list of commands (C{commands}: name -> one-line help), shown
    for C{--help} or a missing command."""
    width = min(60, max(map(len, commands)))
    room = 79 - 3 - width
    lines = [
        "Usage: %s {command} [options...] [argument...]" % prog,
        "%s <command> --help to see details, or man %s" % (prog, prog),
        "Global option (before or after the command): --root DIR",
        "",
        "Commands:",
    ]
    for name in sorted(commands):
        text = commands[name]
        if len(text) <= room and text == text.strip() and text.isprintable():  # textwrap would not change it
            wrapped = [text] if text else [""]
        else:
            import textwrap

            wrapped = textwrap.wrap(text, room) or [""]
        lines.append(" %-*s - %s" % (width, name, wrapped[0]))
        lines.extend(" %-*s   %s" % (width, "", more) for more in wrapped[1:])
    lines.append("")
    return lines


def _after_root(args: list[str]) -> list[str]:
    """C{args} without a leading C{--root DIR} / C{--root=DIR} (as the runner takes it)."""
    while args:
        if args[0] == "--root" and len(args) > 1:
            args = args[2:]
        elif args[0].startswith("--root="):
            args = args[1:]
        else:
            break
    return args


def launch(prog: str, argv: list[str] | None = None, console: bool = False) -> int:
    """Run tool C{prog}: the command list at once, or the tool's C{main}.

    @param console: this process is the tool's own (its console script):
        the garbage collector does not run while the tool is imported, and
        what the imports made is then frozen (C{gc.freeze}), so that no
        collection walks over it again.  Importing a tool makes about
        14,000 objects the collector tracks (the modules' functions, classes
        and dictionaries) and frees no cycle among them, yet its passes over
        them were 15 M instructions of a C{gnt-instance list} (142 M,
        valgrind's count), a tenth."""
    rest = _after_root(list(sys.argv[1:] if argv is None else argv))
    if not rest or rest[0] in ("-h", "--help"):
        from ganeti.client.helptable import USAGE  # wrapped when generated: no textwrap (and re) here

        stream = sys.stdout if rest else sys.stderr
        stream.write("\n".join(USAGE[prog]) + "\n")
        return 0 if rest else 2
    import importlib

    if console:
        import gc

        gc.disable()
    try:
        _argparse_untranslated()
        main = importlib.import_module(TOOLS[prog]).main
    finally:
        if console:
            gc.freeze()
            gc.enable()
    return int(main(argv))


def _same(message: str) -> str:
    return message


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _argparse_untranslated() -> None:
    """Import argparse with its messages untranslated, as the tools' own are.

    argparse imports C{gettext} only to translate its few messages, and that
    import brings C{locale} and compiles C{gettext}'s plural-forms regular
    expression: 3 ms of every command's start, while no catalog of Python's
    own messages is installed on the systems Ganeti runs on.  argparse is
    given C{gettext} and C{ngettext} that return the English text; the
    stand-in is removed at once, so any later C{import gettext} gets the real
    module."""
    if "argparse" in sys.modules or "gettext" in sys.modules:
        return
    stand_in = type(sys)("gettext")
    stand_in.gettext, stand_in.ngettext = _same, _plural  # type: ignore[attr-defined]
    sys.modules["gettext"] = stand_in
    try:
        import argparse  # noqa: F401
    finally:
        if sys.modules.get("gettext") is stand_in:
            del sys.modules["gettext"]


def gnt_backup() -> int:
    return launch("gnt-backup", console=True)


def gnt_cluster() -> int:
    return launch("gnt-cluster", console=True)


def gnt_debug() -> int:
    return launch("gnt-debug", console=True)


def gnt_filter() -> int:
    return launch("gnt-filter", console=True)


def gnt_group() -> int:
    return launch("gnt-group", console=True)


def gnt_instance() -> int:
    return launch("gnt-instance", console=True)


def gnt_job() -> int:
    return launch("gnt-job", console=True)


def gnt_network() -> int:
    return launch("gnt-network", console=True)


def gnt_node() -> int:
    return launch("gnt-node", console=True)


def gnt_os() -> int:
    return launch("gnt-os", console=True)


def gnt_storage() -> int:
    return launch("gnt-storage", console=True)


def generate() -> str:
    """The text of L{ganeti.client.helptable}, from the tools' C{COMMANDS}."""
    import importlib
    import pprint

    table = {prog: {name: command.help for name, command in importlib.import_module(module).COMMANDS.items()}
             for prog, module in TOOLS.items()}
    usage = {prog: usage_lines(prog, commands) for prog, commands in table.items()}
    return (
        '"""Generated by C{python -m ganeti.client.launch --write} from the tools\'\n'
        'C{COMMANDS}: the list of commands and their one-line help that C{--help}\n'
        'prints (L{ganeti.client.launch.usage_lines}, wrapped here).  Do not edit."""\n\n'
        "USAGE: dict[str, list[str]] = " + pprint.pformat(usage, width=110, sort_dicts=True) + "\n"
    )


if __name__ == "__main__":
    import os

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helptable.py")
    if sys.argv[1:] == ["--write"]:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(generate())
        print("wrote", path)
    else:
        sys.stdout.write(generate())
