"""gnt-instance and gnt-node evacuate|migrate: option parsing into exact
opcodes, errors and exit codes, list and info output, job following (a fake
LUXI client; no daemons)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from ganeti import errors
from ganeti.client import gnt_instance, gnt_node, instance_info, prompt
from ganeti.client.formatting import format_generic_info
from ganeti.client.runner import run
from tests.unit.test_cli import FakeClient, log, utc  # noqa: F401  (utc is a fixture)

GENERIC = ("debug_level", "dry_run", "priority", "reason")


class Client(FakeClient):
    def submit_many_jobs(self, jobs: list[list[dict[str, Any]]]) -> Any:
        return self._answer("SubmitManyJobs", jobs)


class NoClient(Client):
    def _answer(self, method: str, *args: Any) -> Any:
        raise AssertionError("unexpected LUXI call %s%r" % (method, args))


def gnt(tool: str, *argv: str, fake: FakeClient | None = None) -> tuple[int, str, str]:
    module = {"gnt-instance": gnt_instance, "gnt-node": gnt_node}[tool]
    out, err = io.StringIO(), io.StringIO()
    client = fake if fake is not None else NoClient()
    code = run(tool, module.COMMANDS, list(argv), aliases=getattr(module, "ALIASES", None),
                   env_override={"list"}, client_factory=lambda ctx: client, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def inst(*argv: str, fake: FakeClient | None = None) -> tuple[int, str, str]:
    return gnt("gnt-instance", *argv, fake=fake)


def following(job_id: int = 17, opresult: Any = None, status: str = "success", logs: Any = ()) -> Client:
    return Client(
        SubmitJob=job_id,
        WaitForJobChange=[[["running"], list(logs)], [[status], []]],
        QueryJobs=[[[status, [status], [opresult]]]],
    )


def submitted(fake: FakeClient) -> dict[str, Any]:
    ((ops,),) = fake.args("SubmitJob")
    (op,) = ops
    return op


def own(op: dict[str, Any]) -> dict[str, Any]:
    """The opcode without the generic parameters, which are checked once."""
    return {key: value for key, value in op.items() if key not in GENERIC}


class Questions(list):
    """The questions asked; each is answered with C{reply}."""

    reply: Any = True


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> Questions:
    asked = Questions()

    def ask(text: str, choices: Any = None) -> Any:
        asked.append(text)
        return asked.reply

    monkeypatch.setattr(prompt, "ask_user", ask)
    return asked


def refuse(answers: Questions) -> None:
    answers.reply = False


# --- add ----------------------------------------------------------------------------------
def test_add_builds_the_create_opcode() -> None:
    fake = following(opresult=["node1.example.com"])
    code, out, err = inst(
        "add", "-t", "file", "--disk", "0:size=10G,mode=ro,name=root", "--disk", "1:size=512",
        "--net", "0:mac=aa:00:00:11:22:33,ip=192.0.2.10,mode=bridged,link=br0", "--net", "1",
        "-n", "node1:node2", "-o", "debootstrap+default", "-B", "maxmem=1G,minmem=512M,vcpus=2",
        "-H", "kvm:acpi=false,kernel_path=", "-O", "dhcp=yes", "--no-start", "--no-name-check", "--no-ip-check",
        "--tags", "a,b", "--file-storage-dir", "web", "--opportunistic-locking", "--priority", "high",
        "web1.example.com", fake=fake,
    )
    assert (code, err) == (0, "")
    op = submitted(fake)
    assert own(op) == {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": "web1.example.com",
        "mode": "create",
        "disk_template": "file",
        "disks": [{"size": 10240, "mode": "ro", "name": "root"}, {"size": 512}],
        "nics": [{"mac": "aa:00:00:11:22:33", "ip": "192.0.2.10", "mode": "bridged", "link": "br0"}, {}],
        "pnode": "node1",
        "snode": "node2",
        "os_type": "debootstrap+default",
        "beparams": {"maxmem": 1024, "minmem": 512, "vcpus": 2},
        "hypervisor": "kvm",
        "hvparams": {"acpi": False, "kernel_path": ""},
        "osparams": {"dhcp": "yes"},
        "start": False,
        "no_install": False,
        "name_check": False,
        "ip_check": False,
        "conflicts_check": True,
        "wait_for_sync": True,
        "opportunistic_locking": True,
        "force_variant": False,
        "identify_defaults": False,
        "ignore_ipolicy": False,
        "tags": ["a", "b"],
        "file_storage_dir": "web",
    }
    assert (op["priority"], op["dry_run"], op["debug_level"]) == (-10, False, 0)
    assert op["reason"][0][:2] == ["gnt:client:gnt-instance", "add"]


def test_add_defaults() -> None:
    fake = following()
    assert inst("add", "-s", "1G", "-I", "hail", "-o", "noop", "inst1", fake=fake)[0] == 0
    assert own(submitted(fake)) == {
        "OP_ID": "OP_INSTANCE_CREATE", "instance_name": "inst1", "mode": "create", "disks": [{"size": 1024}],
        "nics": [{}], "beparams": {}, "hvparams": {}, "osparams": {}, "start": True, "no_install": False,
        "name_check": True, "ip_check": True, "conflicts_check": True, "wait_for_sync": True,
        "opportunistic_locking": False, "force_variant": False, "identify_defaults": False,
        "ignore_ipolicy": False, "tags": [], "iallocator": "hail", "os_type": "noop",
    }


def test_add_diskless_without_nics() -> None:
    fake = following()
    assert inst("add", "-t", "diskless", "--no-nics", "--no-install", "-n", "node1", "-H", "fake", "i1",
                fake=fake)[0] == 0
    op = submitted(fake)
    assert (op["disks"], op["nics"], op["no_install"], op["hypervisor"], op["hvparams"], op["pnode"]) == (
        [], [], True, "fake", {}, "node1")
    assert "snode" not in op


def test_add_submit_prints_the_job_id() -> None:
    fake = Client(SubmitJob=23)
    assert inst("add", "-t", "diskless", "--submit", "i1", fake=fake) == (0, "", "JobID: 23\n")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["-t", "file"], "No disk information specified"),
        (["-t", "diskless", "-s", "1G"], "Diskless instance but disk information passed"),
        (["-t", "file", "-s", "1G", "--disk", "0:size=1G"], "either the '--disk' or '-s' option"),
        (["-t", "file", "--disk", "1:size=1G"], "Missing size or adoption source for disk 0"),
        (["-t", "file", "--disk", "0:mode=rw"], "Missing size or adoption source for disk 0"),
        (["-t", "file", "--disk", "0:size=huge"], "Invalid disk size for disk 0"),
        (["-t", "file", "--disk", "a:size=1G"], "Invalid disk index 'a'"),
        (["-t", "file", "--disk", "0:size=1G", "--disk", "0:size=2G"], "Disk 0 is given twice"),
        (["-t", "file", "--disk", "0:size=1G,mode=rx"], "Invalid access mode 'rx'"),
        (["-t", "file", "--disk", "0:size=1G,colour=red"], "Unknown parameter"),
        (["-t", "file", "--disk", "no_0"], "Invalid disk/0 value"),
        (["-t", "diskless", "--net", "0:speed=fast"], "Unknown parameter 'speed' for nic 0"),
        (["-t", "diskless", "--net", "0:mode=bridge"], "Invalid mode 'bridge' for nic 0"),
        (["-t", "diskless", "--net", "0:ip"], "Parameter 'ip' of nic 0 needs a value"),
        (["-t", "diskless", "--net", "0", "--no-nics"], "Cannot use --net and --no-nics together"),
        (["-t", "diskless", "-H", "no_kvm"], "Invalid hypervisor option 'kvm'"),
    ],
)
def test_add_refuses_bad_disks_and_nics(argv: list[str], message: str) -> None:
    code, out, err = inst("add", *argv, "i1")
    assert code == 1 and out == ""
    assert err.startswith("Failure: prerequisites not met for this operation:\nerror type: wrong_input")
    assert message in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["-B", "vcpus=two"], "Parameter Error: 'vcpus' (value two) is not a valid integer"),
        (["-B", "maxmem=lots"], "Parameter Error: 'maxmem' (value lots) is not a valid size:"
                                    " not a number with an optional unit (M, G, T)"),
        (["-B", "colour=red"], "Parameter Error: Unknown backend parameter 'colour'"),
        (["-H", "kvm:acpi=perhaps"], "Parameter Error: 'acpi' (value perhaps) is not a valid boolean"),
    ],
)
def test_add_refuses_badly_typed_parameters(argv: list[str], message: str) -> None:
    assert inst("add", "-t", "diskless", *argv, "i1") == (1, "", message + "\n")


@pytest.mark.parametrize(
    "argv",
    [
        ["add", "-t", "floppy", "i1"],
        ["add", "-s", "big", "i1"],
        ["add", "-B", "a=1,a=2", "i1"],
        ["add", "--disk", ":size=1", "i1"],
        ["add", "--disk", "no_0:size=1", "i1"],
        ["add", "--disk", "size=1G", "i1"],
        ["add", "-H", "acpi=false", "i1"],
        ["add", "-t", "diskless"],
        ["remove"],
        ["reboot", "-t", "warm", "i1"],
        ["migrate", "--migration-mode", "fast", "i1"],
        ["modify", "--offline", "--online", "i1"],
        ["startup", "--all", "--node", "x"],
        ["startup"],
        ["startup", "--all", "i1"],
        ["rename", "i1"],
        ["list", "--units", "x"],
        ["nosuch"],
    ],
)
def test_bad_usage_exits_2_without_talking_to_the_master(argv: list[str]) -> None:
    code, out, err = inst(*argv)
    assert code == 2, (code, out, err)
    assert err and out == ""


@pytest.mark.parametrize("command", sorted(gnt_instance.COMMANDS))
def test_every_command_has_help(command: str) -> None:
    code, out, err = inst(command, "--help")
    assert code == 0 and err == "" and out.startswith("usage: gnt-instance %s" % command)


# --- remove ---------------------------------------------------------------------------------
NAMES = {"fields": [{"name": "name", "title": "Instance", "kind": "text", "doc": ""}],
         "data": [[[0, "web1.example.com"]]]}


def test_remove_asks_then_submits(answers: Any) -> None:
    fake = following()
    fake.answers["Query"] = NAMES
    code, out, err = inst("remove", "--ignore-failures", "--shutdown-timeout", "30", "web1", fake=fake)
    assert (code, err) == (0, "")
    assert answers == ["This will remove the volumes of the instance web1 (including mirrors), thus removing all"
                       " the data of the instance. Continue?"]
    assert fake.args("Query") == [("instance", ["name"], ["|", ["==", "name", "web1"]])]
    assert own(submitted(fake)) == {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "web1",
                                    "ignore_failures": True, "shutdown_timeout": 30}


def test_remove_refused(answers: Any) -> None:
    refuse(answers)
    fake = Client(Query=NAMES)
    assert inst("remove", "web1", fake=fake) == (1, "", "")
    assert fake.methods() == ["Query"]


def test_remove_unknown_instance(answers: Any) -> None:
    fake = Client(Query=errors.OpPrereqError("Instance 'nosuch' not known", "unknown_entity"))
    code, _, err = inst("remove", "nosuch", fake=fake)
    assert code == 1 and "Instance 'nosuch' not known" in err and answers == []


def test_remove_forced_does_not_ask(answers: Any) -> None:
    fake = following()
    assert inst("remove", "-f", "web1", fake=fake)[0] == 0
    assert answers == [] and fake.methods()[0] == "SubmitJob"
    assert submitted(fake)["shutdown_timeout"] == 120


# --- list -------------------------------------------------------------------------------------
def _fdef(name: str, title: str, kind: str) -> dict[str, str]:
    return {"name": name, "title": title, "kind": kind, "doc": ""}


LIST_ANSWER = {
    "fields": [_fdef("name", "Instance", "text"), _fdef("hypervisor", "Hypervisor", "text"),
               _fdef("os", "OS", "text"), _fdef("pnode", "Primary_node", "text"),
               _fdef("status", "Status", "text"), _fdef("oper_ram", "Memory", "unit")],
    "data": [
        [[0, "db1.example.com"], [0, "kvm"], [0, "debootstrap+default"], [0, "node2.example.com"],
         [0, "ERROR_nodedown"], [2, None]],
        [[0, "web1.example.com"], [0, "fake"], [0, "noop"], [0, "node1.example.com"], [0, "running"],
         [0, 2048]],
        [[0, "web2.example.com"], [0, "fake"], [0, "noop"], [0, "node1.example.com"], [0, "ADMIN_down"],
         [3, None]],
    ],
}


def test_list_default_fields() -> None:
    fake = Client(Query=LIST_ANSWER)
    code, out, err = inst("list", fake=fake)
    assert (code, err) == (0, "")
    assert fake.args("Query") == [("instance", ["name", "hypervisor", "os", "pnode", "status", "oper_ram"], None)]
    assert out == (
        "Instance         Hypervisor OS                  Primary_node      Status         Memory\n"
        "db1.example.com  kvm        debootstrap+default node2.example.com ERROR_nodedown      ?\n"
        "web1.example.com fake       noop                node1.example.com running          2.0G\n"
        "web2.example.com fake       noop                node1.example.com ADMIN_down          -\n"
    )


def test_list_separator_units_no_headers_and_names() -> None:
    fake = Client(Query=LIST_ANSWER)
    code, out, _ = inst("list", "--no-headers", "--separator=:", "--units", "m", "-o", "+disk.sizes",
                        "web1", "web2", fake=fake)
    assert code == 0
    ((_, fields, qfilter),) = fake.args("Query")
    assert fields == ["name", "hypervisor", "os", "pnode", "status", "oper_ram", "disk.sizes"]
    assert qfilter == ["|", ["==", "name", "web1"], ["==", "name", "web2"]]
    assert out.splitlines()[1] == "web1.example.com:fake:noop:node1.example.com:running:2048"


def test_list_filter_and_list_fields_joined() -> None:
    answer = {"fields": [_fdef("name", "Instance", "text"), _fdef("nic.macs", "NIC_MACs", "other"),
                         _fdef("tags", "Tags", "other")],
              "data": [[[0, "web1"], [0, ["aa:00:00:00:00:01", "aa:00:00:00:00:02"]], [0, []]]]}
    fake = Client(Query=answer)
    code, out, _ = inst("list", "-o", "name,nic.macs,tags", "-F", "oper_ram > 100", fake=fake)
    assert code == 0
    assert fake.args("Query")[0][2] == [">", "oper_ram", 100]
    assert out.splitlines()[1] == "web1     aa:00:00:00:00:01,aa:00:00:00:00:02 "


def test_list_bad_filter() -> None:
    code, out, err = inst("list", "-F", "status ==")
    assert code == 1 and err.startswith("Error while parsing query filter: expected a quoted string")


def test_list_unknown_field_exits_14() -> None:
    answer = {"fields": [_fdef("name", "Instance", "text"), {"name": "colour", "title": "colour",
                                                             "kind": "unknown", "doc": ""}],
              "data": [[[0, "web1"], [1, None]]]}
    code, out, err = inst("list", "-o", "name,colour", fake=Client(Query=answer))
    assert code == 14 and "Warning: Queried for unknown fields colour" in err
    assert out.splitlines()[1] == "web1     ??"


def test_list_options_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNT_INSTANCE_LIST", "--no-headers -o name")
    fake = Client(Query={"fields": [_fdef("name", "Instance", "text")], "data": [[[0, "web1"]]]})
    assert inst("list", fake=fake) == (0, "web1\n", "")


# --- info -------------------------------------------------------------------------------------
INFO = {
    "name": "web1.example.com",
    "uuid": "0a1b",
    "serial_no": 4,
    "ctime": 1700000000,
    "mtime": 1700000100,
    "config_state": "up",
    "run_state": "up",
    "pnode": "node1.example.com",
    "pnode_group_name": "default",
    "pnode_group_uuid": "g-1",
    "snodes": [],
    "os": "noop",
    "os_instance": {},
    "os_actual": {"dhcp": "yes"},
    "hypervisor": "kvm",
    "network_port": 5901,
    "hv_instance": {"acpi": False},
    "hv_actual": {"acpi": False, "vnc_bind_address": "0.0.0.0"},
    "be_instance": {"maxmem": 256},
    "be_actual": {"maxmem": 256, "minmem": 128, "vcpus": 1},
    "nics": [["eth0", "n-1", None, "aa:00:00:00:00:01", "bridged", "br0", "", None, None]],
    "disk_template": "file",
    "disks": [{"iv_name": "disk/0", "dev_type": "file", "size": 1024, "mode": "rw", "spindles": None,
               "logical_id": ["loop", "/srv/ganeti/file-storage/web1.example.com/disk0"],
               "pstatus": ["/srv/ganeti/file-storage/web1.example.com/disk0", None, None],
               "sstatus": None, "children": [], "name": None, "uuid": "d-1"}],
    "tags": ["prod"],
}


def test_info_output(utc: Any) -> None:
    fake = following(opresult={"web1.example.com": INFO})
    code, out, err = inst("info", "web1", fake=fake)
    assert (code, err) == (0, "")
    assert own(submitted(fake)) == {"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": ["web1"], "static": False,
                                    "use_locking": True}
    assert out == """\
