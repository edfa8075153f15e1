"""noded's import/export procedures: disk transfers and the exports kept here.

Transfers (the wire format is in L{ganeti.noded.stream})::

  impexp_listen [spec] -> {"id", "port", "token"}
      spec: {"bind": address, "dest": IO, "compress": str, "connect_timeout": s}
      Opens a TLS listener on C{bind}, an ephemeral port, for one connection
      that must present C{token}; the data goes to C{dest}.
  impexp_send [spec] -> {"id"}
      spec: {"host", "port", "token", "source": IO, "compress": str}
  impexp_status [[id, ...], wait] -> [status or None, ...]
      (answered when one of them ends, or after C{wait} seconds: optional, default 0)
      status: {"id", "kind", "done", "success", "error", "bytes", "elapsed", "rate"}
  impexp_abort [[id, ...]] -> None     stop, remove what a receiver wrote, forget
  impexp_cleanup [[id, ...]] -> None   forget finished transfers

IO: C{{"type": "file", "export": name, "file": dump}} (a dump in the export
C{name}: written into C{<export dir>/<name>.new/}, read from
C{<export dir>/<name>/}), or C{{"type": "os", "instance": INST_DICT,
"index": disk index}} (the OS's C{import} script with C{IMPORT_DEVICE} /
C{IMPORT_INDEX}, or its C{export} script with C{EXPORT_DEVICE} /
C{EXPORT_INDEX}, as Ganeti's OS API says), or C{{"type": "disk", "disk":
DISK_DICT}} (the raw content of an existing file disk, for moves; a
receiver overwrites it in place and leaves it to the master to remove).

A transfer that nobody asks about for L{LEASE} seconds (its job died) is
aborted, and so is an export being written (C{<name>.new}, removed) when
no status request came for as long: a job killed even with SIGKILL leaves
no transfer running and no partial export.

Exports (Ganeti's layout: C{<export dir>/<instance name>/config.ini} and one
dump per disk)::

  export_start [name]                 a fresh, empty C{<name>.new}
  export_finalize [name, config_text] write config.ini, replace C{<name>} by C{<name>.new}
  export_discard [name]               remove C{<name>.new}
  export_list [] -> [name, ...]
  export_info [name] -> config.ini text
  export_remove [name]

Certificates for transfers between clusters (Ganeti's C{x509_cert_create}):
C{x509_cert_create [validity seconds] -> [name, cert PEM]} makes a
self-signed key and certificate kept under C{<run dir>/crypto/<name>/};
C{x509_cert_remove [name]} removes them.  A transfer spec with C{"x509":
{"key_name": name, "peer_cert": PEM}} presents that certificate instead of
the cluster's and accepts exactly the peer's certificate.
"""

from __future__ import annotations

import configparser
import ipaddress
import os
import re
import secrets
import shutil
import socket
import threading
from typing import Any, Callable, cast

from twisted.internet import defer
from twisted.internet.interfaces import IReactorFromThreads, IReactorTime
from twisted.internet.threads import blockingCallFromThread
from twisted.logger import Logger

from ganeti import crypto as crypto_mod
from ganeti.backend import osapi
from ganeti.noded import bulk, stream
from ganeti.noded.dispatch import handler
from ganeti.noded.failure import RpcFailure
from ganeti.reactors import IReactor
from ganeti.rpc import procedures
from ganeti.rpc.tls import Credentials

#: seconds without a status request after which a transfer is aborted
LEASE = 120.0
#: default seconds a listener waits for its connection
CONNECT_TIMEOUT = 60.0
MAX_CONNECT_TIMEOUT = 3600.0
#: longest wait of a status request for a transfer's end
MAX_STATUS_WAIT = 30.0
#: finished transfers kept for status requests, at most
MAX_FINISHED = 256
EXPORT_CONF_FILE = "config.ini"
NEW_SUFFIX = ".new"
TOKEN_BYTES = 32

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")

#: what C{impexp_status} answers: per id, its status (C{None}: unknown id)
Statuses = list[dict[str, Any] | None]


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise RpcFailure(message)


