"""The documentation stays readable and true to the tree (issue 22).

  - every package of C{ganeti/} (a directory with an C{__init__.py}, at any
    depth) is described in C{docs/architecture.md} by its path, read from
    the tree when the test runs, so a new package must be documented;
  - every benchmark (C{tests/bench/bench_NAME.py}) is in C{docs/benchmarks.md};
  - every relative link of C{README.md} and C{docs/*.md} names a file that
    exists, and an anchor the target has;
  - lines (but table rows and lines with a link) and table cells stay short.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ganeti

TOP = Path(ganeti.__file__).resolve().parent.parent
DOCS = TOP / "docs"
PAGES = [TOP / "README.md", *sorted(DOCS.glob("*.md"))]

#: longest line (table rows and lines with a link may be longer)
MAX_LINE = 120
#: most words in one table cell
MAX_CELL_WORDS = 25

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def packages(root: Path) -> list[str]:
    """Every package under C{root}'s parent, as C{ganeti/a/b/}."""
    return sorted(
        str(init.parent.relative_to(root.parent)) + "/" for init in root.rglob("__init__.py")
    )


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|") and not re.match(r"^\|[-| :]+\|$", line)]


def test_packages_are_read_from_the_tree() -> None:
    found = packages(TOP / "ganeti")
    assert "ganeti/" in found and "ganeti/backend/hypervisor/" in found and "ganeti/heartbeat/" in found


@pytest.mark.parametrize("package", packages(TOP / "ganeti"))
def test_every_package_is_in_the_architecture(package: str) -> None:
    assert "`%s`" % package in (DOCS / "architecture.md").read_text(), (
        "%s is not described in docs/architecture.md" % package)


def test_every_benchmark_is_described() -> None:
    text = (DOCS / "benchmarks.md").read_text()
    names = sorted(p.stem[len("bench_"):] for p in (TOP / "tests" / "bench").glob("bench_*.py"))
    assert names
    assert [n for n in names if "## %s\n" % n not in text or "[`%s`]" % n not in text] == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(re.sub(r"```.*?```", "", page.read_text(), flags=re.S)):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_lines_are_short(page: Path) -> None:
    long = [line for line in page.read_text().splitlines()
            if len(line) > MAX_LINE and not line.startswith("|") and "](" not in line]
    assert long == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_table_cells_are_short(page: Path) -> None:
    long = [cell.strip() for row in table_rows(page.read_text())
            for cell in row.strip("|").split(" | ") if len(cell.split()) > MAX_CELL_WORDS]
    assert long == []
