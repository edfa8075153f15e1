"""move-instance: move instances between clusters over both clusters' RAPI.

    move-instance [options] SOURCE-CLUSTER DEST-CLUSTER INSTANCE...

As Ganeti's tool does, for each instance:

  1. reads the instance from the source cluster (C{GET /2/instances/<i>});
  2. prepares a remote export there (C{PUT /2/instances/<i>/prepare-export},
     mode C{remote}): a handshake, a key name and a certificate, signed with
     the cluster domain secret both clusters share;
  3. creates the instance on the destination (C{POST /2/instances}, mode
     C{remote-import}) and waits for the C{remote-import} entry of that
     job's log: where each disk is awaited and the destination's certificate;
  4. exports the instance there (C{PUT /2/instances/<i>/export}, mode
     C{remote}): the source stops it and streams each disk straight to the
     destination, TLS with the two certificates;
  5. waits for both jobs; the source instance is removed unless
     C{--keep-source-instance}.

Exit status 0 when every instance moved, 1 otherwise.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import ssl
import sys
import time
from typing import Any, cast

from ganeti.jobs import lifecycle

#: Ganeti's RAPI port
RAPI_PORT = 5080
#: seconds between job polls
POLL = 0.2
#: seconds to wait for a job
JOB_TIMEOUT = 86400.0
FINAL = lifecycle.FINALIZED


class MoveError(Exception):
    """A step of the move failed; the message says which and why."""


class Rapi:
    """A small blocking RAPI client (HTTPS, optional basic authentication)."""

    def __init__(self, host: str, port: int, ca_file: str | None, user: str | None, password: str | None) -> None:
        self.host, self.port = host, port
        self._context = ssl.create_default_context(cafile=ca_file) if ca_file else ssl._create_unverified_context()
        if ca_file:
            self._context.check_hostname = False
        self._auth = None
        if user is not None:
            self._auth = "Basic " + base64.b64encode(("%s:%s" % (user, password or "")).encode()).decode("ascii")

    def call(self, method: str, path: str, body: Any = None) -> Any:
        connection = http.client.HTTPSConnection(self.host, self.port, context=self._context, timeout=300)
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self._auth:
            headers["Authorization"] = self._auth
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            payload = response.read()
        except OSError as exc:
            raise MoveError("%s %s on %s: %s" % (method, path, self.host, exc)) from None
        finally:
            connection.close()
        try:
            answer = json.loads(payload) if payload else None
        except ValueError:
            answer = payload.decode("utf-8", "replace")
        if response.status != 200:
            message = answer.get("message") if isinstance(answer, dict) else answer
            raise MoveError("%s %s on %s: %d %s" % (method, path, self.host, response.status, message))
        return answer

    def job(self, job_id: int) -> dict[str, Any]:
        return cast("dict[str, Any]", self.call("GET", "/2/jobs/%d" % job_id))

    def wait(self, job_id: int, timeout: float = JOB_TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            info = self.job(job_id)
            if info.get("status") in FINAL:
                return info
            if time.monotonic() > deadline:
                raise MoveError("job %d on %s did not end in time" % (job_id, self.host))
            time.sleep(POLL)


def _job_error(info: dict[str, Any]) -> str:
    results = info.get("opresult") or []
    for result in results:
        if isinstance(result, list) and len(result) == 2 and isinstance(result[1], list):
            return "%s: %s" % (result[0], result[1][0] if result[1] else "")
    return str(results)[:300]


def _remote_import_info(info: dict[str, Any]) -> dict[str, Any] | None:
    for oplog in info.get("oplog") or []:
        for entry in oplog or []:
            if isinstance(entry, list) and len(entry) == 4 and entry[2] == "remote-import":
                return cast("dict[str, Any] | None", entry[3])
    return None


def create_body(opts: argparse.Namespace, inst: dict[str, Any], prepared: dict[str, Any]) -> dict[str, Any]:
    """The destination's OP_INSTANCE_CREATE (mode remote-import) for C{inst}."""
    nics = [{"mac": mac, "ip": ip, "mode": mode, "link": link, "network": network}
            for mac, ip, mode, link, network in zip(inst.get("nic.macs") or [], inst.get("nic.ips") or [],
                                                    inst.get("nic.modes") or [], inst.get("nic.links") or [],
                                                    inst.get("nic.networks") or [])]
    for nic in nics:
        for key in [k for k, v in nic.items() if v is None]:
            del nic[key]
    body: dict[str, Any] = {
        "__version__": 1,
        "mode": "remote-import",
        "instance_name": opts.dest_instance_name or inst["name"],
        "disk_template": opts.dest_disk_template or inst.get("disk_template"),
        "disks": [{"size": size} for size in inst.get("disk.sizes") or []],
        "nics": nics,
        "os_type": inst.get("os"),
        "hypervisor": inst.get("hypervisor"),
        "beparams": inst.get("custom_beparams") or {},
        "hvparams": inst.get("custom_hvparams") or {},
        "osparams": inst.get("custom_osparams") or {},
        "tags": inst.get("tags") or [],
        "name_check": False,
        "ip_check": False,
        "start": inst.get("admin_state") == "up",
        "compress": opts.compress,
        "source_handshake": prepared["handshake"],
        "source_x509_ca": prepared["x509_ca"],
        "source_instance_name": inst["name"],
    }
    if opts.dest_primary_node:
        body["pnode"] = opts.dest_primary_node
    elif opts.iallocator:
        body["iallocator"] = opts.iallocator
    return body


