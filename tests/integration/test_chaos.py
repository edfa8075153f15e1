"""Crash trials on a real 3-node loopback cluster (the short version of
C{scripts/chaos}): for each fault, a stream of jobs over LUXI, the fault's
daemons killed with SIGKILL at a random moment and restarted as an admin
does, then every promise checked (L{ganeti.testing.chaos_checks}): every
acknowledged job ended, none ran twice, no lock left held, the config
serial and the job files equal on every candidate, C{gnt-cluster verify}
passes, no instance half-removed, no job failed by a fault that took
nothing from it.  C{GANETI_CHAOS_SEED} changes the seed (printed on failure).
"""

from __future__ import annotations

import os
import random

import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti.testing.chaos import FAULTS, ChaosCluster
from ganeti.testing.chaos_run import run_trial

SEED = int(os.environ.get("GANETI_CHAOS_SEED", "20261124"))
TRIALS = int(os.environ.get("GANETI_CHAOS_TRIALS", "1"))


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest_twisted.ensureDeferred
async def test_crash_trial(root, fault):
    rng = random.Random("%d-%s" % (SEED, fault))
    async with ChaosCluster(reactor, root, prefix="gcht") as cluster:
        results = []
        for _ in range(TRIALS):
            result = await run_trial(cluster, fault, rng, seconds=3.0)
            results.append(result)
            if result.broken:
                break
    assert sum(r.acknowledged for r in results) >= 5, "the stream made too little progress to test anything"
    broken = [r.describe() for r in results if r.violations]
    assert broken == [], "seed %d\n%s" % (SEED, "\n".join(broken))
