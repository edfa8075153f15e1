"""The cluster parameters of gnt-cluster init and modify (policy, uid pool,
LVM/DRBD names, images, compression tools, state, netmask, instance
communication network), stored in config.data and shown by gnt-cluster
info as Ganeti shows them; private and secret OS parameters: given to the
OS scripts, redacted in job files, secret ones never stored."""

from __future__ import annotations

import glob
import os
import stat

import pytest_twisted
from twisted.internet import reactor

from ganeti import serializer
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok

N1 = "node1.test"
#: not 127.0.1.1: test_cluster_init starts its daemons there on the standard ports, maybe at the same time
ADDRESS = "127.0.7.1"


def _config(root) -> dict:
    """config.data once WConfD has written every change."""
    ok(root, "ganeti-wconfd-client", "flush")
    return serializer.read_json(root.config_data)


def _cluster(root) -> dict:
    return _config(root)["cluster"]


def test_init_and_modify_parameters_reach_the_config_and_info(root):
    init = gnt(root, "gnt-cluster", "init", "--primary-ip", ADDRESS, "--node-name", N1,
               "--uid-pool", "1000-2000,3000", "--specs-mem-size", "min=64,max=8G,std=256",
               "--specs-cpu-count", "max=16", "--ipolicy-vcpu-ratio", "3", "--ipolicy-spindle-ratio", "16",
               "--hypervisor-state", "fake:mem_total=1024", "--disk-state", "file/store:disk_total=100",
               "--vg-name", "xenvg", "--drbd-usermode-helper", "/bin/true", "--compression-tools", "gzip,lzop",
               "--install-image", "/srv/images/install.img", "--zeroing-image", "http://images.test/zero.img",
               "-B", "maxmem=256", "-N", "link=br7", "--node-parameters", "spindle_count=3",
               "-H", "fake:migration_mode=non-live", "--user-shutdown", "yes", "--use-external-mip-script", "no",
               "--maintain-node-health", "yes", "--prealloc-wipe-disks", "yes", "--default-iallocator-params",
               "seed=7", "--ssh-key-type", "ecdsa", "--ssh-key-bits", "256", "--primary-ip-version", "4",
               "-s", "127.0.2.1", "cluster.test")
    try:
        assert init.returncode == 0, init.stdout + init.stderr
        cluster = _cluster(root)
        assert cluster["uid_pool"] == [[1000, 2000], [3000, 3000]]
        policy = cluster["ipolicy"]
        assert policy["minmax"][0]["min"]["memory-size"] == 64 and policy["minmax"][0]["max"]["memory-size"] == 8192
        assert policy["minmax"][0]["max"]["cpu-count"] == 16 and policy["std"]["memory-size"] == 256
        assert (policy["vcpu-ratio"], policy["spindle-ratio"]) == (3.0, 16.0)
        assert cluster["hv_state_static"] == {"fake": {"mem_total": 1024}}
        assert cluster["disk_state_static"] == {"file": {"store": {"disk_total": 100}}}
        assert cluster["beparams"]["default"]["maxmem"] == 256 and cluster["nicparams"]["default"]["link"] == "br7"
        assert cluster["hvparams"]["fake"]["migration_mode"] == "non-live"
        node = next(iter(_config(root)["nodes"].values()))
        assert node["secondary_ip"] == "127.0.2.1"

        info = ok(root, "gnt-cluster", "info")
        for line in ("  uid pool: 1000-2000, 3000\n", "  lvm volume group: xenvg\n",
                     "  drbd usermode helper: /bin/true\n", "  install image: /srv/images/install.img\n",
                     "  zeroing image: http://images.test/zero.img\n", "  enabled user shutdown: True\n",
                     "  maintenance of node health: True\n", "  preallocation wipe disks: True\n",
                     "  lvm reserved volumes: (none)\n", "  ssh_key_type: ecdsa\n", "  ssh_key_bits: 256\n",
                     "  default instance allocator parameters: \n    seed: 7\n", "    link: br7\n",
                     "  vcpu-ratio: 3.0\n", "Instance policy - limits for instances: \n"):
            assert line in info, (line, info)
        assert "compression tools: \n    - gzip\n    - lzop\n" in info, info
        roman = ok(root, "gnt-cluster", "info", "--roman")
        assert "  ssh_key_bits: CCLVI\n" in roman and "  primary ip version: IV\n" in roman, roman

        ok(root, "gnt-cluster", "modify", "--add-uids", "4000-4010", "--remove-uids", "3000",
           "--reserved-lvs", "xenvg/keep,xenvg/swap", "--ipolicy-std-specs", "memory-size=512M",
           "--ipolicy-disk-templates", "file,diskless", "--vg-name", "", "--drbd-usermode-helper", "",
           "--compression-tools", "gzip,gzip-fast", "--hypervisor-state", "fake:cpu_total=4",
           "--disk-state", "file/store:disk_reserved=10", "--user-shutdown", "no", "--install-image", "",
           "--master-netmask", "24", "--modify-etc-hosts", "no", "--use-external-mip-script", "yes")
        cluster = _cluster(root)
        assert cluster["uid_pool"] == [[1000, 2000], [4000, 4010]]
        assert cluster["reserved_lvs"] == ["xenvg/keep", "xenvg/swap"]
        assert cluster["ipolicy"]["std"]["memory-size"] == 512 and cluster["ipolicy"]["std"]["cpu-count"] == 1
        assert cluster["ipolicy"]["disk-templates"] == ["file", "diskless"]
        assert cluster["hv_state_static"] == {"fake": {"mem_total": 1024, "cpu_total": 4}}
        assert cluster["disk_state_static"] == {"file": {"store": {"disk_total": 100, "disk_reserved": 10}}}
        assert (cluster["volume_group_name"], cluster["drbd_usermode_helper"]) == ("", "")
        assert (cluster["master_netmask"], cluster["use_external_mip_script"]) == (24, True)
        info = ok(root, "gnt-cluster", "info")
        for line in ("  uid pool: 1000-2000, 4000-4010\n", "  lvm reserved volumes: xenvg/keep, xenvg/swap\n",
                     "  master netmask: 24\n", "  enabled user shutdown: False\n", "  install image: \n",
                     "  allowed disk templates: file, diskless\n"):
            assert line in info, (line, info)

        # bad input: Ganeti's messages, nothing changed
        before = _cluster(root)
        for args, message in (
                (("--remove-uids", "5000"), "User-id range to be removed is not found in the current user-id pool"),
                (("--uid-pool", "20-10"), "is larger than higher boundary value"),
                (("--compression-tools", "lzop"), "the gzip utility must be present among the compression tools"),
                (("--zeroing-image", "relative.img"), "Zeroing image must be an absolute path or a URL"),
                (("--master-netmask", "40"), "CIDR netmask (40) not valid"),
                (("--ipolicy-std-specs", "memory-size=64G"), "Invalid std specifications"),
                (("--ipolicy-disk-templates", "plain"), "allowed by the ipolicy, but not enabled on the cluster"),
                (("--hypervisor-state", "fake:no_such=1"), "no_such")):
            bad = gnt(root, "gnt-cluster", "modify", *args)
            assert bad.returncode != 0 and message in bad.stderr, (args, bad.stderr)
        dry = gnt(root, "gnt-cluster", "modify", "--dry-run", "--uid-pool", "7000")
        assert dry.returncode == 0, dry.stderr
        after = _cluster(root)
        assert after["uid_pool"] == before["uid_pool"] and after["serial_no"] == before["serial_no"]

        # the instance communication network: created and connected to every group by the jobs it submits
        ok(root, "gnt-cluster", "modify", "--instance-communication-network", "comm-net")
        listing = ok(root, "gnt-network", "list", "--no-headers", "-o", "name,network,mac_prefix,group_list")
        assert listing.startswith("comm-net 169.254.0.0/16 52:54:00 default (routed, communication_rt"), listing
        assert "  instance communication network: comm-net\n" in ok(root, "gnt-cluster", "info")
    finally:
        destroyed = gnt(root, "gnt-cluster", "destroy", "--ya-rly")
    assert destroyed.returncode == 0, destroyed.stderr


