"""The node-side procedures of node RPC (Ganeti's C{backend}).

Each method marked C{@handler(procedures.NAME)} (here and in L{instances}, L{impexp},
L{master} and L{ganeti.ha.elector}) serves the procedure of its name declared in
L{ganeti.rpc.procedures}: it takes the positional arguments of the request
(their count and JSON types checked against the declaration already) and
returns the payload (or a Deferred of it).  L{RpcFailure} becomes the
answer C{[false, message]}.  Every procedure checks the meaning of all of
its input before it changes anything.  A new procedure is a declaration
there and a handler here (or on one of the objects passed to
L{dispatch.Dispatch} below).
"""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import shutil
import socket
from typing import Any, Callable, cast

from twisted.internet import defer, task, threads
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP6ClientEndpoint
from twisted.internet.interfaces import ITransport
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger

from ganeti import GANETI_RELEASE, daemons, errors, kernelsync, serializer, ssconf
from ganeti.ha import elector
from ganeti.ha import epoch as master_epoch
from ganeti.ha import params as ha_params
from ganeti.ha.epoch import EpochGuard
from ganeti.jobs import replicas
from ganeti.noded import (
    checks,
    crypto_tokens,
    diskconvert,
    diskfiles,
    dispatch,
    files,
    hooks,
    hotplug,
    impexp,
    instances,
    master,
    oob,
    restricted,
    storage_units,
)
from ganeti.noded import commands as node_commands
from ganeti.noded.configdelta import REWRITE_DELAY, ConfigFollower, DeltaRefused
from ganeti.noded.dispatch import handler
from ganeti.noded.failure import RpcFailure
from ganeti.paths import Paths
from ganeti.reactors import IReactor
from ganeti.rpc import procedures, wire

#: Mode of job queue files (Ganeti: 0640).
QUEUE_FILE_MODE = 0o640
#: Longest C{test_delay} accepted, seconds.
MAX_DELAY = 24 * 3600
#: Seconds to wait for a TCP connection in C{node_verify}'s reachability test.
NET_TEST_TIMEOUT = 5.0
#: Daemons stopped, in this order, when the node leaves the cluster (Ganeti's LeaveCluster stops confd and MonD).
LEFT_CLUSTER_STOPS = ("ganeti-rapi", "ganeti-confd", "ganeti-mond")


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise RpcFailure(message)


