"""The memory benchmark's floor keeps the runtime's modules and drops ours."""

from __future__ import annotations

import os

from tests.bench import memfloor


def test_the_floor_imports_the_runtime_and_blocks_what_the_daemon_blocked() -> None:
    listing = "\n".join([
        "loaded sys",
        "loaded twisted.internet.reactor",
        "loaded twisted.plugins.twisted_web",
        "loaded twisted.plugins.ganeti_confd",
        "loaded ganeti",
        "loaded ganeti.confd.tap",
        "loaded ganetix",
        "loaded sitecustomize",
        "loaded __main__",
        "loaded tests.bench.memfloor",
        "blocked OpenSSL",
        "blocked ganeti.nothing",
        "garbage line",
    ])
    assert memfloor.runtime_modules(listing).splitlines() == [
        "loaded sys", "loaded twisted.internet.reactor", "loaded twisted.plugins.twisted_web",
        "loaded ganetix", "blocked OpenSSL"]


def test_the_probe_lists_modules_on_sigusr2_only_when_asked(tmp_path: object) -> None:
    """The probe's source runs as a sitecustomize: without the variable it
    changes nothing; with it, SIGUSR2 writes the listing atomically."""
    import signal

    directory = str(tmp_path)
    previous = signal.getsignal(signal.SIGUSR2)
    saved = os.environ.get(memfloor.PROBE_ENV)
    try:
        os.environ.pop(memfloor.PROBE_ENV, None)
        exec(compile(memfloor.PROBE_SOURCE, "sitecustomize.py", "exec"), {})
        assert signal.getsignal(signal.SIGUSR2) is previous
        os.environ[memfloor.PROBE_ENV] = directory
        namespace: dict[str, object] = {}
        exec(compile(memfloor.PROBE_SOURCE, "sitecustomize.py", "exec"), namespace)
        handler = signal.getsignal(signal.SIGUSR2)
        assert handler is namespace["_list_modules"]
        handler(signal.SIGUSR2, None)
        with open(os.path.join(directory, "%d.modules" % os.getpid())) as handle:
            lines = handle.read().splitlines()
        assert "loaded sys" in lines and "loaded tests.bench.memfloor" in lines
        assert os.listdir(directory) == ["%d.modules" % os.getpid()]
    finally:
        signal.signal(signal.SIGUSR2, previous)
        if saved is None:
            os.environ.pop(memfloor.PROBE_ENV, None)
        else:
            os.environ[memfloor.PROBE_ENV] = saved