def test_init_refuses_bad_options_before_writing_anything(root):
    for args, message in ((("--specs-mem-size", "min=64", "--ipolicy-std-specs", "memory-size=128"),
                           "A --specs-xxx option cannot be specified together with any --ipolicy-xxx-specs"),
                          (("--compression-tools", "lzop"), "gzip utility must be present"),
                          (("--primary-ip-version", "6"), "is not an IPv6 address"),
                          (("-H", "kvm:acpi=no"), "hypervisor(s) not enabled: kvm")):
        bad = gnt(root, "gnt-cluster", "init", "--primary-ip", ADDRESS, "--no-start", *args, "cluster.test")
        assert bad.returncode != 0 and message in bad.stderr, (args, bad.stderr)
        assert not os.path.exists(root.config_data)


ENV_OS = """#!/bin/sh
env | grep '^OSP_' | sort > "$(dirname "$0")/env.$INSTANCE_NAME.$1"
exit 0
"""


def _env_os(root) -> str:
    """An OS whose create script records the OS parameters it is given."""
    directory = os.path.join(root.root, "srv/ganeti/os/envdump")
    os.makedirs(directory)
    for name in ("create", "import", "export", "rename", "verify"):
        path = os.path.join(directory, name)
        with open(path, "w") as handle:
            handle.write(ENV_OS.replace("$1", name))
        os.chmod(path, stat.S_IRWXU)
    with open(os.path.join(directory, "ganeti_api_version"), "w") as handle:
        handle.write("20\n")
    with open(os.path.join(directory, "parameters.list"), "w") as handle:
        handle.write("pw a password\nkey a secret key\ncpw the cluster's password\n")
    return directory


