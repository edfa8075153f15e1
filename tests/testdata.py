"""Where the real Ganeti 3.0.2 files live: shared/testdata beside the checkout.

Looked up in order: $GANETI_TESTDATA, <checkout>/../shared/testdata/ganeti-3.0.2,
/work/shared/testdata/ganeti-3.0.2.
"""

from __future__ import annotations

import os
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]
_CANDIDATES = [
    os.environ.get("GANETI_TESTDATA", ""),
    str(_CHECKOUT.parent / "shared" / "testdata" / "ganeti-3.0.2"),
    "/work/shared/testdata/ganeti-3.0.2",
]
TESTDATA = Path(next((c for c in _CANDIDATES if c and os.path.isdir(c)), _CANDIDATES[1]))