def move(opts: argparse.Namespace, source: Rapi, dest: Rapi, name: str, out: Any = sys.stdout) -> None:
    """Move instance C{name} from C{source} to C{dest}.
    @raise MoveError: a step failed (the message names it)
    """
    inst = source.call("GET", "/2/instances/%s" % name)
    out.write("Moving instance %s from %s to %s\n" % (name, source.host, dest.host))
    job = source.call("PUT", "/2/instances/%s/prepare-export" % name, {"mode": "remote"})
    info = source.wait(job)
    if info.get("status") != "success":
        raise MoveError("preparing the export on %s failed: %s" % (source.host, _job_error(info)))
    prepared = info["opresult"][0]
    import_job = dest.call("POST", "/2/instances", create_body(opts, inst, prepared))
    deadline = time.monotonic() + 600
    while True:
        info = dest.job(import_job)
        where = _remote_import_info(info)
        if where is not None:
            break
        if info.get("status") in FINAL:
            raise MoveError("the import on %s ended before listening: %s" % (dest.host, _job_error(info)))
        if time.monotonic() > deadline:
            raise MoveError("the import on %s did not start listening" % dest.host)
        time.sleep(POLL)
    out.write("Destination is listening for %d disk(s)\n" % len(where["disks"]))
    export_job = source.call("PUT", "/2/instances/%s/export" % name, {
        "mode": "remote", "target_node": where["disks"], "x509_key_name": prepared["x509_key_name"],
        "destination_x509_ca": where["x509_ca"], "shutdown": True, "long_sleep": True, "compress": opts.compress,
        "remove_instance": not opts.keep_source_instance, "shutdown_timeout": opts.shutdown_timeout,
    })
    exported = source.wait(export_job)
    imported = dest.wait(import_job)
    problems = []
    if exported.get("status") != "success":
        problems.append("export on %s: %s" % (source.host, _job_error(exported)))
    if imported.get("status") != "success":
        problems.append("import on %s: %s" % (dest.host, _job_error(imported)))
    if problems:
        raise MoveError("; ".join(problems))
    out.write("Instance %s moved to %s\n" % (name, dest.host))


def _password(path: str | None) -> str | None:
    if path is None:
        return None
    with open(path) as handle:
        return handle.readline().strip()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="move-instance", description="Move instances between clusters over RAPI")
    for side in ("src", "dest"):
        p.add_argument("--%s-rapi-port" % side, type=int, default=RAPI_PORT, metavar="PORT")
        p.add_argument("--%s-ca-file" % side, metavar="FILE", help="CA of the %s cluster's RAPI" % side)
        p.add_argument("--%s-username" % side, metavar="USER")
        p.add_argument("--%s-password-file" % side, metavar="FILE")
    p.add_argument("--dest-instance-name", metavar="NAME", help="Name on the destination (one instance only)")
    p.add_argument("--dest-primary-node", metavar="NODE")
    p.add_argument("--dest-disk-template", metavar="TEMPLATE")
    p.add_argument("--iallocator", metavar="NAME")
    p.add_argument("--keep-source-instance", action="store_true", help="Do not remove the source instance")
    p.add_argument("--compress", default="none", metavar="TOOL")
    p.add_argument("--shutdown-timeout", type=int, default=120, metavar="SECONDS")
    p.add_argument("source_cluster", metavar="SOURCE-CLUSTER")
    p.add_argument("dest_cluster", metavar="DEST-CLUSTER")
    p.add_argument("instances", nargs="+", metavar="INSTANCE")
    return p


def main(argv: list[str] | None = None) -> int:
    opts = parser().parse_args(argv)
    if opts.dest_instance_name and len(opts.instances) > 1:
        parser().error("--dest-instance-name works with one instance only")
    if opts.dest_primary_node and opts.iallocator:
        parser().error("give --dest-primary-node or --iallocator, not both")
    source = Rapi(opts.source_cluster, opts.src_rapi_port, opts.src_ca_file, opts.src_username,
                  _password(opts.src_password_file))
    dest = Rapi(opts.dest_cluster, opts.dest_rapi_port, opts.dest_ca_file, opts.dest_username,
                _password(opts.dest_password_file))
    failed = 0
    for name in opts.instances:
        try:
            move(opts, source, dest, name)
        except MoveError as exc:
            sys.stderr.write("Moving instance %s failed: %s\n" % (name, exc))
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