def _everything_written(root) -> str:
    """Every job file (queue and archive) and every log, as one text."""
    text = []
    for path in glob.glob(os.path.join(root.queue_dir, "**"), recursive=True) + \
            glob.glob(os.path.join(root.log_dir, "**"), recursive=True):
        if os.path.isfile(path):
            with open(path, "rb") as handle:
                text.append(handle.read().decode("utf-8", "replace"))
    return "\n".join(text)


@pytest_twisted.ensureDeferred
async def test_private_and_secret_os_parameters(root):
    async with LoopbackCluster(reactor, root, loopback_config(1), prefix="gntcp") as _cluster:
        directory = _env_os(root)
        ok(root, "gnt-os", "modify", "--os-parameters-private", "cpw=clusterpw", "envdump")
        ok(root, "gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-o", "envdump", "-n", N1, "--no-name-check",
           "--no-ip-check", "--no-start", "--no-nics", "--os-parameters-private", "pw=hunter2",
           "--os-parameters-secret", "key=s3cret", "inst1.test")
        with open(os.path.join(directory, "env.inst1.test.create")) as handle:
            assert handle.read() == "OSP_CPW=clusterpw\nOSP_KEY=s3cret\nOSP_PW=hunter2\n"
        # the OS validates the whole set first (os_validate, its verify script with the same OSP_* variables)
        with open(os.path.join(directory, "env..verify")) as handle:
            assert handle.read() == "OSP_CPW=clusterpw\nOSP_KEY=s3cret\nOSP_PW=hunter2\n"
        bogus = gnt(root, "gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-o", "envdump", "-n", N1,
                    "--no-name-check", "--no-ip-check", "--no-start", "--no-nics", "--os-parameters-secret",
                    "bogus=1", "inst2.test")
        assert bogus.returncode != 0 and ("OS Parameters validation failed on node %s: The following parameters are"
                                          " not supported by the OS envdump: bogus" % N1) in bogus.stderr, bogus.stderr
        config = _config(root)
        (instance,) = config["instances"].values()
        assert instance["osparams_private"] == {"pw": "hunter2"}  # private: stored, as Ganeti
        assert config["cluster"]["osparams_private_cluster"] == {"envdump": {"cpw": "clusterpw"}}
        assert "s3cret" not in open(root.config_data).read()  # secret: never stored

        # reinstall with a new secret; modify a private one
        ok(root, "gnt-instance", "reinstall", "-f", "--os-parameters-secret", "key=other",
           "--os-parameters-private", "pw=second", "inst1.test")
        with open(os.path.join(directory, "env.inst1.test.create")) as handle:
            assert handle.read() == "OSP_CPW=clusterpw\nOSP_KEY=other\nOSP_PW=second\n"
        ok(root, "gnt-instance", "modify", "--os-parameters-private", "pw=third", "inst1.test")
        (instance,) = _config(root)["instances"].values()
        assert instance["osparams_private"] == {"pw": "third"}

        # the job files (and their logs) show them redacted, as Ganeti's do
        written = _everything_written(root)
        for clear in ("hunter2", "s3cret", "second", "other", "third", "clusterpw"):
            assert clear not in written, clear
        assert '"osparams_secret": {"key": "<redacted>"}' in written or \
            '"osparams_secret":{"key":"<redacted>"}' in written
        jobs = ok(root, "gnt-job", "list", "--no-headers", "-o", "id")
        shown = ok(root, "gnt-job", "info", *jobs.split())
        assert "<redacted>" in shown and "hunter2" not in shown and "s3cret" not in shown


