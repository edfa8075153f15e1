import pytest

from ganeti.testing.daemons import make_root, remove_root
from tests import hostguard

#: the guard of tests/hostguard.py: installed once (audit hooks stay), active
#: only while a test module is collected or a test phase runs
_GUARD = hostguard.HostGuard(hostguard.allowed_roots())
_GUARD.install()


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    _GUARD.start()
    outcome = yield
    found = _GUARD.take()
    if found:
        report = outcome.get_result()
        report.outcome = "failed"
        report.longrepr = hostguard.describe(found)


def _phase(item):
    _GUARD.start()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    _phase(item)
    yield


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    _phase(item)
    yield


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_teardown(item):
    _phase(item)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    found = _GUARD.take()
    outcome = yield
    if found:
        report = outcome.get_result()
        previous = "" if report.passed else "\n\n%s" % (report.longreprtext,)
        report.outcome = "failed"
        report.longrepr = hostguard.describe(found) + previous


@pytest.fixture
def root():
    """A fresh node root with a short path (Unix socket paths must fit)."""
    paths = make_root()
    yield paths
    remove_root(paths)
