"""The changelog: news fragments are well named and towncrier builds them."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
FRAGMENT = re.compile(r"^(\d+)\.([a-z]+)(\.\d+)?$")


def _types() -> set[str]:
    config = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["tool"]["towncrier"]
    return {entry["directory"] for entry in config["type"]}


def test_fragments_are_named_issue_dot_type_and_say_something() -> None:
    types = _types()
    assert types == {"feature", "bugfix", "removal", "security", "misc"}
    for path in (CHECKOUT / "newsfragments").iterdir():
        if path.name.startswith("."):
            continue
        match = FRAGMENT.match(path.name)
        assert match and match.group(2) in types, "%s: not <issue>.<type>" % path.name
        assert path.read_text().strip(), "%s is empty" % path.name


def test_towncrier_draft_shows_every_fragment() -> None:
    towncrier = Path(sys.executable).with_name("towncrier")
    result = subprocess.run([str(towncrier), "build", "--draft", "--version", "0.0.0-test"],
                            cwd=CHECKOUT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    for path in (CHECKOUT / "newsfragments").iterdir():
        if FRAGMENT.match(path.name):
            assert path.read_text().strip().splitlines()[0][:60] in result.stdout