@pytest_twisted.ensureDeferred
async def test_instance_and_node_options(root):
    async with LoopbackCluster(reactor, root, loopback_config(1), prefix="gntco") as _cluster:
        # --communication: without the cluster's network a clear refusal, nothing created
        add = ("gnt-instance", "add", "-t", "diskless", "-o", "noop", "-n", N1, "--no-name-check", "--no-ip-check",
               "--no-start", "--no-nics")
        bad = gnt(root, *add, "--communication", "yes", "inst1.test")
        assert bad.returncode != 0 and "--instance-communication-network" in bad.stderr, bad.stderr
        ok(root, "gnt-cluster", "modify", "--instance-communication-network", "comm-net")
        ok(root, *add, "--communication", "yes", "inst1.test")
        nics = ok(root, "gnt-instance", "list", "--no-headers", "-o", "nic.names,nic.networks.names,nic.ips",
                  "inst1.test").split()
        assert nics[:2] == ["ganeti:communication:inst1.test", "comm-net"] and nics[2].startswith("169.254."), nics
        ok(root, "gnt-instance", "modify", "--communication", "no", "inst1.test")
        assert ok(root, "gnt-instance", "list", "--no-headers", "-o", "nic.names", "inst1.test").strip() == ""
        ok(root, "gnt-instance", "modify", "--communication", "yes", "inst1.test")
        assert "ganeti:communication:inst1.test" in ok(root, "gnt-instance", "list", "--no-headers", "-o",
                                                       "nic.names", "inst1.test")
        # --forthcoming and --commit together: Ganeti's refusal, nothing made (test_forthcoming covers both)
        refused = gnt(root, *add, "--forthcoming", "--commit", "inst2.test")
        assert refused.returncode != 0 and "inst2.test" not in ok(root, "gnt-instance", "list", "--no-headers",
                                                                  "-o", "name"), refused.stderr

        # info --roman; reinstall --select-os reads the number of the OS
        roman = ok(root, "gnt-instance", "info", "--roman", "inst1.test")
        assert "maxmem: default (CXXVIII)" in roman, roman
        choose = gnt_input(root, "0\n", "gnt-instance", "reinstall", "-f", "--select-os", "inst1.test")
        assert "Available OS templates:" in choose.stdout and "  0: " in choose.stdout, choose.stdout
        aborted = gnt_input(root, "x\n", "gnt-instance", "reinstall", "-f", "--select-os", "inst1.test")
        assert aborted.returncode == 1 and "User aborted reinstall, exiting" in aborted.stderr, aborted.stderr

        # node static state; powered only where an OOB program manages it (Ganeti's refusal)
        ok(root, "gnt-node", "modify", "--hypervisor-state", "fake:mem_node=512", "--disk-state",
           "file/store:disk_total=64", N1)
        node = next(iter(_config(root)["nodes"].values()))
        assert node["hv_state_static"] == {"fake": {"mem_node": 512}}, node
        assert node["disk_state_static"] == {"file": {"store": {"disk_total": 64}}}, node
        powered = gnt(root, "gnt-node", "modify", "--node-powered", "no", N1)
        assert powered.returncode != 0 and "does not support out-of-band handling" in powered.stderr


def gnt_input(root, text: str, tool: str, *args: str):
    import subprocess

    from ganeti.testing.cluster import BIN

    return subprocess.run([os.path.join(BIN, tool), "--root", root.root, *args], input=text, capture_output=True,
                          text=True, timeout=120)
