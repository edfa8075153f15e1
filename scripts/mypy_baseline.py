#!/usr/bin/env python3
"""Rewrite pyproject.toml's mypy baseline after merging code older than the lint.

A branch that started before scripts/lint existed may bring in type errors.
This removes the C{# type: ignore} comments mypy calls unused, then lists
again, per module, the error codes mypy finds without the baseline.  Use it
only for such a merge: fix new errors instead of letting them into the list.

Run from the checkout with the venv's Python: C{.venv/bin/python scripts/mypy_baseline.py}.
It refuses to grow the baseline: when mypy finds a module or an error code
the baseline does not already switch off, it lists them and leaves
pyproject.toml as it was (fix those errors instead).

C{scripts/mypy_baseline.py --check} (run by scripts/lint) counts the modules
and the module x error-code pairs of the baseline and fails when either
exceeds the limit recorded in scripts/mypy_baseline.limit: lowering the
baseline is free, raising it needs an edit of that file a reviewer sees.
Lower the limits there when the baseline shrinks.
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import tempfile
import tomllib

START = "# The type errors found when mypy was first run"
END = "# The changelog:"
HEADER = """\
# The type errors found when mypy was first run (2026-11, issue 13): each
# module listed keeps only the error codes it had then switched off, so nothing
# new of another kind gets in, and every module without an entry is checked in
# full. Shrink this list; do not grow it: scripts/lint fails when it holds more
# modules or module x code pairs than scripts/mypy_baseline.limit allows, and
# scripts/mypy_baseline.py (which rewrites it after merging a branch older than
# the lint) refuses to add to it. What remains (issue 22): Optional uuids of
# config objects passed on as str in cmdlib (arg-type, index, list-item), the
# LUXI transports (union-attr), the IHypervisor interface declaring results KVM
# gives as Deferreds (override), and a lambda with a default in testing.chaos.
"""
LIMIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mypy_baseline.limit")
ERROR = re.compile(r"^([^:]+\.py):(\d+): error: (.*)\[([a-z-]+)\]$")
UNUSED = re.compile(r'Unused "type: ignore(?:\[([^\]]*)\])?" comment')
IGNORE = re.compile(r"\s*# type: ignore(?:\[([^\]]*)\])?")


def mypy(config: str | None = None) -> list[str]:
    """mypy's output lines (the configuration of pyproject.toml, or C{config})."""
    argv = [sys.executable, "-m", "mypy"] + (["--config-file", config] if config else [])
    return subprocess.run(argv, capture_output=True, text=True).stdout.splitlines()


def remove_unused_ignores() -> int:
    """Drop the ignore comments (or the codes in them) that mypy reports unused."""
    edits: dict[str, dict[int, set[str] | None]] = collections.defaultdict(dict)
    for line in mypy():
        match = ERROR.match(line.strip())
        if match and match.group(4) == "unused-ignore":
            unused = UNUSED.search(match.group(3))
            codes = unused.group(1) if unused else None
            edits[match.group(1)][int(match.group(2))] = (
                {c.strip() for c in codes.split(",")} if codes else None)
    for path, lines_codes in edits.items():
        with open(path) as handle:
            lines = handle.read().split("\n")
        for number, codes in lines_codes.items():
            text = lines[number - 1]
            found = IGNORE.search(text)
            if found is None:
                continue
            keep = [c.strip() for c in (found.group(1) or "").split(",") if c.strip()]
            keep = [c for c in keep if codes is not None and c not in codes]
            comment = "  # type: ignore[%s]" % ", ".join(keep) if keep else ""
            lines[number - 1] = (text[:found.start()] + comment + text[found.end():]).rstrip()
        with open(path, "w") as handle:
            handle.write("\n".join(lines))
    return sum(len(v) for v in edits.values())


