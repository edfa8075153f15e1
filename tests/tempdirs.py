"""Temporary paths for trial test cases run by pytest, outside the checkout.

Trial's C{TestCase.mktemp} makes its directories under the working
directory, which under pytest is the checkout: a test that leaves a socket
there (a Unix server's) breaks whatever copies the tree later (the
packaging tests), and the files show up in C{git status}.
"""

from __future__ import annotations

import os
import shutil
import tempfile


class TempDirs:
    """A mixin for a trial C{TestCase}: L{mktemp} under the system's temporary directory, removed after the test."""

    def mktemp(self) -> str:
        base = tempfile.mkdtemp(prefix="gnt-trial-")
        self.addCleanup(shutil.rmtree, base, True)  # type: ignore[attr-defined]
        return os.path.join(base, "temp")
