"""What an admin installs: a wheel in a fresh virtualenv runs a cluster, the
systemd units pass systemd-analyze, bash completion completes, logrotate
rotates a log the daemons keep appending to, the cron example is valid."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from typing import Any

import pytest

from ganeti import daemons, logfile
from ganeti.completion import tool_specs

CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PACKAGING = os.path.join(CHECKOUT, "packaging")
BIN = os.path.dirname(sys.executable)
#: a loopback address nobody else's tests use: the one-node cluster has the standard ports
ADDRESS = "127.0.9.1"
SKIPPED_IN_COPY = shutil.ignore_patterns(".venv", ".git", "build", "dist", "__pycache__", "*.egg-info", ".hypothesis", "dropin.cache")


def _run(argv: list[str], timeout: float = 180, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything pointing at the checkout or its venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "GANETI_ROOT", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(CHECKOUT))
    env.update(extra)
    return env


# --- the wheel --------------------------------------------------------------------------
def _build_wheel(tmp: str) -> tuple[str, str]:
    """Build the wheel from a clean copy of the checkout; (wheel path, build output)."""
    source = os.path.join(tmp, "source")
    shutil.copytree(CHECKOUT, source, ignore=SKIPPED_IN_COPY)
    wheels = os.path.join(tmp, "wheels")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", wheels, source], cwd=tmp, env=_clean_env())
    if built.returncode != 0 and re.search(r"(?i)no matching distribution|connection|network is unreachable", built.stdout + built.stderr):
        pytest.skip("no package index reachable to build the wheel: %s" % built.stderr.strip()[-300:])
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = [os.path.join(wheels, name) for name in os.listdir(wheels) if name.endswith(".whl")]
    return wheel, built.stdout + built.stderr


def _check_wheel_contents(wheel: str) -> None:
    with zipfile.ZipFile(wheel) as archive:
        infos = {info.filename: info for info in archive.infolist()}
    names = set(infos)
    for spec in daemons.DAEMONS:
        assert "twisted/plugins/ganeti_%s.py" % spec.package in names
    assert "twisted/__init__.py" not in names and "twisted/plugins/__init__.py" not in names  # never shadow Twisted
    man = sorted(os.listdir(os.path.join(CHECKOUT, "man")))
    data = next(n.split("/")[0] for n in names if ".data/" in n)
    for page in man:
        assert "%s/data/share/man/man8/%s" % (data, page) in names
    assert not [n for n in names if "__pycache__" in n or n.startswith("tests/")]
    for asset in ("index.html", "login.html", "app.js", "login.js", "app.css"):  # the web console, served from here
        assert "ganeti/rapi/ui/static/%s" % asset in names, asset
    mode = infos["ganeti/backend/os/noop/create"].external_attr >> 16
    assert mode & 0o111, oct(mode)
    mode = infos["ganeti/backend/extstorage/loopback/attach"].external_attr >> 16  # the shipped ExtStorage provider
    assert mode & 0o111, oct(mode)


def _site_packages(venv: str) -> str:
    version = "python%d.%d" % sys.version_info[:2]
    return os.path.join(venv, "lib", version, "site-packages")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: Any) -> str:
    """The wheel, built once for this module; its build gave no setuptools warning."""
    path, build_output = _build_wheel(str(tmp_path_factory.mktemp("wheel")))
    assert not re.search(r"(?i)setuptools.*warning|is absent from the .packages. configuration", build_output), build_output
    _check_wheel_contents(path)
    return path


def test_a_system_install_puts_everything_under_the_prefix(wheel: str, tmp_path: Any) -> None:
    """pip install --prefix /usr (staged under --root): plugins beside
    Twisted's, commands in bin, man pages in share/man, OS scripts executable."""
    stage = str(tmp_path / "stage")
    installed = _run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", "--root", stage, "--prefix", "/usr", wheel],
        cwd=str(tmp_path), env=_clean_env(),
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    usr = os.path.join(stage, "usr")
    site = os.path.join(usr, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
    for spec in daemons.DAEMONS:
        assert os.path.isfile(os.path.join(site, "twisted", "plugins", "ganeti_%s.py" % spec.package)), spec.name
    assert not os.path.exists(os.path.join(site, "twisted", "__init__.py"))
    assert os.access(os.path.join(usr, "bin", "gnt-cluster"), os.X_OK)
    assert os.access(os.path.join(site, "ganeti", "backend", "os", "image", "create"), os.X_OK)
    for page in os.listdir(os.path.join(CHECKOUT, "man")):
        assert os.path.isfile(os.path.join(usr, "share", "man", "man8", page)), page
    assert os.path.isfile(os.path.join(usr, "share", "doc", "ganeti-twisted", "LICENSE"))


@pytest.fixture
def short_tmp() -> Any:
    """A fresh directory with a short path under /tmp (the cluster's Unix socket
    paths must fit; a parallel run's tmp_path is longer)."""
    path = tempfile.mkdtemp(prefix="gntpk", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_wheel_in_a_fresh_venv_runs_a_one_node_cluster(wheel: str, short_tmp: str) -> None:
    """pip install of the wheel gives every plugin, command, man page and
    shipped OS (with its modes); the cluster it runs takes a job."""
    tmp = short_tmp

    venv = os.path.join(tmp, "venv")
    assert _run([sys.executable, "-m", "venv", venv]).returncode == 0
    vbin = os.path.join(venv, "bin")
    installed = _run([os.path.join(vbin, "python"), "-m", "pip", "install", "-q", wheel], cwd=tmp, env=_clean_env(), timeout=300)
    if installed.returncode != 0 and re.search(r"(?i)no matching distribution|connection", installed.stdout + installed.stderr):
        pytest.skip("no package index reachable for the dependencies: %s" % installed.stderr.strip()[-300:])
    assert installed.returncode == 0, installed.stdout + installed.stderr
    env = _clean_env(PATH=vbin + os.pathsep + _clean_env()["PATH"])

    found = _run([os.path.join(vbin, "python"), "-c", "import ganeti, sys; print(ganeti.__file__)"], cwd=tmp, env=env)
    assert found.stdout.startswith(venv), found.stdout  # the installed copy, not the checkout
    helped = _run([os.path.join(vbin, "twistd"), "--help"], cwd=tmp, env=env)
    for spec in daemons.DAEMONS:
        assert spec.name in helped.stdout, helped.stdout
    helped = _run([os.path.join(vbin, "ganeti-twistd"), "--help"], cwd=tmp, env=env)
    for spec in daemons.DAEMONS:
        assert spec.name in helped.stdout, helped.stdout
    for script in ("gnt-cluster", "gnt-node", "gnt-instance", "gnt-job", "gnt-debug", "gnt-group", "gnt-os", "gnt-storage",
                   "gnt-filter",
                   "gnt-confd-query", "ganeti-daemons", "ganeti-twistd", "ganeti-local-cluster", "ganeti-wconfd-client"):
        assert os.access(os.path.join(vbin, script), os.X_OK), script
    for page in os.listdir(os.path.join(CHECKOUT, "man")):
        assert os.path.isfile(os.path.join(venv, "share", "man", "man8", page)), page
    for name in ("systemd/ganeti.target", "systemd/ganeti-noded.service", "bash-completion/ganeti", "logrotate/ganeti",
                 "cron/ganeti", "default/ganeti"):
        assert os.path.isfile(os.path.join(venv, "share", "ganeti-twisted", name)), name
    shipped_os = os.path.join(_site_packages(venv), "ganeti", "backend", "os")
    for os_name in ("noop", "image"):
        for script in ("create", "import", "export", "rename", "verify"):
            assert os.access(os.path.join(shipped_os, os_name, script), os.X_OK), (os_name, script)

    root = os.path.join(tmp, "node1")

    def gnt(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        return _run([os.path.join(vbin, tool), "--root", root, *args], cwd=tmp, env=env)

    init = gnt("gnt-cluster", "init", "--primary-ip", ADDRESS, "--node-name", "node1.test", "cluster.test")
    try:
        assert init.returncode == 0, init.stdout + init.stderr
        assert "Unknown command" not in init.stdout + init.stderr
        for spec in daemons.DAEMONS:
            assert "%s: started" % spec.name in init.stdout, init.stdout
        delay = gnt("gnt-debug", "delay", "0.01")
        assert delay.returncode == 0, delay.stdout + delay.stderr
        nodes = gnt("gnt-node", "list", "--no-headers", "-o", "name")
        assert nodes.stdout.split() == ["node1.test"], nodes.stdout + nodes.stderr
        oses = gnt("gnt-os", "list", "--no-headers")
        assert {"noop", "image"} <= set(oses.stdout.split()), oses.stdout + oses.stderr
        master = gnt("gnt-confd-query", "CLUSTER_MASTER")
        assert (master.returncode, master.stdout.strip()) == (0, '"node1.test"'), master.stdout + master.stderr
        log_dir = os.path.join(root, "var", "log", "ganeti")
        with open(os.path.join(log_dir, "commands.log")) as handle:
            commands = handle.read()
        assert "gnt-debug delay pid=" in commands and "Command line: gnt-debug --root %s delay 0.01" % root in commands
        assert "Command line: gnt-confd-query --root %s CLUSTER_MASTER" % root in commands, commands
        with open(os.path.join(log_dir, "jobs.log")) as handle:
            jobs = handle.read()
        assert re.search(r"INFO job \d+ submitted: TEST_DELAY\(1\.0e-2\)", jobs) and re.search(r"INFO job \d+ finished: success", jobs), jobs
        with open(os.path.join(log_dir, "luxi-daemon.log")) as handle:
            luxid_log = handle.read()
        assert "ganeti-luxid pid=" in luxid_log and "connected to WConfD" in luxid_log
        assert "Starting factory" not in luxid_log and "connection established" not in luxid_log, luxid_log
    finally:
        destroyed = gnt("gnt-cluster", "destroy", "--yes-do-it")
        if init.returncode == 0:
            assert destroyed.returncode == 0, destroyed.stdout + destroyed.stderr


# --- systemd ----------------------------------------------------------------------------
UNITS = sorted(os.listdir(os.path.join(PACKAGING, "systemd")))


def test_there_is_a_unit_per_daemon_and_the_targets() -> None:
    assert set(UNITS) == {"%s.service" % spec.name for spec in daemons.DAEMONS} | {
        "ganeti.target", "ganeti-node.target", "ganeti-master.target",
    }


def _installed_units(tmp: str) -> str:
    """The units as an admin installs them into a virtualenv: twistd's path adjusted."""
    units = os.path.join(tmp, "units")
    os.makedirs(units)
    for name in UNITS:
        with open(os.path.join(PACKAGING, "systemd", name)) as handle:
            text = handle.read()
        with open(os.path.join(units, name), "w") as handle:
            handle.write(text.replace("/usr/local/bin/ganeti-twistd", os.path.join(BIN, "ganeti-twistd")))
    return units


def test_systemd_analyze_verify_accepts_the_units(tmp_path: Any) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (scripts/install-admin-tools installs it)")
    units = _installed_units(str(tmp_path))
    manpath = str(tmp_path / "man")
    os.makedirs(os.path.join(manpath, "man8"))
    for page in os.listdir(os.path.join(CHECKOUT, "man")):
        shutil.copy(os.path.join(CHECKOUT, "man", page), os.path.join(manpath, "man8", page))
    checked = _run(
        ["systemd-analyze", "verify", *[os.path.join(units, name) for name in UNITS]],
        env=dict(os.environ, MANPATH=manpath, SYSTEMD_LOG_LEVEL="notice"),
    )
    assert (checked.returncode, checked.stderr.strip(), checked.stdout.strip()) == (0, "", "")


def test_the_defaults_file_names_every_units_variables() -> None:
    with open(os.path.join(PACKAGING, "default", "ganeti")) as handle:
        defaults = set(re.findall(r"^#?([A-Z_]+)=", handle.read(), re.M))
    used = set()
    for name in UNITS:
        with open(os.path.join(PACKAGING, "systemd", name)) as handle:
            used |= set(re.findall(r"\$([A-Z_]+)", handle.read()))
    assert used and used <= defaults and logfile.DEBUG_ENV in defaults


@pytest.mark.parametrize("unit", [name for name in UNITS if name.endswith(".service")])
def test_each_units_command_line_is_accepted_by_its_daemon(unit: str, tmp_path: Any) -> None:
    """ExecStart, with --help for the admin's options, parses: the plugin and options exist."""
    with open(os.path.join(_installed_units(str(tmp_path)), unit)) as handle:
        (exec_start,) = [line.split("=", 1)[1] for line in handle.read().splitlines() if line.startswith("ExecStart=")]
    argv = [word for word in exec_start.split() if not word.startswith("$")] + ["--help"]
    helped = _run(argv, cwd=str(tmp_path), env=_clean_env(PATH=BIN + os.pathsep + os.environ.get("PATH", "")))
    assert helped.returncode == 0, helped.stdout + helped.stderr
    assert "--root" in helped.stdout


# --- bash completion -------------------------------------------------------------------
def _complete(*words: str, cwd: str = CHECKOUT) -> list[str]:
    script = (
        'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); '
        '_ganeti_complete; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    ran = _run(["bash", "--norc", "--noprofile", "-c", script, "bash", os.path.join(PACKAGING, "bash-completion", "ganeti"), *words], cwd=cwd)
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr == ""
    return [line for line in ran.stdout.splitlines() if line]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completion_completes_commands_options_and_values(tmp_path: Any) -> None:
    assert "verify" in _complete("gnt-cluster", "")
    assert _complete("gnt-cluster", "ve") == ["verify", "verify-disks", "version"]
    assert sorted(_complete("gnt-instance", "--root", "/tmp", "st")) == ["start", "startup", "stop"]
    assert _complete("gnt-instance", "add", "--disk-t") == ["--disk-template"]
    assert {"diskless", "file", "sharedfile"} <= set(_complete("gnt-instance", "add", "-t", ""))
    assert _complete("gnt-debug", "delay", "--priority", "") == ["low", "normal", "high"]
    assert _complete("gnt-job", "li") == ["list", "list-fields"]
    assert _complete("ganeti-daemons", "start", "ganeti-n") == ["ganeti-noded"]
    assert _complete("gnt-node", "list", "--no-h") == ["--no-headers"]
    (tmp_path / "roots").mkdir()
    (tmp_path / "rootfile").write_text("")
    assert _complete("gnt-node", "--root", "roo", cwd=str(tmp_path)) == ["roots"]  # directories only
    assert _complete("gnt-nothing", "") == []
    for spec in tool_specs():  # every command and subcommand answers
        assert _complete(spec.name, "-"), spec.name
        for sub in spec.subcommands:
            assert "--help" in _complete(spec.name, sub, "--"), (spec.name, sub)


# --- logrotate and cron ---------------------------------------------------------------
def _logrotate() -> str | None:
    return shutil.which("logrotate") or next((p for p in ("/usr/sbin/logrotate", "/sbin/logrotate") if os.access(p, os.X_OK)), None)


def test_logrotate_rotates_a_log_the_daemon_keeps_writing(tmp_path: Any) -> None:
    """copytruncate with an appending writer: the fresh file has no hole of
    NUL bytes and the daemon needs no signal."""
    logrotate = _logrotate()
    if logrotate is None:
        pytest.skip("logrotate is not installed (scripts/install-admin-tools installs it)")
    log_dir = tmp_path / "var" / "log" / "ganeti"
    log_dir.mkdir(parents=True)
    with open(os.path.join(PACKAGING, "logrotate", "ganeti")) as handle:
        config = handle.read().replace("/var/log/ganeti", str(log_dir))
    (tmp_path / "logrotate.conf").write_text(config)
    from twisted.logger import LogLevel

    path = log_dir / "luxi-daemon.log"
    stream = open(path, "ab", buffering=0)
    try:
        observe = logfile.AppendingFileObserver("ganeti-luxid", stream)
        for number in range(50):
            observe({"log_level": LogLevel.info, "log_format": "line {n} before", "n": number, "log_time": 0.0})
        rotated = _run([logrotate, "-f", "-s", str(tmp_path / "state"), str(tmp_path / "logrotate.conf")])
        assert rotated.returncode == 0, rotated.stderr
        observe({"log_level": LogLevel.info, "log_format": "after the rotation", "log_time": 0.0})
    finally:
        stream.close()
    fresh = path.read_bytes()
    assert b"\0" not in fresh and fresh.count(b"\n") == 1 and b"after the rotation" in fresh
    assert (log_dir / "luxi-daemon.log.1").read_bytes().count(b"\n") == 50


def test_logrotate_rotates_in_a_directory_a_group_may_write(tmp_path: Any) -> None:
    """Debian's log directories are root:adm, mode 2775: without a C{su}
    line logrotate skips them ("parent directory has insecure permissions")."""
    import grp

    logrotate = _logrotate()
    if logrotate is None:
        pytest.skip("logrotate is not installed (scripts/install-admin-tools installs it)")
    if os.geteuid() != 0:
        pytest.skip("changing the directory's group and su need root")
    try:
        adm = grp.getgrnam("adm").gr_gid
    except KeyError:
        pytest.skip("no adm group here")
    log_dir = tmp_path / "var" / "log" / "ganeti"
    (log_dir / "os").mkdir(parents=True)
    for directory in (log_dir, log_dir / "os"):
        os.chown(directory, 0, adm)
        os.chmod(directory, 0o2775)
    with open(os.path.join(PACKAGING, "logrotate", "ganeti")) as handle:
        config = handle.read().replace("/var/log/ganeti", str(log_dir))
    (tmp_path / "logrotate.conf").write_text(config)
    (log_dir / "node-daemon.log").write_text("a line\n")
    (log_dir / "os" / "add-noop-x-1.log").write_text("a line\n")
    rotated = _run([logrotate, "-f", "-s", str(tmp_path / "state"), str(tmp_path / "logrotate.conf")])
    assert rotated.returncode == 0 and "insecure permissions" not in rotated.stderr, rotated.stderr
    assert (log_dir / "node-daemon.log.1").read_text() == "a line\n"
    assert (log_dir / "os" / "add-noop-x-1.log.1").read_text() == "a line\n"


def test_cron_example_runs_commands_that_exist() -> None:
    with open(os.path.join(PACKAGING, "cron", "ganeti")) as handle:
        lines = [line for line in handle.read().splitlines() if line.strip() and not line.startswith("#")]
    entries = [line for line in lines if not re.match(r"^[A-Z_]+=", line)]
    assert entries
    scripts = sysconfig.get_path("scripts")
    for entry in entries:
        fields = entry.split(None, 6)
        assert len(fields) == 7 and fields[5] == "root", entry
        assert "%" not in fields[6]  # cron would turn it into a newline
        assert _run(["sh", "-n", "-c", fields[6]]).returncode == 0, entry
        for tool in re.findall(r"\b((?:gnt|ganeti)-[a-z-]+) --root", fields[6]):
            assert os.access(os.path.join(scripts, tool), os.X_OK), tool
