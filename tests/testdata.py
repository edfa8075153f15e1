"""Where the real Ganeti 3.0.2 files live: C{tests/data/ganeti-3.0.2} in the checkout.

Files written by Debian's ganeti 3.0.2 (see the README.md there); the suite reads
nothing outside the checkout and its temporary directories (tests/conftest.py
checks that).
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
TESTDATA = DATA / "ganeti-3.0.2"