- Instance name: web1.example.com
  UUID: 0a1b
  Serial number: 4
  Creation time: 2023-11-14 22:13:20
  Modification time: 2023-11-14 22:15:00
  State: configured to be up, actual state is up
  Nodes: 
    - primary: node1.example.com
      group: default (UUID g-1)
    - secondaries: 
  Operating system: noop
  Operating system parameters: 
    dhcp: default (yes)
  Allocated network port: 5901
  Hypervisor: kvm
  VNC console: node1.example.com:5901 (display 1)
  Hypervisor parameters: 
    acpi: False
    vnc_bind_address: default (0.0.0.0)
  Back-end parameters: 
    maxmem: 256
    minmem: default (128)
    vcpus: default (1)
  NICs: 
    - nic/0: 
      MAC: aa:00:00:00:00:01
      IP: None
      mode: bridged
      link: br0
      vlan: 
      network: None
      UUID: n-1
      name: eth0
  Disk template: file
  Disks: 
    - disk/0: file, size 1.0G
      access mode: rw
      driver: loop
      path: /srv/ganeti/file-storage/web1.example.com/disk0
      on primary: /srv/ganeti/file-storage/web1.example.com/disk0
      name: None
      UUID: d-1
  Tags: prod
"""


def test_info_static_all_and_errors() -> None:
    fake = following(opresult={"b": {"name": "b", "config_state": "down"}, "a": {"name": "a"}})
    code, out, _ = inst("info", "--static", "--all", fake=fake)
    assert code == 0
    assert own(submitted(fake)) == {"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": [], "static": True,
                                    "use_locking": False}
    assert [line for line in out.splitlines() if line.startswith("- ")] == ["- Instance name: a", "- Instance name: b"]
    assert "State: configured to be down\n" in out
    assert inst("info")[0] == 1
    assert inst("info", "--all", "x")[0] == 1
    assert inst("info", "--all", fake=following(opresult={})) == (1, "No instances.\n", "")


def test_info_of_disk_states_and_children() -> None:
    dev = {"dev_type": "drbd", "size": 2048, "mode": "rw", "logical_id": ["n1", "n2", 11000],
           "pstatus": ["/dev/drbd0", 147, 0, 55.5, 30, True, "ok"], "sstatus": ["/dev/drbd0", 147, 0, None, None,
                                                                                False, "ok"],
           "children": [{"dev_type": "plain", "size": 2048, "logical_id": ["xenvg", "lv0"]}]}
    lines = format_generic_info(instance_info.disk_info(0, dev))
    assert "disk/0: drbd, size 2.0G" in lines
    assert "on primary: /dev/drbd0 (147:0) *RECOVERING* 55.50%, ETA 30s" in lines
    assert "on secondary: /dev/drbd0 (147:0) in sync" in lines
    assert "child 0: plain, size 2.0G" in lines and "logical_id: xenvg/lv0" in lines


# --- startup, shutdown, reboot ------------------------------------------------------------------
def many(names: list[str], statuses: list[str] | None = None, **extra: Any) -> Client:
    statuses = statuses or ["success"] * len(names)
    fake = Client(
        Query={"fields": [_fdef("name", "Instance", "text")], "data": [[[0, n]] for n in names]},
        SubmitManyJobs=[[[True, 30 + i] for i in range(len(names))]],
        WaitForJobChange=[item for status in statuses for item in ([["running"], []], [[status], []])],
        QueryJobs=[[[status, [status], [None if status == "success" else ["OpExecError", ["it broke"]]]]]
                   for status in statuses],
    )
    fake.answers.update(extra)
    return fake


def jobs_of(fake: Client) -> list[dict[str, Any]]:
    ((jobs,),) = fake.args("SubmitManyJobs")
    return [own(ops[0]) for ops in jobs]


def test_startup_one_instance() -> None:
    fake = many(["web1.example.com"])
    code, out, err = inst("startup", "-H", "kernel_args=quiet", "-B", "maxmem=1G", "--paused", "--no-remember",
                          "web1", fake=fake)
    assert (code, out, err) == (0, "Waiting for job 30 for web1.example.com ...\n", "")
    assert jobs_of(fake) == [{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web1.example.com", "force": False,
                              "ignore_offline_nodes": False, "no_remember": True, "startup_paused": True,
                              "hvparams": {"kernel_args": "quiet"}, "beparams": {"maxmem": 1024}}]


def test_start_is_an_alias_and_submit_prints_ids() -> None:
    fake = many(["web1.example.com"])
    assert inst("start", "--submit", "web1", fake=fake) == (0, "30: web1.example.com\n", "")
    ((jobs,),) = fake.args("SubmitManyJobs")
    assert jobs[0][0]["reason"][0][:2] == ["gnt:client:gnt-instance", "start"]


def test_shutdown_and_reboot_opcodes() -> None:
    fake = many(["web1"])
    assert inst("stop", "--timeout", "5", "-f", "web1", fake=fake)[0] == 0
    assert jobs_of(fake) == [{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "web1", "force": True,
                              "ignore_offline_nodes": False, "timeout": 5, "no_remember": False}]
    fake = many(["web1"])
    assert inst("reboot", "-t", "soft", "--shutdown-timeout", "9", "web1", fake=fake)[0] == 0
    assert jobs_of(fake) == [{"OP_ID": "OP_INSTANCE_REBOOT", "instance_name": "web1", "reboot_type": "soft",
                              "ignore_secondaries": False, "shutdown_timeout": 9}]
    fake = many(["web1"])
    assert inst("reboot", "web1", fake=fake)[0] == 0
    assert jobs_of(fake)[0]["reboot_type"] == "hard"


def test_several_instances_ask_and_report_failures(answers: Any) -> None:
    fake = many(["web1", "web2"], ["success", "error"])
    code, out, err = inst("shutdown", "web1", "web2", fake=fake)
    assert code == 1
    assert answers == ["The shutdown will act on 2 instances.\nContinue?\nAffected instances:\n  web1\n  web2"]
    assert out == "Submitted jobs 30, 31\nWaiting for job 30 for web1 ...\nWaiting for job 31 for web2 ...\n"
    assert err == "Job 31 for web2 has failed: Failure: command execution error:\nit broke\n"


def test_several_instances_refused(answers: Any) -> None:
    refuse(answers)
    fake = many(["web1", "web2"])
    assert inst("startup", "web1", "web2", fake=fake) == (1, "", "")
    assert fake.methods() == ["Query"]


def test_force_multiple_and_selection_by_node(answers: Any) -> None:
    nodes = {"fields": [_fdef("name", "Node", "text"), _fdef("pinst_list", "P", "other"),
                        _fdef("sinst_list", "S", "other")],
             "data": [[[0, "node1"], [0, ["web1", "web2"]], [0, ["db1"]]]]}
    fake = many(["web1", "web2"], Query=nodes)
    assert inst("startup", "--primary", "--force-multiple", "node1", fake=fake)[0] == 0
    assert answers == []
    assert fake.args("Query") == [("node", ["name", "pinst_list", "sinst_list"], ["|", ["==", "name", "node1"]])]
    assert [job["instance_name"] for job in jobs_of(fake)] == ["web1", "web2"]
    fake = many(["web1", "web2", "db1"], Query=nodes)
    assert inst("startup", "--node", "--force-multiple", "node1", fake=fake)[0] == 0
    assert [job["instance_name"] for job in jobs_of(fake)] == ["web1", "web2", "db1"]


def test_selection_by_tags_and_all(answers: Any) -> None:
    tagged = {"fields": [_fdef("name", "Instance", "text"), _fdef("tags", "Tags", "other")],
              "data": [[[0, "web1"], [0, ["prod"]]], [[0, "web2"], [0, []]]]}
    fake = many(["web1"], Query=tagged)
    assert inst("shutdown", "--tags", "--force-multiple", "prod", fake=fake)[0] == 0
    assert [job["instance_name"] for job in jobs_of(fake)] == ["web1"]
    empty = Client(Query={"fields": [_fdef("name", "Instance", "text")], "data": []})
    assert inst("startup", "--all", fake=empty) == (0, "Cluster is empty, no instances to startup\n", "")
    code, _, err = inst("startup", "--tags", "nosuch", fake=Client(Query=tagged))
    assert code == 1 and "Selection filter does not match any instances" in err


# --- modify, rename, reinstall --------------------------------------------------------------------
def test_modify_builds_set_params_and_prints_changes() -> None:
    fake = following(opresult=[["be/maxmem", 2048], ["disk/1", "add:size=1024,mode=rw"]])
    code, out, err = inst(
        "modify", "-B", "maxmem=2G,vcpus=default", "-H", "kernel_args=ro,-acpi", "-O", "dhcp=no",
        "--disk", "add:size=1G", "--disk", "0:remove", "--net", "add:link=br1", "--net", "1:ip=192.0.2.7",
        "--offline", "-o", "debootstrap+minimal", "--no-hotplug", "web1", fake=fake,
    )
    assert (code, err) == (0, "")
    assert own(submitted(fake)) == {
        "OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "web1",
        "beparams": {"maxmem": 2048, "vcpus": "default"},
        "hvparams": {"kernel_args": "ro", "acpi": None},
        "osparams": {"dhcp": "no"},
        "disks": [["add", -1, {"size": 1024}], ["remove", 0, {}]],
        "nics": [["add", -1, {"link": "br1"}], ["modify", 1, {"ip": "192.0.2.7"}]],
        "offline": True, "os_name": "debootstrap+minimal", "hotplug": False,
        "force": False, "force_variant": False, "wait_for_sync": True, "conflicts_check": True,
        "ignore_ipolicy": False, "hotplug_if_possible": False,
    }
    lines = out.splitlines()
    assert lines[:3] == ["Modified instance web1", " - be/maxmem -> 2048", " - disk/1 -> add:size=1024,mode=rw"]
    assert len(lines) == 5  # the two reminders (hvparams changed)


def test_modify_online_and_nothing_to_do() -> None:
    fake = following()
    assert inst("modify", "--online", "web1", fake=fake) == (0, "", "")
    assert submitted(fake)["offline"] is False
    assert inst("modify", "web1") == (1, "", "Please give at least one of the parameters.\n")


def test_rename(answers: Any) -> None:
    fake = following(opresult="web9.example.com")
    code, out, _ = inst("rename", "web1", "web9.example.com", fake=fake)
    assert (code, out) == (0, "Instance 'web1' renamed to 'web9.example.com'\n")
    assert own(submitted(fake)) == {"OP_ID": "OP_INSTANCE_RENAME", "instance_name": "web1",
                                    "new_name": "web9.example.com", "name_check": True, "ip_check": True}
    assert answers == []
    fake = following(opresult="web9")
    assert inst("rename", "--no-name-check", "--no-ip-check", "web1", "web9", fake=fake)[0] == 0
    assert len(answers) == 1 and "web9" in answers[0]
    assert (submitted(fake)["name_check"], submitted(fake)["ip_check"]) == (False, False)
    refuse(answers)
    assert inst("rename", "--no-name-check", "--no-ip-check", "web1", "web9") == (1, "", "")


def test_reinstall(answers: Any) -> None:
    fake = many(["web1"])
    code, out, _ = inst("reinstall", "-o", "debootstrap+default", "-O", "dhcp=no", "web1", fake=fake)
    assert (code, out) == (0, "Waiting for job 30 for web1 ...\n")
    assert "web1" in answers[0] and "debootstrap+default" in answers[0]
    assert jobs_of(fake) == [{"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": "web1", "force_variant": False,
                              "os_type": "debootstrap+default", "osparams": {"dhcp": "no"}}]
    refuse(answers)
    assert inst("reinstall", "web1", fake=many(["web1"]))[0] == 1
    fake = many(["web1"])
    assert inst("reinstall", "-f", "web1", fake=fake)[0] == 0
    assert jobs_of(fake) == [{"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": "web1", "force_variant": False}]


# --- failover, migrate, console --------------------------------------------------------------------
def test_failover(answers: Any) -> None:
    fake = following()
    fake.answers["Query"] = NAMES
    assert inst("failover", "--ignore-consistency", "-n", "node3", "--shutdown-timeout", "10", "web1",
                fake=fake)[0] == 0
    assert len(answers) == 1
    assert own(submitted(fake)) == {"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "web1",
                                    "ignore_consistency": True, "shutdown_timeout": 10, "ignore_ipolicy": False,
                                    "cleanup": False, "target_node": "node3"}
    code, _, err = inst("failover", "-f", "-n", "node3", "-I", "hail", "web1")
    assert code == 1 and "not both" in err


def test_migrate(answers: Any) -> None:
    fake = following()
    assert inst("migrate", "-f", "--non-live", "--allow-failover", "-I", "hail", "web1", fake=fake)[0] == 0
    assert answers == []
    assert own(submitted(fake)) == {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1", "cleanup": False,
                                    "allow_failover": True, "allow_runtime_changes": True, "ignore_ipolicy": False,
                                    "ignore_hvversions": False, "iallocator": "hail", "mode": "non-live"}
    fake = following()
    fake.answers["Query"] = NAMES
    assert inst("migrate", "--cleanup", "--migration-mode", "live", "--no-runtime-changes", "web1",
                fake=fake)[0] == 0
    assert "recovered from a failed migration" in answers[0]
    op = submitted(fake)
    assert (op["cleanup"], op["mode"], op["allow_runtime_changes"]) == (True, "live", False)
    code, _, err = inst("migrate", "-f", "--non-live", "--migration-mode", "live", "web1")
    assert code == 1 and "Only one of the --non-live and --migration-mode" in err


def _console(console: Any, running: Any = True, status: int = 0) -> Client:
    return Client(Query={"fields": [_fdef("name", "Instance", "text"), _fdef("console", "Console", "other"),
                                    _fdef("oper_state", "Running", "bool")],
                         "data": [[[0, "web1"], [status, console], [0 if running is not None else 2, running]]]})


def test_console_kinds() -> None:
    fake = _console({"instance": "web1", "kind": "msg", "message": "No console for fake instances"})
    assert inst("console", "web1", fake=fake) == (0, "No console for fake instances\n", "")
    assert fake.args("Query") == [("instance", ["name", "console", "oper_state"], ["|", ["==", "name", "web1"]])]
    vnc = {"instance": "web1", "kind": "vnc", "host": "node1", "port": 5901, "display": 1}
    assert inst("console", "web1", fake=_console(vnc)) == (
        0, "Instance web1 has VNC listening on node1:5901 (display 1).\n", "")
    ssh = {"instance": "web1", "kind": "ssh", "host": "node1", "user": "root",
           "command": ["socat", "STDIO,raw", "UNIX-CONNECT:/run/web1 serial"]}
    assert inst("console", "--show-cmd", "web1", fake=_console(ssh)) == (
        0, "ssh '-oEscapeChar=~' -oBatchMode=yes -t -l root node1"
           " 'socat STDIO,raw '\"'\"'UNIX-CONNECT:/run/web1 serial'\"'\"''\n", "")


def test_console_not_running() -> None:
    code, _, err = inst("console", "web1", fake=_console(None, running=False, status=2))
    assert code == 1 and "Instance web1 is not running, can't get console" in err
    code, _, err = inst("console", "web1", fake=_console(None, running=True, status=2))
    assert code == 1 and "Console information for instance web1 is unavailable" in err


# --- gnt-node evacuate, migrate ---------------------------------------------------------------------
def node_answer(pinst: list[str], sinst: list[str] | None = None) -> dict[str, Any]:
    fields = [_fdef("name", "Node", "text"), _fdef("pinst_list", "P", "other")]
    row = [[0, "node1"], [0, pinst]]
    if sinst is not None:
        fields.append(_fdef("sinst_list", "S", "other"))
        row.append([0, sinst])
    return {"fields": fields, "data": [row]}


def evacuating(result: Any, job_statuses: list[str], nodes: Any) -> Client:
    waits: list[Any] = [[["running"], []], [["success"], []]]
    query_jobs: list[Any] = [[["success", ["success"], [result]]]]
    for status in job_statuses:
        waits += [[["running"], [log(1, "moving")]], [[status], []]]
        query_jobs.append([[status, [status], [None if status == "success" else ["OpExecError", ["no room"]]]]])
    return Client(Query=nodes, SubmitJob=50, WaitForJobChange=waits, QueryJobs=query_jobs)


def test_node_evacuate_follows_the_jobs(answers: Any, utc: Any) -> None:
    fake = evacuating({"jobs": [[True, 51], [True, 52]]}, ["success", "success"], node_answer(["web1"], ["db1"]))
    code, out, err = gnt("gnt-node", "evacuate", "-n", "node3", "--early-release", "node1", fake=fake)
    assert (code, err) == (0, "")
    assert answers == ["Move instance(s) db1, web1 away from node node1?"]
    assert fake.args("Query") == [("node", ["name", "pinst_list", "sinst_list"], ["|", ["==", "name", "node1"]])]
    assert own(submitted(fake)) == {"OP_ID": "OP_NODE_EVACUATE", "node_name": "node1", "mode": "all",
                                    "early_release": True, "remote_node": "node3"}
    assert out == (
        "Submitted jobs 51, 52\n"
        "Waiting for job 51 ...\nTue Nov 14 22:13:20 2023 moving\n"
        "Waiting for job 52 ...\nTue Nov 14 22:13:20 2023 moving\n"
        "All instances evacuated successfully.\n"
    )
    assert [args[0] for args in fake.args("WaitForJobChange")] == [50, 50, 51, 51, 52, 52]


def test_node_evacuate_modes_failures_and_nothing_to_do(answers: Any) -> None:
    fake = evacuating({"jobs": [[True, 51], [False, "cannot"]]}, ["error"], node_answer(["web1"]))
    code, out, err = gnt("gnt-node", "evacuate", "-p", "-f", "-I", "hail", "node1", fake=fake)
    assert code == 1 and answers == []
    assert fake.args("Query")[0][1] == ["name", "pinst_list"]
    assert own(submitted(fake)) == {"OP_ID": "OP_NODE_EVACUATE", "node_name": "node1", "mode": "primary-only",
                                    "early_release": False, "iallocator": "hail"}
    assert out.endswith("There were 2 errors during the evacuation.\n")
    assert "Job 51 has failed: Failure: command execution error:\nno room" in err
    assert "Failed to submit job: cannot" in err
    fake = Client(Query=node_answer([]))
    assert gnt("gnt-node", "evacuate", "-s", "node1", fake=fake) == (
        0, "", "No instances to evacuate on node(s) node1, exiting.\n")
    assert gnt("gnt-node", "evacuate", "-p", "-s", "node1")[0] == 2
    assert gnt("gnt-node", "evacuate", "-n", "x", "-I", "hail", "node1")[0] == 1
    refuse(answers)
    assert gnt("gnt-node", "evacuate", "node1", fake=Client(Query=node_answer(["web1"], []))) == (13, "", "")


def test_node_migrate(answers: Any) -> None:
    fake = evacuating({"jobs": [[True, 51]]}, ["success"], node_answer(["web2", "web10"]))
    code, out, err = gnt("gnt-node", "migrate", "--non-live", "-n", "node2", "node1", fake=fake)
    assert (code, err) == (0, "")
    assert answers == ["Migrate instance(s) web2, web10?"]
    assert own(submitted(fake)) == {"OP_ID": "OP_NODE_MIGRATE", "node_name": "node1", "allow_runtime_changes": True,
                                    "ignore_ipolicy": False, "mode": "non-live", "target_node": "node2"}
    assert out.endswith("All instances migrated successfully.\n")
    assert gnt("gnt-node", "migrate", "node1", fake=Client(Query=node_answer([]))) == (
        0, "No primary instances on node node1, exiting.\n", "")
    fake = Client(Query=node_answer(["web1"]), SubmitJob=50)
    assert gnt("gnt-node", "migrate", "-f", "--submit", "node1", fake=fake) == (0, "", "JobID: 50\n")
    code, _, err = gnt("gnt-node", "migrate", "-f", "--non-live", "--migration-mode", "live", "node1")
    assert code == 1 and "Only one of" in err
