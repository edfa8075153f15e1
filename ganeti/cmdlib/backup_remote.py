"""Exports and imports between clusters (Ganeti's remote mode; see
L{ganeti.cmdlib.rie} for the signed values and C{move-instance}).

  1. source cluster, OP_BACKUP_PREPARE mode C{remote}: a key and certificate
     on the instance's primary node; the answer is the handshake, the key's
     name and the certificate, signed with the cluster domain secret;
  2. destination cluster, OP_INSTANCE_CREATE mode C{remote-import} with that
     handshake and certificate: the instance and its disks are made, the
     primary node opens one listener per disk (its own certificate, which
     accepts only the source's) feeding the OS import script, and the job
     log gets a C{remote-import} entry C{{"disks": [signed host, port,
     magic, ...], "x509_ca": signed certificate}}; the job waits for the data;
  3. source cluster, OP_BACKUP_EXPORT mode C{remote} with those disks, the
     key name and the destination's certificate: the instance is stopped
     and each disk's OS export stream goes straight to its listener.
"""

from __future__ import annotations

from typing import Any

from ganeti import crypto, errors
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib import rie, transfer
from ganeti.cmdlib.base import LogicalUnit
from ganeti.objects import Instance
from ganeti.opcodes.typed import OpBackupExport, OpCode, OpInstanceCreate
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures

#: seconds a destination waits for the source's connections
RIE_CONNECT_TIMEOUT = 180.0


def domain_secret(lu: LogicalUnit[OpCode]) -> str:
    """The cluster domain secret of this (the master's) node.
    @raise errors.OpPrereqError: it cannot be read
    """
    paths = lu.ctx.paths
    if paths is None:
        raise errors.OpPrereqError("No cluster domain secret available here", errors.ECODE_ENVIRON)
    try:
        return crypto.load_domain_secret(paths.cluster_domain_secret).decode("ascii")
    except (errors.GenericError, OSError, UnicodeDecodeError) as exc:
        raise errors.OpPrereqError("Cannot read the cluster domain secret: %s" % exc, errors.ECODE_ENVIRON) from None


async def prepare(lu: LogicalUnit[OpCode], inst: Instance) -> dict[str, Any]:
    """OP_BACKUP_PREPARE in mode remote: what the destination cluster needs."""
    cds = domain_secret(lu)
    pnode = inst.primary_node or ""
    await lu.feedback("Generating X509 certificate on %s" % iu.node_name(lu.cfg, pnode))
    name, cert_pem = await iu.call_node(lu, pnode, procedures.x509_cert_create.call(rie.RIE_CERT_VALIDITY),
                                        what="create an X509 key and certificate")
    return {"handshake": rie.handshake(cds), "x509_key_name": rie.key_name(cds, name),
            "x509_ca": rie.sign_cert(cds, cert_pem)}


def check_import(lu: LogicalUnit[OpCode], op: OpInstanceCreate) -> str:
    """Check a remote import's handshake and source certificate; the source's PEM."""
    given = (("source_handshake", op.source_handshake), ("source_x509_ca", op.source_x509_ca),
             ("source_instance_name", op.source_instance_name))
    for key, value in given:
        if not value:
            raise errors.OpPrereqError("A remote import needs %s" % key, errors.ECODE_INVAL)
    assert op.source_handshake is not None and op.source_x509_ca is not None
    cds = domain_secret(lu)
    rie.check_handshake(cds, op.source_handshake)
    return rie.load_signed_cert(cds, op.source_x509_ca)


async def remote_import(lu: LogicalUnit[OpCode], inst: Instance, pnode: str, source_cert: str, compress: str) -> None:
    """Listen for the source's disks, announce where (job log), wait for all of them."""
    cds = domain_secret(lu)
    node = iu.get_node(lu.cfg, pnode)
    host = iu.node_address(node)
    name, cert_pem = await iu.call_node(lu, pnode, procedures.x509_cert_create.call(rie.RIE_CERT_VALIDITY),
                                        what="create an X509 key and certificate")
    listening: list[str] = []
    try:
        data = rpc_inst.encode_instance(lu.cfg, inst)
        disks = rpc_inst.instance_disks(lu.cfg, inst)
        salt = rie.new_salt()
        infos = []
        for index in range(len(disks)):
            answer = await iu.call_node(lu, pnode, procedures.impexp_listen.call({
                "bind": host, "dest": {"type": "os", "instance": data, "index": index}, "compress": compress,
                "connect_timeout": RIE_CONNECT_TIMEOUT, "x509": {"key_name": name, "peer_cert": source_cert},
            }), what="listen for disk %d" % index)
            listening.append(answer["id"])
            infos.append(rie.disk_info(cds, salt, index, host, answer["port"], answer["token"]))
        await lu.ctx.feedback({"disks": infos, "x509_ca": rie.sign_cert(cds, cert_pem)}, rie.ELOG_REMOTE_IMPORT)
        await lu.feedback("Waiting for the source cluster to send %d disk(s)" % len(disks))
        for index, tid in enumerate(listening):
            await transfer.follow_one(lu, "disk/%d" % index, pnode, tid, (disks[index].size or 0) * 1024 * 1024)
    except Exception:
        for tid in listening:
            await iu.call_node_result(lu, pnode, procedures.impexp_abort.call([tid]))
        raise
    finally:
        await iu.call_node_result(lu, pnode, procedures.x509_cert_remove.call(name))


def check_export(lu: LogicalUnit[OpCode], op: OpBackupExport, disk_count: int) -> tuple[str, str, list[tuple[str,
                 int, str]]]:
    """Check a remote export's key name, destination certificate and disks:
    C{(key name, destination PEM, [(host, port, magic), ...])}."""
    cds = domain_secret(lu)
    if not op.x509_key_name:
        raise errors.OpPrereqError("Missing X509 key name for encryption", errors.ECODE_INVAL)
    if not op.destination_x509_ca:
        raise errors.OpPrereqError("Missing destination X509 CA", errors.ECODE_INVAL)
    name = rie.check_key_name(cds, op.x509_key_name)
    dest_cert = rie.load_signed_cert(cds, op.destination_x509_ca)
    targets = op.target_node
    if not isinstance(targets, list) or len(targets) != disk_count:
        raise errors.OpPrereqError("Wrong number of destination disks (%s, instance has %d)"
                                   % (len(targets) if isinstance(targets, list) else "none", disk_count),
                                   errors.ECODE_INVAL)
    return name, dest_cert, [rie.check_disk_info(cds, i, v) for i, v in enumerate(targets)]


async def remote_export(lu: LogicalUnit[OpCode], inst: Instance, key: str, dest_cert: str,
                        targets: list[tuple[str, int, str]], compress: str) -> list[bool]:
    """Stream each disk's OS export to the destination cluster's listeners."""
    src = inst.primary_node or ""
    data = rpc_inst.encode_instance(lu.cfg, inst)
    disks = rpc_inst.instance_disks(lu.cfg, inst)
    results = []
    for index, (host, port, magic) in enumerate(targets):
        await lu.feedback("Sending disk/%d to %s port %d" % (index, host, port))
        answer = await iu.call_node(lu, src, procedures.impexp_send.call({
            "host": host, "port": port, "token": magic, "compress": compress,
            "source": {"type": "os", "instance": data, "index": index},
            "x509": {"key_name": key, "peer_cert": dest_cert},
        }), what="send disk %d" % index)
        await transfer.follow_one(lu, "disk/%d" % index, src, answer["id"], (disks[index].size or 0) * 1024 * 1024)
        results.append(True)
    return results