def _file_sha1(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha1").hexdigest()
    except OSError:
        return None


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return ""


class NodeProcedures:
    """The procedures of one node root.

    @param paths: the node's root
    @param reactor: for timers and the reachability test
    @param shutdown: called (after the answer is sent) when the node leaves the cluster
    @param port: the noded port of other nodes (reachability test)
    @param lost_since: when this node's heartbeat lost the master
        (automatic failover; C{None}: no heartbeat runs here)
    @param hooks_timeout: seconds a hook script may run (L{hooks.HooksRunner})
    """

    log = Logger()

    def __init__(self, paths: Paths, reactor: IReactor, *, shutdown: Callable[[], None] | None = None,
                 port: int = wire.DEFAULT_PORT, lost_since: Callable[[], float | None] | None = None,
                 hooks_timeout: float = hooks.DEFAULT_TIMEOUT) -> None:
        self.paths = paths
        self._reactor = reactor
        self._shutdown = shutdown
        self._port = port
        self.instances = instances.InstanceProcedures(paths, reactor)
        self.impexp = impexp.ImpExpProcedures(paths, reactor, self.instances)
        self.hotplug = hotplug.HotplugProcedures(self.instances)
        self.diskconvert = diskconvert.DiskConvertProcedures(self.instances)
        #: the highest master epoch this node has seen (fencing of replaced masters)
        self.epoch = EpochGuard(paths)
        self.master = master.MasterProcedures(paths, reactor, self.epoch, port)
        self.election = elector.ElectionProcedures(paths, reactor, self.epoch, lost_since)
        self.oob = oob.OobProcedures(reactor, paths.root)
        self.hooks = hooks.HooksRunner(paths, reactor, hooks_timeout)
        self.master.hooks = self.hooks
        #: queue file path -> its lock: writes of one file stay in order
        self._queue_locks: dict[str, defer.DeferredLock] = {}
        self._queue_listing: replicas.ListingCache | None = None
        #: every declared procedure and its handler
        self.crypto = crypto_tokens.CryptoTokenProcedures(paths)
        self.commands = node_commands.CommandProcedures(paths, reactor)
        self.checks = checks.CheckProcedures(paths, reactor, self)
        self.restricted = restricted.RestrictedProcedures(paths, reactor)
        self.dispatch = dispatch.Dispatch([self, self.instances, self.impexp, self.hotplug, self.diskconvert,
                                           self.master, self.election, self.oob, self.hooks, self.crypto,
                                           self.commands, self.checks, self.restricted])
        #: config.data in memory, brought forward by C{config_delta}
        self.config_follower = ConfigFollower(paths)
        self.master.flush_config = self.election.flush_config = self.config_follower.flush
        self._rewrite_call: Any = None
        #: called once C{write_ssconf_files} wrote (it may name a new master: the heartbeat looks for it)
        self.ssconf_written: Callable[[], None] = lambda: None

    def lookup(self, name: str) -> Callable[..., Any] | None:
        """The handler of procedure C{name}; C{None} if none is declared."""
        entry = self.dispatch.get(name)
        return None if entry is None else entry.function

    # --- informational ---------------------------------------------------------------

    @handler(procedures.version)
    def version(self) -> int:
        return wire.PROTOCOL_VERSION

    @handler(procedures.master_node_name)
    def master_node_name(self) -> str:
        try:
            return ssconf.SimpleStore(self.paths).get_master_node()
        except errors.ConfigurationError as e:
            raise RpcFailure(str(e)) from None

    @handler(procedures.node_info)
    async def node_info(self, storage_units: list[Any], hv_specs: list[Any]) -> list[Any]:
        """C{[boot_id, [storage info...], [hypervisor info...]]} of this node;
        the hypervisor part comes from each hypervisor's C{get_node_info}."""
        _check(isinstance(storage_units, list) and isinstance(hv_specs, list),
               "node_info takes a list of storage units and a list of hypervisor specs")
        for spec in hv_specs:
            _check(isinstance(spec, list) and len(spec) == 2 and isinstance(spec[0], str),
                   "hypervisor spec must be [name, hvparams], not %.100r" % (spec,))
        storage = [await self._rados_info(unit) if isinstance(unit, list) and unit[:1] == ["rados"]
                   else self._storage_info(unit) for unit in storage_units]
        hv_info = [await self.instances.hypervisor_node_info(spec[0]) for spec in hv_specs]
        return [_boot_id(), storage, hv_info]

    async def _rados_info(self, unit: list[Any]) -> dict[str, Any]:
        """An rbd pool's space (C{ceph df}, as C{gnt-node list-storage -t rados});
        without figures when Ceph does not answer, so the rest of C{node_info} stands."""
        _check(len(unit) in (2, 3) and isinstance(unit[1], str), "storage unit must be [type, key, params], not %.100r"
               % (unit,))
        out: dict[str, Any] = {"type": "rados", "name": unit[1]}
        try:
            ((size, free),) = await storage_units.rados_units(self.instances.rbd.client, unit[1], None,
                                                                ["size", "free"])
        except RpcFailure as e:
            self.log.warn("node_info: no figures for rados pool {pool}: {why}", pool=unit[1], why=e)
            return out
        out.update(storage_free=int(free), storage_size=int(size))
        return out

    def _storage_info(self, unit: Any) -> dict[str, Any]:
        _check(isinstance(unit, list) and len(unit) in (2, 3) and isinstance(unit[0], str),
               "storage unit must be [type, key, params], not %.100r" % (unit,))
        kind, key = unit[0], unit[1]
        if kind == "diskless":
            return {"type": kind, "name": key, "storage_free": 0, "storage_size": 0}
        if kind in ("file", "sharedfile", "gluster"):
            try:
                real = wire.localize(self.paths.root, key)
            except wire.RpcWireError as e:
                raise RpcFailure(str(e)) from None
            probe = real  # a storage dir not created yet: report its file system
            while not os.path.exists(probe) and probe != self.paths.root:
                probe = os.path.dirname(probe)
            st = os.statvfs(probe)
            return {
                "type": kind,
                "name": key,
                "storage_free": st.f_bavail * st.f_frsize // (1024 * 1024),
                "storage_size": st.f_blocks * st.f_frsize // (1024 * 1024),
            }
        raise RpcFailure("Storage type %r is not supported on this node" % (kind,))

    @handler(procedures.node_verify)
    async def node_verify(self, checkdict: dict[str, Any], cluster_name: str, all_hvparams: Any = None) -> dict[str, Any]:
        """Checks named in C{checkdict}; unknown checks are ignored.

          - C{filelist}: [virtual paths] -> {path: sha1 hex} of the files present
          - C{node-net-test} / C{nodelist}: [[name, ip, ...] or name] ->
            {name: error} for nodes whose noded port is not reachable
          - C{ssconf}: {key: expected sha1 of the file, or null} ->
            {key: local sha1 or null} for each key that differs
          - C{version}: -> [protocol version, release]
          - C{bridges}: [bridge names] -> those missing on the node
          - C{cluster_name}: -> this node's ssconf cluster name (null if none)
          - C{instancelist}: [hypervisor names] -> [names of the instances
            running here], or the error message when they cannot be listed
          - C{disk-files} (ours, not Ganeti's): -> missing and orphan disk
            files (L{diskfiles.verify_disk_files})
          - C{data-space} (ours): -> C{{"path", "free", "total"}} of the
            data directory (MiB available to the daemons, filesystem size)
          - C{oob-paths}: [paths] -> per path null, or why it is no
            executable file (L{oob.verify_paths})
        """
        _check(isinstance(checkdict, dict), "node_verify takes a dict of checks")
        result: dict[str, Any] = {}
        if "filelist" in checkdict:
            names = checkdict["filelist"]
            _check(isinstance(names, list), "filelist must be a list of file names")
            found = {}
            for vpath in names:
                try:
                    digest = _file_sha1(wire.localize(self.paths.root, vpath))
                except wire.RpcWireError as e:
                    raise RpcFailure(str(e)) from None
                if digest is not None:
                    found[vpath] = digest
            result["filelist"] = found
        for check in ("node-net-test", "nodelist"):
            if check in checkdict:
                result[check] = await self._net_test(checkdict[check])
        if "ssconf" in checkdict:
            expected = checkdict["ssconf"]
            if isinstance(expected, list):
                expected = dict.fromkeys(expected)
            _check(isinstance(expected, dict), "ssconf check takes {key: sha1}")
            differing = {}
            for key, digest in expected.items():
                _check(key in ssconf.KEYS, "unknown ssconf key %r" % (key,))
                local = _file_sha1(self.paths.ssconf(key))
                if digest is None or local != digest:
                    differing[key] = local
            result["ssconf"] = differing
        if "version" in checkdict:
            result["version"] = [wire.PROTOCOL_VERSION, GANETI_RELEASE]
        if "bridges" in checkdict:
            result["bridges"] = checks.missing_bridges(checkdict["bridges"], self.checks.sysfs_net)
        if "instancelist" in checkdict:
            try:
                result["instancelist"] = await self.instances.instance_list(checkdict["instancelist"], {})
            except RpcFailure as e:
                result["instancelist"] = "Error listing instances: %s" % (e,)
        if oob.NV_OOB_PATHS in checkdict:
            result[oob.NV_OOB_PATHS] = oob.verify_paths(checkdict[oob.NV_OOB_PATHS])
        if diskfiles.CHECK in checkdict:
            file_dir, shared_dir = self.instances.storage_dirs()
            result[diskfiles.CHECK] = diskfiles.verify_disk_files(
                self.paths.root, {"file": file_dir, "sharedfile": shared_dir}, checkdict[diskfiles.CHECK])
        if wire.NV_DATA_SPACE in checkdict:
            try:
                st = os.statvfs(self.paths.data_dir)
                result[wire.NV_DATA_SPACE] = {"path": self.paths.data_dir,
                                              "free": st.f_bavail * st.f_frsize // (1024 * 1024),
                                              "total": st.f_blocks * st.f_frsize // (1024 * 1024)}
            except OSError as e:
                result[wire.NV_DATA_SPACE] = {"path": self.paths.data_dir, "error": str(e)}
        if "cluster_name" in checkdict:
            try:
                result["cluster_name"] = ssconf.SimpleStore(self.paths).get_cluster_name()
            except errors.ConfigurationError:
                result["cluster_name"] = None
        return result

    async def _net_test(self, nodes: Any) -> dict[str, str]:
        _check(isinstance(nodes, list), "node list must be a list")
        known: dict[str, str] = {}
        targets = []
        for entry in nodes:
            if isinstance(entry, list) and len(entry) >= 2 and all(isinstance(e, str) for e in entry[:2]):
                targets.append((entry[0], entry[1]))
            elif isinstance(entry, str):
                if not known:
                    try:
                        known = ssconf.SimpleStore(self.paths).get_node_primary_ips()
                    except errors.ConfigurationError:
                        known = {}
                targets.append((entry, known.get(entry, entry)))
            else:
                raise RpcFailure("node entry must be a name or [name, ip, ...], not %.100r" % (entry,))
        outcomes = await defer.gatherResults([defer.ensureDeferred(self._reach(ip)) for _name, ip in targets])
        return {name: why for (name, _ip), why in zip(targets, outcomes) if why is not None}

    async def _reach(self, ip: str) -> str | None:
        try:
            family = socket.AF_INET6 if ":" in ip else socket.AF_INET
            socket.inet_pton(family, ip)
        except OSError:
            return "invalid address %r" % (ip,)
        cls = TCP6ClientEndpoint if family == socket.AF_INET6 else TCP4ClientEndpoint
        endpoint = cls(self._reactor, ip, self._port, timeout=NET_TEST_TIMEOUT)
        try:
            proto = cast(Protocol, await endpoint.connect(Factory.forProtocol(Protocol)))
        except Exception as e:
            return "TCP connection to %s:%d failed: %s" % (ip, self._port, e.__class__.__name__)
        cast(ITransport, proto.transport).loseConnection()  # connected
        return None

    # --- files -----------------------------------------------------------------------

    def _ownership(self, owner: Any, group: Any) -> tuple[int, int]:
        """uid/gid to set, or -1 to leave as is (unprivileged noded keeps its own)."""
        if os.geteuid() != 0:
            return -1, -1
        try:
            uid = pwd.getpwnam(owner).pw_uid if owner else -1
            gid = grp.getgrnam(group).gr_gid if group else -1
        except KeyError as e:
            raise RpcFailure("Unknown user or group: %s" % e) from None
        return uid, gid

    @handler(procedures.upload_file)
    def upload_file(self, details: list[Any]) -> defer.Deferred[None] | None:
        """Replace an allowed file atomically (C{FILE_DETAILS})."""
        _check(isinstance(details, list) and len(details) == 7,
               "upload_file takes [path, data, mode, owner, group, atime, mtime]")
        vpath, data, mode, owner, group, atime, mtime = details
        return self.upload_file_single(vpath, data, mode, owner, group, atime, mtime)

    @handler(procedures.upload_file_single)
    def upload_file_single(self, vpath: Any, data: Any, mode: Any, owner: Any, group: Any,
                           atime: Any, mtime: Any) -> defer.Deferred[None] | None:
        """config.data is written in a thread, in turn with C{config_delta}."""
        try:
            real = files.upload_file(self.paths, vpath)
        except files.PathRefused as e:
            raise RpcFailure("upload_file refused: %s" % e) from None
        _check(isinstance(mode, int) and not isinstance(mode, bool) and 0 <= mode <= 0o777,
               "file mode must be an integer between 0 and 0777")
        _check(owner is None or isinstance(owner, (str, int)), "owner must be a name")
        _check(group is None or isinstance(group, (str, int)), "group must be a name")
        times = [t for t in (atime, mtime) if t is not None]
        _check(all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in times), "times must be numbers")
        try:
            content = wire.decompress(data)
        except wire.RpcWireError as e:
            raise RpcFailure(str(e)) from None
        uid, gid = self._ownership(owner if isinstance(owner, str) else "", group if isinstance(group, str) else "")
        writer = master_epoch.request_epoch.get()

        def write() -> None:
            os.makedirs(os.path.dirname(real), exist_ok=True)
            serializer.write_file(real, content, mode=mode, uid=uid, gid=gid)
            if atime is not None and mtime is not None:
                os.utime(real, (atime, mtime))
            if real == self.paths.config_data and writer is not None:
                master_epoch.write_config_epoch(self.paths, writer)  # after the file: see there

        if real == self.paths.config_data:
            return self._blocking(lambda: self.config_follower.locked(write, content))
        write()
        return None

    @handler(procedures.config_delta)
    def config_delta(self, base: Any, records: Any) -> defer.Deferred[int]:
        """Bring config.data from serial C{base} forward by the master's change
        records (serials C{base+1..}); the serial this node holds then.
        Refused, changing nothing, when this node does not hold C{base}
        (the master then sends the whole file): L{configdelta}."""

        writer = master_epoch.request_epoch.get()

        def apply() -> int:
            try:
                serial = self.config_follower.apply(base, records)
            except DeltaRefused as e:
                raise RpcFailure("config_delta refused: %s" % e) from None
            if writer is not None:
                master_epoch.write_config_epoch(self.paths, writer)  # after the journal: see there
            return serial

        def journalled(serial: int) -> int:
            if self._rewrite_call is None:
                self._rewrite_call = self._reactor.callLater(REWRITE_DELAY, self._rewrite_config)
            return serial

        return self._blocking(apply).addCallback(journalled)

    def _rewrite_config(self) -> None:
        """config.data from the records journalled since it was last written."""
        self._rewrite_call = None
        d = self._blocking(self.config_follower.rewrite)
        d.addErrback(lambda f: self.log.failure("cannot rewrite config.data from its delta journal", f))

    @handler(procedures.write_ssconf_files)
    def write_ssconf_files(self, values: Any) -> None:
        _check(isinstance(values, dict), "write_ssconf_files takes {key: lines}")
        for key, value in values.items():
            _check(isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value)),
                   "ssconf value of %r must be text or a list of lines" % (key,))
        try:
            ssconf.write_files(self.paths, values)
        except errors.ConfigurationError as e:
            raise RpcFailure(str(e)) from None
        self.ssconf_written()

    @handler(procedures.ha_params_store)
    def ha_params_store(self, record: Any) -> defer.Deferred[list[Any]]:
        """Keep the master's HA parameters unless this node holds a newer
        version; C{[stored, the record this node holds now]} (a master
        that was behind learns the newer one)."""
        try:
            params = ha_params.HaParams.from_dict(record)
        except ha_params.HaParamsError as e:
            raise RpcFailure("ha_params_store: %s" % e) from None

        def store() -> list[Any]:
            stored = ha_params.accept(self.paths, params)
            return [stored, (params if stored else ha_params.read(self.paths)).to_dict()]

        return self._blocking(store)

    def _blocking(self, function: Callable[[], Any]) -> defer.Deferred[Any]:
        """Run C{function} (file writes with fsync) off the reactor thread when
        the reactor has a thread pool, so other requests are not held up."""
        get_pool = getattr(self._reactor, "getThreadPool", None)
        if get_pool is None:
            return defer.maybeDeferred(function)
        return threads.deferToThreadPool(self._reactor, get_pool(), function)

    def _queue_io(self, paths: list[str], function: Callable[[], Any]) -> defer.Deferred[Any]:
        """Run C{function} once every earlier write of C{paths} is done."""
        locks = [self._queue_locks.setdefault(path, defer.DeferredLock()) for path in sorted(set(paths))]

        async def run() -> Any:
            for lock in locks:
                await lock.acquire()
            try:
                return await self._blocking(function)
            finally:
                for path, lock in zip(sorted(set(paths)), locks):
                    lock.release()
                    if not lock.locked and not lock.waiting:
                        self._queue_locks.pop(path, None)

        return defer.ensureDeferred(run())

    @handler(procedures.jobqueue_update)
    def jobqueue_update(self, file_name: Any, content: Any) -> defer.Deferred[None]:
        try:
            real = files.queue_file(self.paths, file_name)
            data = wire.decompress(content)
        except (files.PathRefused, wire.RpcWireError) as e:
            raise RpcFailure("jobqueue_update refused: %s" % e) from None

        def write() -> None:
            os.makedirs(os.path.dirname(real), mode=0o700, exist_ok=True)
            serializer.write_file(real, data, mode=QUEUE_FILE_MODE)

        return self._queue_io([real], write)

    @handler(procedures.jobqueue_update_many)
    def jobqueue_update_many(self, entries: Any, durable: Any = True) -> defer.Deferred[None]:
        """Write several queue files C{[[virtual path, COMPRESS content], ...]}
        (ours): each replaced atomically (written, renamed: a crash of any
        process leaves the old or the new file); with C{durable} each is
        fsynced, then each directory once, before the answer.  Nothing is
        written when one entry is refused."""
        _check(isinstance(entries, list) and all(isinstance(e, list) and len(e) == 2 for e in entries),
               "jobqueue_update_many takes [[path, content], ...]")
        _check(isinstance(durable, bool), "jobqueue_update_many: durable must be true or false")
        writes: dict[str, bytes] = {}
        try:
            for file_name, content in entries:
                writes[files.queue_file(self.paths, file_name)] = wire.decompress(content)
        except (files.PathRefused, wire.RpcWireError) as e:
            raise RpcFailure("jobqueue_update_many refused: %s" % e) from None

        def write() -> None:
            directories = sorted({os.path.dirname(real) for real in writes})
            for directory in directories:
                os.makedirs(directory, mode=0o700, exist_ok=True)
            staged: list[tuple[str, int]] = []
            try:
                for real, data in writes.items():
                    staged.append(serializer.stage_file(real, data, mode=QUEUE_FILE_MODE))
                if durable:  # every file's data durable, side by side, before any replaces the old one
                    kernelsync.fsync_together([fd for _tmp, fd in staged])
            except BaseException:
                serializer.drop_staged(staged)
                raise
            for n, ((tmp, fd), real) in enumerate(zip(staged, writes)):
                try:
                    serializer.put_in_place(tmp, fd, real)
                except BaseException:
                    serializer.drop_staged(staged[n + 1:])
                    raise
            for directory in directories if durable else ():
                serializer.fsync_dir(directory)

        return self._queue_io(list(writes), write)

    @handler(procedures.jobqueue_rename)
    def jobqueue_rename(self, pairs: Any) -> defer.Deferred[list[str | None]]:
        _check(isinstance(pairs, list) and all(isinstance(p, list) and len(p) == 2 for p in pairs),
               "jobqueue_rename takes [[old, new], ...]")
        try:
            moves = [(files.queue_file(self.paths, old), files.queue_file(self.paths, new)) for old, new in pairs]
        except files.PathRefused as e:
            raise RpcFailure("jobqueue_rename refused: %s" % e) from None

        def rename() -> list[Any]:
            results: list[Any] = []
            for old, new in moves:
                try:
                    os.makedirs(os.path.dirname(new), mode=0o700, exist_ok=True)
                    os.rename(old, new)
                    results.append(None)
                except OSError as e:
                    results.append("Can't rename %s: %s" % (os.path.basename(old), e.strerror))
            serializer.fsync_dir(self.paths.queue_dir)
            return results

        return self._queue_io([path for move in moves for path in move], rename)

    @handler(procedures.jobqueue_purge)
    def jobqueue_purge(self) -> None:
        """Remove everything in the queue directory but its lock file."""
        queue = self.paths.queue_dir
        if not os.path.isdir(queue):
            return
        for name in os.listdir(queue):
            if name == "lock":
                continue
            path = os.path.join(queue, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        serializer.fsync_dir(queue)

    @handler(procedures.jobqueue_set_drain_flag)
    def jobqueue_set_drain_flag(self, flag: Any) -> defer.Deferred[None]:
        """Create (C{True}) or remove (C{False}) C{queue/drain}, durably."""
        _check(isinstance(flag, bool), "jobqueue_set_drain_flag takes true or false")
        real = os.path.join(self.paths.queue_dir, replicas.DRAIN)

        def write() -> None:
            if flag:
                os.makedirs(self.paths.queue_dir, mode=0o700, exist_ok=True)
                serializer.write_file(real, b"", mode=QUEUE_FILE_MODE)
                return
            try:
                os.unlink(real)
            except FileNotFoundError:
                return
            serializer.fsync_dir(self.paths.queue_dir)

        return self._queue_io([real], write)

    @handler(procedures.jobqueue_list)
    def jobqueue_list(self) -> defer.Deferred[dict[str, list[Any]]]:
        """What this node's queue holds (an extension of Ganeti's RPCs):
        C{{name relative to the queue dir: [sha1, job status or null]}}
        of the version, serial, drain, live and archived job files."""
        if self._queue_listing is None:
            self._queue_listing = replicas.ListingCache(self.paths.queue_dir)
        cache = self._queue_listing

        def listing() -> dict[str, list[Any]]:
            return {name: [entry.digest, entry.status] for name, entry in cache.entries().items()}

        return self._queue_io([self.paths.queue_dir], listing)

    @handler(procedures.jobqueue_remove)
    def jobqueue_remove(self, names: Any) -> defer.Deferred[None]:
        """Remove queue files the master no longer has (an extension of
        Ganeti's RPCs): C{[virtual path, ...]}; missing files are fine."""
        _check(isinstance(names, list), "jobqueue_remove takes [path, ...]")
        try:
            doomed = [files.queue_file(self.paths, name) for name in names]
        except files.PathRefused as e:
            raise RpcFailure("jobqueue_remove refused: %s" % e) from None
        for real in doomed:
            _check(replicas.is_replicated(os.path.relpath(real, self.paths.queue_dir)),
                   "jobqueue_remove refused: %s is not a job queue file" % real)

        def remove() -> None:
            directories = set()
            for real in doomed:
                try:
                    os.unlink(real)
                except FileNotFoundError:
                    continue
                directories.add(os.path.dirname(real))
            for directory in sorted(directories):
                serializer.fsync_dir(directory)

        return self._queue_io(doomed, remove)

    @handler(procedures.node_leave_cluster)
    def node_leave_cluster(self, modify_ssh_setup: Any = False) -> defer.Deferred[None] | None:
        """Forget the cluster (config, ssconf, queue, secrets), stop RAPI, confd and MonD, then stop noded."""
        data = self.paths.data_dir
        doomed = [self.config_follower.journal, self.paths.config_data, self.paths.hmac_key, self.paths.rapi_pem,
                  self.paths.cluster_domain_secret, self.paths.server_pem, self.paths.client_pem]
        doomed += [os.path.join(data, n) for n in ("spice.pem", "spice-ca.pem", "known_hosts", "cluster-trust.pem",
                                                   "hmac.key.accept")]
        doomed += [self.paths.ssconf(key) for key in ssconf.KEYS]
        self.jobqueue_purge()
        for path in doomed:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self.log.info("node left the cluster; noded stops")
        if self._shutdown is not None:
            self._reactor.callLater(0.2, self._shutdown)
        # as Ganeti's LeaveCluster: the node's confd and MonD stop too (RAPI runs only on master
        # candidates); the answer waits for them to stop
        running = [name for name in LEFT_CLUSTER_STOPS
                   if daemons.running_pid(self.paths, daemons.BY_NAME[name]) is not None]
        if not running:
            return None
        stopped: defer.Deferred[None] = self.master.stop_daemons(running).addCallback(lambda _lines: None)
        return stopped

    @handler(procedures.test_delay)
    def test_delay(self, duration: Any) -> defer.Deferred[None]:
        _check(isinstance(duration, (int, float)) and not isinstance(duration, bool) and 0 <= duration <= MAX_DELAY,
               "test_delay takes a duration between 0 and %d seconds" % MAX_DELAY)
        return task.deferLater(self._reactor, duration, lambda: None)