def check_export_name(value: Any, what: str = "export name") -> str:
    _check(isinstance(value, str) and bool(_NAME_RE.match(value)) and not value.endswith(NEW_SUFFIX),
           "Invalid %s %.100r" % (what, value))
    return cast("str", value)


def _address(value: Any, what: str) -> str:
    try:
        ipaddress.ip_address(value)
    except (TypeError, ValueError):
        raise RpcFailure("%s must be an IP address, not %.100r" % (what, value)) from None
    return cast("str", value)


def parse_export_config(text: str) -> configparser.ConfigParser:
    """C{config.ini} text, parsed; it must have Ganeti's C{export} and C{instance} sections.
    @raise RpcFailure: otherwise
    """
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        raise RpcFailure("Invalid export configuration: %s" % exc) from None
    _check(parser.has_section("export") and parser.has_section("instance"),
           "Export info file doesn't have the required fields")
    return parser


class Transfer:
    """One transfer's state, as L{ImpExpProcedures.impexp_status} reports it."""

    log = Logger()

    def __init__(self, tid: str, kind: str, clock: IReactorTime, what: str) -> None:
        self.id, self.kind, self.what = tid, kind, what
        self._clock = clock
        self.started = clock.seconds()
        self.ended: float | None = None
        self.bytes = 0
        self.done = False
        self.error: str | None = None
        self._aborts: list[Callable[[], Any]] = []
        self._waiters: list[Callable[[], Any]] = []
        self.lease: Any = None

    def on_end(self, waiter: Callable[[], Any]) -> None:
        """Call C{waiter} once the transfer is done (at once if it is)."""
        if self.done:
            waiter()
        else:
            self._waiters.append(waiter)

    def _ended(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter()

    def on_abort(self, hook: Callable[[], Any]) -> None:
        """Call C{hook} when the transfer fails or is aborted (undo what it made)."""
        self._aborts.append(hook)

    def succeed(self) -> None:
        if not self.done:
            self.done, self.ended = True, self._clock.seconds()
            self._aborts.clear()
            self.log.info("transfer {id} ({what}) done: {bytes} bytes", id=self.id, what=self.what, bytes=self.bytes)
            self._ended()

    def fail(self, message: str) -> None:
        if self.done:
            return
        self.done, self.error, self.ended = True, message, self._clock.seconds()
        self.log.warn("transfer {id} ({what}) failed: {error}", id=self.id, what=self.what, error=message)
        hooks, self._aborts = self._aborts, []
        for hook in reversed(hooks):
            try:
                hook()
            except Exception:
                self.log.failure("cleaning up transfer {id}", id=self.id)
        self._ended()

    def status(self) -> dict[str, Any]:
        end = self.ended if self.ended is not None else self._clock.seconds()
        elapsed = max(end - self.started, 1e-6)
        return {"id": self.id, "kind": self.kind, "done": self.done, "success": self.done and self.error is None,
                "error": self.error, "bytes": self.bytes, "elapsed": elapsed, "rate": self.bytes / elapsed}


def _run_thread(reactor: IReactorFromThreads, transfer: Transfer, name: str, work: Callable[[], Any]) -> None:
    """Run C{work} (a transfer's bytes) in a thread of its own; its end
    (success, or the L{stream.StreamError}'s message) goes to C{transfer}
    in the reactor thread."""

    def run() -> None:
        try:
            work()
        except stream.StreamError as exc:
            reactor.callFromThread(transfer.fail, str(exc))
        except Exception as exc:  # a bug must still end the transfer, never a thread silently
            reactor.callFromThread(transfer.fail, "internal error: %r" % (exc,))
        else:
            reactor.callFromThread(transfer.succeed)

    threading.Thread(target=run, name="%s %s" % (name, transfer.id), daemon=True).start()


class ImpExpProcedures:
    """The import/export procedures of one node.

    @param instances: the node's L{ganeti.noded.instances.InstanceProcedures}
        (disk paths and OS definitions)
    """

    log = Logger()

    def __init__(self, paths: Any, reactor: IReactor, instances: Any,
                 credentials: Callable[[], Credentials] | None = None) -> None:
        self.paths = paths
        self._reactor = reactor
        self._instances = instances
        self._credentials = credentials or (lambda: Credentials.cluster(paths))
        self._transfers: dict[str, Transfer] = {}
        #: export name -> the timer removing its C{.new} directory when its job is gone
        self._export_leases: dict[str, Any] = {}

    # --- helpers ------------------------------------------------------------------------

    def _new(self, kind: str, what: str) -> Transfer:
        finished = [t for t in self._transfers.values() if t.done]
        for old in finished[:max(0, len(finished) - MAX_FINISHED)]:
            self._forget(old.id)
        transfer = Transfer(secrets.token_hex(8), kind, self._reactor, what)
        self._transfers[transfer.id] = transfer
        self._renew(transfer)
        return transfer

    def _renew(self, transfer: Transfer) -> None:
        if transfer.lease is not None and transfer.lease.active():
            transfer.lease.cancel()
        if not transfer.done:
            transfer.lease = self._reactor.callLater(
                LEASE, transfer.fail, "abandoned: no status request for %d seconds" % LEASE)

    def _forget(self, tid: str) -> None:
        transfer = self._transfers.pop(tid, None)
        if transfer is not None and transfer.lease is not None and transfer.lease.active():
            transfer.lease.cancel()

    def _export_path(self, name: str, *parts: str) -> str:
        return os.path.join(self.paths.export_dir, name, *parts)

    def _crypto_dir(self, name: str) -> str:
        return os.path.join(self.paths.run_dir, "crypto", name)

    def _tls_for(self, spec: dict[str, Any]) -> tuple[Credentials, frozenset[str]]:
        """What a transfer presents and accepts: the cluster certificate, or a
        move's own certificate and the other cluster's (C{spec["x509"]})."""
        x509 = spec.get("x509")
        if x509 is None:
            creds = self._credentials()
            return creds, frozenset([creds.ca_fingerprint])
        _check(isinstance(x509, dict), "x509 must be a dict")
        name = check_export_name(x509.get("key_name"), "X509 key name")
        peer = x509.get("peer_cert")
        _check(isinstance(peer, str) and "-----BEGIN CERTIFICATE-----" in peer, "x509 needs the peer's certificate")
        try:
            key_pem, cert_pem = crypto_mod.load_pem_file(os.path.join(self._crypto_dir(name), "key.pem"))
            peer_pem = peer.encode("ascii")
            digest = crypto_mod.fingerprint(peer_pem, "sha1")
        except Exception as exc:
            raise RpcFailure("Cannot use X509 key %s: %s" % (name, exc)) from None
        return Credentials(key_pem, cert_pem, peer_pem), frozenset([digest])

    @handler(procedures.x509_cert_create)
    def x509_cert_create(self, validity: Any) -> list[str]:
        _check(isinstance(validity, int) and not isinstance(validity, bool) and 0 < validity <= 366 * 86400,
               "Invalid validity %r" % (validity,))
        name = "x509-%s" % secrets.token_hex(8)
        directory = self._crypto_dir(name)
        key_pem, cert_pem = crypto_mod.generate_key_and_cert(name, days=max(1, validity // 86400))
        try:
            os.makedirs(directory, mode=0o700)
            crypto_mod.write_pem_file(os.path.join(directory, "key.pem"), key_pem, cert_pem)
        except OSError as exc:
            raise RpcFailure("Cannot store the X509 key in %s: %s" % (directory, exc.strerror)) from None
        return [name, cert_pem.decode("ascii")]

    @handler(procedures.x509_cert_remove)
    def x509_cert_remove(self, name: Any) -> None:
        name = check_export_name(name, "X509 key name")
        shutil.rmtree(self._crypto_dir(name), ignore_errors=True)
        return None

    def _compression(self, spec: dict[str, Any]) -> str:
        try:
            return stream.check_compression(spec.get("compress", stream.COMPRESS_NONE))
        except stream.StreamError as exc:
            raise RpcFailure(str(exc)) from None

    def _os_io(self, io: dict[str, Any], script: str) -> tuple[str, dict[str, str], str, int, str,
                                                               stream.DeviceSpec | None]:
        """The script, environment, directory, log (fd, path) of an OS
        import/export, and for an rbd disk the pipe the script sees as its
        device (L{stream.DevicePipe}: the node has no device for a userspace
        image); an export reads the snapshot C{io["snapshot"]} if given."""
        from ganeti.noded import rbd as rbd_disks
        from ganeti.noded.instances import decode

        instance, disks = decode(io.get("instance"))
        index: Any = io.get("index")  # from the wire: checked below
        _check(isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(disks),
               "Instance %s has no disk %r" % (instance.name, index))
        definition, variant = self._instances._os(instance)
        try:
            executable = definition.script(script)
        except osapi.InvalidOS as exc:
            raise RpcFailure(str(exc)) from None
        disk_paths = self._instances._disk_paths(instance, disks)
        _check(index < len(disk_paths), "Disk %d of instance %s is not on this node" % (index, instance.name))
        prefix = "EXPORT" if script == osapi.SCRIPT_EXPORT else "IMPORT"
        extra = {prefix + "_DEVICE": disk_paths[index][1], prefix + "_INDEX": "%d" % index}
        env = osapi.script_environment(definition, variant, instance, disk_paths, 0, extra)
        snapshot = io.get("snapshot")
        _check(snapshot is None or isinstance(snapshot, str), "snapshot must be a name")
        disk = disk_paths[index][0]
        _check(snapshot is None or rbd_disks.is_rbd(disk) or disk.dev_type == "ext",
               "Only rbd and ext disks are exported from snapshots here")
        if snapshot is not None and disk.dev_type == "ext" and script == osapi.SCRIPT_EXPORT:
            # the snapshot volume blockdev_snapshot made and attached (ganeti.noded.extstorage)
            env[prefix + "_DEVICE"] = self._instances.ext.snapshot_device(disk, snapshot)
        log_path, log_fd = osapi.open_log(self.paths.os_log_dir, script, instance.os or "", instance.name or "")
        device: stream.DeviceSpec | None = None
        if rbd_disks.is_rbd(disk):
            try:
                if script == osapi.SCRIPT_EXPORT:
                    factory = self._instances.rbd.export_pipe(disk, snapshot, log_fd)
                else:
                    factory = self._instances.rbd.import_pipe(disk, log_fd)
            except BaseException:
                os.close(log_fd)
                raise
            device = (prefix + "_DEVICE", factory)
        return executable, env, definition.path, log_fd, log_path, device

    def _disk_path(self, io: dict[str, Any]) -> str:
        """The path on this node of the existing file disk C{io["disk"]}."""
        from ganeti.noded.instances import decode_disk

        record = decode_disk(io.get("disk"))
        _driver, path = self._instances.locate(record)
        _check(os.path.isfile(path), "Disk %s does not exist on this node" % path)
        return cast("str", path)

    def _sink(self, io: Any) -> tuple[Callable[[], Any], str]:
        _check(isinstance(io, dict), "dest must be a dict")
        if io.get("type") == "file":
            name = check_export_name(io.get("export"))
            dump = check_export_name(io.get("file"), "dump file name")
            directory = self._export_path(name + NEW_SUFFIX)
            _check(os.path.isdir(directory), "Export %s is not being written here (no %s)" % (name, directory))
            path = os.path.join(directory, dump)
            _check(not os.path.lexists(path), "%s exists already" % path)
            self._renew_export(name)
            return (lambda: stream.FileSink(path)), "into %s" % path
        if io.get("type") == "disk":
            path = self._disk_path(io)
            return (lambda: stream.DiskSink(path)), "into disk %s" % path
        if io.get("type") == "os":
            def make() -> Any:
                script, env, cwd, log_fd, log_path, device = self._os_io(io, osapi.SCRIPT_IMPORT)
                return stream.ScriptSink(script, env, cwd, log_fd, log_path, device)

            return make, "into the import script (disk %s)" % io.get("index")
        raise RpcFailure("Unknown destination type %r" % (io.get("type"),))

    def _source(self, io: Any) -> tuple[Any, str]:
        _check(isinstance(io, dict), "source must be a dict")
        if io.get("type") == "file":
            name = check_export_name(io.get("export"))
            dump = check_export_name(io.get("file"), "dump file name")
            path = self._export_path(name, dump)
            try:
                return stream.FileSource(path), "from %s" % path
            except OSError as exc:
                raise RpcFailure("Cannot read %s: %s" % (path, exc.strerror)) from None
        if io.get("type") == "disk":
            path = self._disk_path(io)
            try:
                return stream.FileSource(path), "from disk %s" % path
            except OSError as exc:
                raise RpcFailure("Cannot read %s: %s" % (path, exc.strerror)) from None
        if io.get("type") == "os":
            script, env, cwd, log_fd, log_path, device = self._os_io(io, osapi.SCRIPT_EXPORT)
            return stream.ScriptSource(script, env, cwd, log_fd, log_path, device), \
                "from the export script (disk %s)" % io.get("index")
        raise RpcFailure("Unknown source type %r" % (io.get("type"),))

    # --- transfers ----------------------------------------------------------------------

    def _tls(self, creds: Credentials, server: bool) -> Any:
        try:
            return bulk.tls_context(creds, server=server)
        except (OSError, ValueError) as exc:
            raise RpcFailure("Cannot use the transfer's certificate: %s" % exc) from None

    def _open_sink(self, transfer: Transfer, make_sink: Callable[[], Any]) -> Any:
        """(Reactor thread) the sink of a transfer whose sender is authenticated,
        discarded when the transfer fails."""
        if transfer.done:
            raise stream.StreamError("aborted")
        try:
            sink = make_sink()
        except (OSError, RpcFailure, osapi.OSScriptError) as exc:
            raise stream.StreamError("cannot store the data: %s" % exc) from None
        transfer.on_abort(sink.discard)
        return sink

    @staticmethod
    def _stored(transfer: Transfer) -> bool:
        """(Reactor thread) the receiver has everything: done, unless aborted meanwhile."""
        if transfer.done:
            return False
        transfer.succeed()
        return True

    @handler(procedures.impexp_listen)
    def impexp_listen(self, spec: Any) -> dict[str, Any]:
        _check(isinstance(spec, dict), "impexp_listen takes a spec dict")
        bind = _address(spec.get("bind"), "bind")
        compression = self._compression(spec)
        timeout = spec.get("connect_timeout", CONNECT_TIMEOUT)
        _check(isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
               and 0 < timeout <= MAX_CONNECT_TIMEOUT, "Invalid connect_timeout %r" % (timeout,))
        make_sink, what = self._sink(spec.get("dest"))
        creds, peers = self._tls_for(spec)
        tls = self._tls(creds, server=True)
        token = secrets.token_hex(TOKEN_BYTES)
        family = socket.AF_INET6 if ":" in bind else socket.AF_INET
        try:
            listener = socket.create_server((bind, 0), family=family, backlog=1)
        except OSError as exc:
            raise RpcFailure("Cannot listen for the transfer on %s: %s" % (bind, exc)) from None
        transfer = self._new("import", what)
        cancel = bulk.Cancel()
        cancel.watch(listener)
        transfer.on_abort(cancel.cancel)
        timer = self._reactor.callLater(timeout, transfer.fail, "no connection within %g seconds" % timeout)
        transfer.on_abort(lambda: timer.cancel() if timer.active() else None)
        reactor = self._reactor

        def accepted() -> None:
            reactor.callFromThread(lambda: timer.cancel() if timer.active() else None)

        def progress(count: int) -> None:
            transfer.bytes += count

        def run(conn: Any) -> int:
            return bulk.receive(conn, token, lambda: blockingCallFromThread(reactor, self._open_sink, transfer, make_sink),
                                compression, progress, lambda: blockingCallFromThread(reactor, self._stored, transfer))

        port = listener.getsockname()[1]
        _run_thread(reactor, transfer, "receive", lambda: bulk.serve(listener, cancel, tls, peers, accepted, run))
        return {"id": transfer.id, "port": port, "token": token}

    @handler(procedures.impexp_send)
    def impexp_send(self, spec: Any) -> dict[str, Any]:
        _check(isinstance(spec, dict), "impexp_send takes a spec dict")
        host = _address(spec.get("host"), "host")
        port = spec.get("port")
        _check(isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536, "Invalid port %r" % (port,))
        token = spec.get("token")
        _check(isinstance(token, str) and bool(re.match(r"^[0-9a-f]{16,128}$", token)), "Invalid token")
        compression = self._compression(spec)
        creds, peers = self._tls_for(spec)
        tls = self._tls(creds, server=False)
        source, what = self._source(spec.get("source"))
        transfer = self._new("export", "%s to %s:%d" % (what, host, port))
        cancel = bulk.Cancel()
        transfer.on_abort(source.kill)
        transfer.on_abort(cancel.cancel)

        def progress(count: int) -> None:
            transfer.bytes += count

        def work() -> None:
            try:
                bulk.connect(host, port, cancel, tls, peers,
                             lambda conn: bulk.send(conn, token, source, compression, progress))
            finally:
                source.close()

        _run_thread(self._reactor, transfer, "send", work)
        return {"id": transfer.id}

    def _ids(self, ids: Any) -> list[str]:
        _check(isinstance(ids, list) and all(isinstance(i, str) for i in ids), "ids must be a list of strings")
        return cast("list[str]", ids)

    @handler(procedures.impexp_status)
    def impexp_status(self, ids: Any, wait: Any = 0) -> defer.Deferred[Statuses] | Statuses:
        """The transfers' status; with C{wait} (seconds), once one of them
        ends, or after C{wait} seconds if none does (the master learns of the
        end at once without asking often)."""
        ids = self._ids(ids)
        _check(isinstance(wait, (int, float)) and not isinstance(wait, bool) and 0 <= wait <= MAX_STATUS_WAIT,
               "Invalid wait %r" % (wait,))
        running = [self._transfers[tid] for tid in ids if tid in self._transfers and not self._transfers[tid].done]
        if not wait or not running:
            return self._status(ids)
        ended: defer.Deferred[None] = defer.Deferred()

        def wake() -> None:
            if not ended.called:
                if timer.active():
                    timer.cancel()
                ended.callback(None)

        timer = self._reactor.callLater(wait, wake)
        for transfer in running:
            transfer.on_end(wake)
        return ended.addCallback(lambda _: self._status(ids))

    def _status(self, ids: list[str]) -> list[dict[str, Any] | None]:
        out: list[dict[str, Any] | None] = []
        for tid in ids:
            transfer = self._transfers.get(tid)
            if transfer is None:
                out.append(None)
                continue
            self._renew(transfer)
            out.append(transfer.status())
            for name in list(self._export_leases):  # a job that asks is alive: its export stays
                if transfer.what.startswith("into %s%s" % (self._export_path(name + NEW_SUFFIX), os.sep)):
                    self._renew_export(name)
        return out

    def _renew_export(self, name: str) -> None:
        """(Re)start the lease of export C{name}'s C{.new} directory."""
        self._end_export_lease(name)
        self._export_leases[name] = self._reactor.callLater(LEASE, self._export_abandoned, name)

    def _end_export_lease(self, name: str) -> None:
        timer = self._export_leases.pop(name, None)
        if timer is not None and timer.active():
            timer.cancel()

    def _export_abandoned(self, name: str) -> None:
        """Nobody asked about export C{name} for L{LEASE} seconds (its job died):
        stop what writes into it and remove C{<name>.new}."""
        self._export_leases.pop(name, None)
        directory = self._export_path(name + NEW_SUFFIX)
        self.log.warn("export {name}: abandoned (no request for {lease} s), removing {dir}", name=name,
                      lease=LEASE, dir=directory)
        prefix = "into %s%s" % (directory, os.sep)
        for transfer in list(self._transfers.values()):
            if transfer.what.startswith(prefix):
                transfer.fail("the export was abandoned")
        shutil.rmtree(directory, ignore_errors=True)

    @handler(procedures.impexp_abort)
    def impexp_abort(self, ids: Any) -> None:
        for tid in self._ids(ids):
            transfer = self._transfers.get(tid)
            if transfer is not None:
                transfer.fail("aborted")
                self._forget(tid)
        return None

    @handler(procedures.impexp_cleanup)
    def impexp_cleanup(self, ids: Any) -> None:
        for tid in self._ids(ids):
            transfer = self._transfers.get(tid)
            if transfer is not None:
                transfer.fail("cleaned up before it ended")
                self._forget(tid)
        return None

    # --- exports ------------------------------------------------------------------------

    @handler(procedures.export_start)
    def export_start(self, name: Any) -> None:
        name = check_export_name(name)
        directory = self._export_path(name + NEW_SUFFIX)
        try:
            os.makedirs(self.paths.export_dir, mode=0o750, exist_ok=True)
            shutil.rmtree(directory, ignore_errors=True)
            os.mkdir(directory, 0o750)
        except OSError as exc:
            raise RpcFailure("Cannot create %s: %s" % (directory, exc.strerror)) from None
        self._renew_export(name)
        return None

    @handler(procedures.export_finalize)
    def export_finalize(self, name: Any, config_text: Any) -> None:
        name = check_export_name(name)
        _check(isinstance(config_text, str), "config_text must be a string")
        parse_export_config(config_text)
        new = self._export_path(name + NEW_SUFFIX)
        final = self._export_path(name)
        _check(os.path.isdir(new), "Export %s is not being written here (no %s)" % (name, new))
        self._end_export_lease(name)
        try:
            path = os.path.join(new, EXPORT_CONF_FILE)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o640)
            try:
                os.write(fd, config_text.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            old = None
            if os.path.lexists(final):
                old = self._export_path(".%s.old-%s" % (name, secrets.token_hex(4)))
                os.rename(final, old)
            os.rename(new, final)
            dir_fd = os.open(self.paths.export_dir, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        except OSError as exc:
            raise RpcFailure("Cannot finalize export %s: %s" % (name, exc)) from None
        return None

    @handler(procedures.export_discard)
    def export_discard(self, name: Any) -> None:
        name = check_export_name(name)
        self._end_export_lease(name)
        shutil.rmtree(self._export_path(name + NEW_SUFFIX), ignore_errors=True)
        return None

    @handler(procedures.export_list)
    def export_list(self) -> list[str]:
        try:
            names = os.listdir(self.paths.export_dir)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise RpcFailure("Cannot list %s: %s" % (self.paths.export_dir, exc.strerror)) from None
        return sorted(n for n in names if not n.startswith(".") and not n.endswith(NEW_SUFFIX)
                      and os.path.isdir(self._export_path(n)))

    @handler(procedures.export_info)
    def export_info(self, name: Any) -> str:
        name = check_export_name(name)
        path = self._export_path(name, EXPORT_CONF_FILE)
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read(1 << 20)
        except OSError as exc:
            raise RpcFailure("Export %s not found on this node: %s" % (name, exc.strerror)) from None
        parse_export_config(text)
        return text

    @handler(procedures.export_remove)
    def export_remove(self, name: Any) -> None:
        name = check_export_name(name)
        target = self._export_path(name)
        _check(os.path.isdir(target), "Export %s not found on this node" % name)
        try:
            shutil.rmtree(target)
        except OSError as exc:
            raise RpcFailure("Error while removing the export: %s" % exc) from None
        return None
