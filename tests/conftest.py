import pytest
from hypothesis import HealthCheck, settings

from ganeti.testing.daemons import make_root, remove_root
from tests import hostguard

# Hypothesis: no deadline per example and no "input generation is slow" health
# check, whose timings fail a test on a loaded machine (the suite must pass on
# one); each test's own settings (examples, stateful steps) still apply
settings.register_profile("ganeti", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ganeti")

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


# --- the order and the groups of a parallel run (pytest-xdist: scripts/test) -------------------

#: the modules whose tests take longest, by their longest test (the whole runs' --durations of
#: 2026-11-29, docs/testing.md), the longest first: a parallel run starts them first, so that none
#: is left for the end (a 150 s test that starts in the last minutes makes the run that much longer)
SLOW_FIRST = (
    "tests/integration/test_ganeti_tools.py",
    "tests/integration/test_watcher.py",
    "tests/integration/test_rbd.py",
    "tests/integration/test_packaging.py",
    "tests/integration/test_networks.py",
    "tests/integration/test_rapi.py",
    "tests/integration/test_nodes.py",
    "tests/integration/test_liveness.py",
    "tests/integration/test_webui_browser.py",
    "tests/integration/test_cluster_crypto_commands.py",
    "tests/integration/test_mond.py",
    "tests/integration/test_watcher_kvm.py",
    "tests/integration/test_local_cluster.py",
    "tests/integration/test_kvm_hotplug.py",
    "tests/integration/test_cli_surface.py",
    "tests/integration/test_luxid.py",
    "tests/integration/test_kvm_nic_modes.py",
    "tests/unit/test_locking_properties.py",
    "tests/integration/test_cli_daemons.py",
    "tests/integration/test_wconfd_daemon.py",
    "tests/integration/test_debug_commands.py",
    "tests/integration/test_webui_firefox.py",
    "tests/integration/test_fuzz_sockets.py",
    "tests/integration/test_disk_ops.py",
    "tests/integration/test_extstorage.py",
    "tests/integration/test_auto_failover.py",
    "tests/integration/test_luxid_fds.py",
    "tests/integration/test_rbd_moves.py",
    "tests/integration/test_chaos.py",
    "tests/integration/test_backup.py",
    "tests/integration/test_ha_params.py",
    "tests/integration/test_rapi_cluster.py",
    "tests/integration/test_webui_console.py",
    "tests/unit/test_scheduler.py",
    "tests/integration/test_kvm_guest.py",
    "tests/integration/test_full_disk.py",
    "tests/integration/test_failover.py",
    "tests/integration/test_oob.py",
    "tests/integration/test_hooks.py",
    "tests/integration/test_forthcoming.py",
    "tests/integration/test_disk_convert.py",
    "tests/integration/test_batch_storage_cli.py",
    "tests/unit/test_import_circles.py",
    "tests/unit/test_import_graph.py",
    "tests/unit/test_luxi_contract.py",
    "tests/unit/test_daemon_imports.py",
    "tests/unit/test_confd_wire.py",
)


def _weight(item) -> tuple[int, int]:
    """The slow modules in their order, then the other integration tests, then the unit tests."""
    path = item.nodeid.split("::", 1)[0]
    if path in SLOW_FIRST:
        return (0, SLOW_FIRST.index(path))
    return (1, 0) if path.startswith("tests/integration/") else (2, 0)


def _shares_a_module_fixture(item) -> bool:
    """Whether C{item} uses a fixture of this suite set up once per module
    (or session): such a module's tests run on one worker (one Ceph, one
    built wheel, not one per worker)."""
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        fixture = defs[-1]
        if fixture.scope in ("module", "package", "session") and fixture.baseid:
            return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The slowest modules first (L{SLOW_FIRST}), then the other integration
    tests, then the unit tests (a stable sort: each module keeps its order); under
    pytest-xdist, a module whose tests share a module fixture is one
    C{xdist_group} (C{--dist loadgroup})."""
    items.sort(key=_weight)
    for item in items:
        if _shares_a_module_fixture(item) and not any(item.iter_markers("xdist_group")):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): tests pytest-xdist runs on one worker (--dist loadgroup)")


def pytest_collection_finish(session):
    """With integration tests to run, start the warm launcher of the test daemons now
    (L{ganeti.testing.warmfork}): its imports overlap the first test's setup (not for
    C{--collect-only}, which scripts/test runs first to write the rewritten test modules)."""
    if session.config.option.collectonly:
        return
    if any("/integration/" in str(item.path) for item in session.items):
        from ganeti.testing import warmfork

        warmfork.prestart()
