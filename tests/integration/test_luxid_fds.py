"""LuxiD's open file descriptors do not grow with the number of jobs run.

Before the fix every job run through the fork server left LuxiD two pipe
fds, and the queue stopped after ~500 jobs (EMFILE).
"""

from __future__ import annotations

import pytest_twisted
from twisted.internet import reactor

from ganeti.testing.fdcount import measure_luxid_fds


@pytest_twisted.ensureDeferred
async def test_fork_server_jobs_leave_no_descriptor_behind():
    figures = await measure_luxid_fds(reactor, jobs=200, warmup=10)
    assert figures.statuses == {"success": 200}
    assert figures.after_all == figures.after_warmup, figures


@pytest_twisted.ensureDeferred
async def test_directly_started_jobs_leave_no_descriptor_behind():
    figures = await measure_luxid_fds(reactor, jobs=30, warmup=10, luxid_args=("--no-forkserver",))
    assert figures.statuses == {"success": 30}
    assert figures.after_all == figures.after_warmup, figures