def baseline(text: str) -> dict[str, set[str]]:
    """The error codes the baseline section of pyproject.toml's C{text} switches off, per module."""
    section = tomllib.loads(text[text.index(START):text.index(END)])
    modules: dict[str, set[str]] = collections.defaultdict(set)
    for override in section.get("tool", {}).get("mypy", {}).get("overrides", []):
        names = override["module"]
        for name in [names] if isinstance(names, str) else names:
            modules[name].update(override.get("disable_error_code", []))
    return dict(modules)


def limits() -> dict[str, int]:
    """The recorded maxima: C{modules} and C{pairs} (module x error code)."""
    found: dict[str, int] = {}
    with open(LIMIT) as handle:
        for line in handle:
            line = line.split("#", 1)[0].strip()
            if line:
                key, _, value = line.partition("=")
                found[key.strip()] = int(value)
    return found


def check() -> int:
    """Fail (1) when the baseline holds more modules or pairs than the limits allow."""
    with open("pyproject.toml") as handle:
        modules = baseline(handle.read())
    allowed = limits()
    counts = {"modules": len(modules), "pairs": sum(len(c) for c in modules.values())}
    status = 0
    for key, count in counts.items():
        if count > allowed[key]:
            print("mypy baseline: %d %s in pyproject.toml's baseline, more than the %d allowed by"
                  " scripts/mypy_baseline.limit: fix the new type errors instead of listing them"
                  % (count, key, allowed[key]), file=sys.stderr)
            status = 1
        elif count < allowed[key]:
            print("mypy baseline: %d %s, below the limit of %d: lower it in"
                  " scripts/mypy_baseline.limit" % (count, key, allowed[key]), file=sys.stderr)
    return status


def rewrite_baseline() -> int:
    """Replace the baseline with the codes each module has without it; never grow it.

    @return: the number of modules listed, or -1 when mypy finds errors the
        baseline does not switch off (then pyproject.toml is left as it was).
    """
    with open("pyproject.toml") as handle:
        text = handle.read()
    start, end = text.index(START), text.index(END)
    before = baseline(text)
    with tempfile.NamedTemporaryFile("w", suffix=".toml") as bare:
        bare.write(text[:start] + text[end:])
        bare.flush()
        output = mypy(bare.name)
    modules: dict[str, set[str]] = collections.defaultdict(set)
    for line in output:
        match = ERROR.match(line.strip())
        if match:
            module = match.group(1)[:-3].replace("/", ".").removesuffix(".__init__")
            modules[module].add(match.group(4))
    new = sorted("%s [%s]" % (module, code) for module, codes in modules.items()
                 for code in codes - before.get(module, set()))
    if new:
        print("refusing to grow the mypy baseline; fix these instead:\n  " + "\n  ".join(new),
              file=sys.stderr)
        return -1
    groups: dict[tuple[str, ...], list[str]] = collections.defaultdict(list)
    for module, codes in modules.items():
        groups[tuple(sorted(codes))].append(module)
    sections = [HEADER]
    for codes, names in sorted(groups.items(), key=lambda item: (len(item[0]), item[0])):
        sections.append("[[tool.mypy.overrides]]\nmodule = [%s]\ndisable_error_code = [%s]\n" % (
            ", ".join('"%s"' % n for n in sorted(names)), ", ".join('"%s"' % c for c in codes)))
    with open("pyproject.toml", "w") as handle:
        handle.write(text[:start] + "\n".join(sections) + "\n" + text[end:])
    return len(modules)


def main() -> int:
    if sys.argv[1:] == ["--check"]:
        return check()
    # the baseline first: mypy without it still honours the ignore comments,
    # which a first pass under the old baseline could call unused and drop
    count = rewrite_baseline()
    if count < 0:
        return 1
    removed = remove_unused_ignores()  # unused ones, and those the baseline made unneeded
    print("%d unused ignores removed; %d modules in the baseline" % (removed, count))
    return check()


if __name__ == "__main__":
    sys.exit(main())
