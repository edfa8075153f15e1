"""Node procedures of a master failover (Ganeti's names, and two of ours).

Ganeti's: C{node_stop_master} (stops LuxiD and WConfD on this node; RAPI
stays, or starts again: on a candidate it forwards to the new master),
C{node_start_master_daemons(no_voting)} (starts WConfD, RAPI when this node
has RAPI's certificate, and LuxiD), C{node_activate_master_ip} and
C{node_deactivate_master_ip} (C{ip address add/del} of the master IP on
C{master_netdev}; nothing when the cluster has no netdev, C{"none"} or
C{""}).

Node roles: C{node_demote_from_mc} (Ganeti's name: refused on the master
and while WConfD or LuxiD run here; stops RAPI and confd, which run on
master candidates only; C{config.data} stays, read by this node's MonD)
and C{node_promote_to_mc} (ours: starts confd and RAPI here; RAPI forwards
to the master's).  The node LUs call them once the configuration holds the new role.

Ours, used by C{gnt-cluster master-failover}: C{epoch_claim(epoch, node)}
(fencing: a new epoch for the node taking over, given once per epoch),
C{failover_status} (this node's master epoch, config serial and job queue
serial) and C{failover_read} (the content of this node's C{config.data}
and job queue files, nothing else).
"""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
from typing import Any, Callable, TypeVar

from twisted.internet import defer, threads
from twisted.internet.interfaces import IReactorThreads
from twisted.logger import Logger

from ganeti import daemons, errors, serializer
from ganeti.ha import params as ha_params
from ganeti.ha.epoch import EpochGuard, StaleEpoch, read_config_epoch
from ganeti.jobs import replicas
from ganeti.jobs.orphans import JOB_LOCK_RE, kill_job_process
from ganeti.noded.dispatch import handler
from ganeti.noded.failure import RpcFailure
from ganeti.paths import Paths
from ganeti.rpc import procedures, wire

#: The master daemons, in Ganeti's start order.
MASTER_DAEMONS = ("ganeti-wconfd", "ganeti-rapi", "ganeti-luxid")
#: Seconds a master daemon may take to start or stop.
DAEMON_TIMEOUT = 30.0
#: Files C{failover_read} hands out at most, per call.
MAX_READ = 5000

_NETDEV_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")
#: What C{ip address add} says when the address is there already (kernels differ).
_ALREADY_UP = re.compile(r"File exists|already assigned")
#: What C{ip address del} says when the address is not there (kernels differ).
_ALREADY_DOWN = re.compile(r"Cannot assign|not found")

_T = TypeVar("_T")

def stop_job_processes(paths: Paths, out: Callable[[str], object] = lambda _line: None,
                       kill: Callable[[int, int], None] = kill_job_process) -> list[int]:
    """Kill the job processes still running here (C{node_stop_master}):
    the new master has ended their jobs in error ("master failover"), so
    they must not go on, nor record another ending here.  A job process is
    found by its lock file (C{lock_dir/job_<id>_<ns>}), held by the process
    its job file names; one that leads a session (forked by LuxiD's fork
    server) is killed with its children.  Returns the job ids whose process
    was killed."""
    import signal

    from ganeti import lockfile

    killed = []
    try:
        names = sorted(os.listdir(paths.lock_dir))
    except OSError:
        return []
    for name in names:
        match = JOB_LOCK_RE.match(name)
        if match is None:
            continue
        job_id, path = int(match.group(1)), os.path.join(paths.lock_dir, name)
        try:
            job = serializer.read_json(os.path.join(paths.queue_dir, "job-%d" % job_id))
        except (OSError, ValueError):
            continue
        pid = job.get("process_id") if isinstance(job, dict) else None
        livelock = job.get("livelock") if isinstance(job, dict) else None
        if (not isinstance(pid, int) or pid <= 1 or not isinstance(livelock, str) or os.path.basename(livelock) != name
                or not lockfile.holds_lock(path, pid)):
            continue
        try:
            kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        killed.append(job_id)
        out("job %d: its process (pid %d) killed: the job ended in error on the new master" % (job_id, pid))
    return killed


def no_netdev(netdev: Any) -> bool:
    """Whether the cluster has no master network device to manage."""
    return netdev in (None, "", "none")


def master_ip_command(action: str, params: Any) -> list[str] | None:
    """The C{ip address} command adding or removing the master IP (pure).

    @param action: C{"add"} or C{"del"}
    @param params: Ganeti's master network parameters (C{ip}, C{netmask}, C{netdev})
    @return: the argv, or C{None} when there is no netdev to manage
    @raise RpcFailure: bad parameters
    """
    if not isinstance(params, dict):
        raise RpcFailure("master network parameters must be a dict")
    netdev = params.get("netdev")
    if no_netdev(netdev):
        return None
    if not isinstance(netdev, str) or not _NETDEV_RE.match(netdev):
        raise RpcFailure("invalid master network device %r" % (netdev,))
    try:
        address = ipaddress.ip_address(params.get("ip") or "")
    except ValueError:
        raise RpcFailure("invalid master IP %r" % (params.get("ip"),)) from None
    netmask = params.get("netmask")
    limit = 32 if address.version == 4 else 128
    if not isinstance(netmask, int) or isinstance(netmask, bool) or not 0 < netmask <= limit:
        raise RpcFailure("invalid master netmask %r" % (netmask,))
    argv = ["ip", "address", action, "%s/%d" % (address, netmask), "dev", netdev]
    if action == "add" and address.version == 4:
        argv += ["label", "%s:0" % netdev]
    return argv


class MasterProcedures:
    """The failover procedures of one node root.

    @param paths: the node's root
    @param reactor: runs the blocking parts in its thread pool
    @param epoch: the node's epoch record (reported by C{failover_status})
    @param port: the noded port of the cluster (the master daemons' C{--rpc-port})
    """

    log = Logger()

    def __init__(self, paths: Paths, reactor: IReactorThreads, epoch: EpochGuard, port: int = wire.DEFAULT_PORT) -> None:
        self.paths = paths
        self._reactor = reactor
        self._epoch = epoch
        self._port = port
        #: writes config deltas this node journalled into config.data (set by NodeProcedures)
        self.flush_config: Callable[[], None] = lambda: None
        #: runs the master IP's local hooks (L{ganeti.noded.hooks.HooksRunner}; set by NodeProcedures)
        self.hooks: Any = None
        self._listing = replicas.ListingCache(paths.queue_dir)

    def _in_thread(self, function: Callable[..., _T], *args: Any) -> defer.Deferred[_T]:
        return threads.deferToThreadPool(self._reactor, self._reactor.getThreadPool(), function, *args)

    # --- the master daemons ------------------------------------------------------------

    @handler(procedures.node_stop_master)
    def node_stop_master(self) -> defer.Deferred[list[str]]:
        """Stop LuxiD and WConfD here (those not running are fine); RAPI
        keeps running, or starts again if it is not (this node has its
        certificate), and forwards to the new master.  A RAPI that does not
        start is reported in the answer, not as a failure: the master role
        is stopped."""
        lines: list[str] = []

        def stop() -> list[str]:
            daemons.stop(self.paths, ["ganeti-luxid", "ganeti-wconfd"], timeout=DAEMON_TIMEOUT, out=lines.append)
            stop_job_processes(self.paths, out=lines.append)
            if os.path.exists(self.paths.rapi_pem):
                daemons.start(self.paths, ["ganeti-rapi"], timeout=DAEMON_TIMEOUT, out=lines.append,
                              options=self._rapi_options())
            return lines

        return self._in_thread(stop)

    @handler(procedures.node_start_master_daemons)
    def node_start_master_daemons(self, no_voting: Any) -> defer.Deferred[list[str]]:
        """Start WConfD, RAPI (if this node has its certificate) and LuxiD here, at once."""
        if not isinstance(no_voting, bool):
            raise RpcFailure("no_voting must be a boolean")
        rapi = daemons.BY_NAME["ganeti-rapi"]
        # RAPI may run already (on a candidate it forwarded to the old master): it serves here now
        names = [name for name in MASTER_DAEMONS if name != rapi.name
                 or (os.path.exists(self.paths.rapi_pem) and daemons.running_pid(self.paths, rapi) is None)]
        rpc = ["--rpc-port", str(self._port)] + (["--no-voting", "--yes-do-it"] if no_voting else [])
        options = {"ganeti-wconfd": rpc, "ganeti-luxid": rpc, **self._rapi_options()}
        lines: list[str] = []

        def start(name: str) -> int:
            self.flush_config()  # WConfD starts from every change this node acknowledged
            return daemons.start(self.paths, [name], timeout=DAEMON_TIMEOUT, out=lines.append, options=options)

        def started(codes: list[int]) -> list[str]:
            if any(code != daemons.EXIT_OK for code in codes):
                raise RpcFailure("starting the master daemons failed: %s" % "; ".join(lines))
            return lines

        # at once, not one after the other: LuxiD accepts jobs before WConfD is up (it connects when it is),
        # which shortens a failover by the start of a daemon
        return defer.gatherResults([self._in_thread(start, name) for name in names],
                                   consumeErrors=True).addCallback(started)

    @handler(procedures.master_failover)
    def master_failover(self, no_voting: Any) -> defer.Deferred[list[list[str]]]:
        """The take-over steps of C{gnt-cluster master-failover} on this node,
        for the command on this node: it pays neither for their imports nor
        for its own node RPC client (L{ganeti.client.cluster_master})."""
        import time

        asked = time.time()
        from ganeti.ha import takeover
        from ganeti.ha.failover import FailoverRefused, check_candidate

        if not isinstance(no_voting, bool):
            raise RpcFailure("no_voting must be a boolean")
        said: list[list[str]] = []
        log = self.log

        class Collected:
            """The command's lines, also logged here (with the time of each step)."""

            def step(self, text: str) -> None:
                said.append(["step", text])
                log.info("master-failover: {text}", text=text)

            def warn(self, text: str) -> None:
                said.append(["warn", text])
                log.warn("master-failover: {text}", text=text)

            def fail(self, text: str) -> None:
                said.append(["fail", text])
                log.error("master-failover: {text}", text=text)

        try:
            view = takeover.view_of(self.paths, self._port)
            check_candidate(view.me, view.master, view.candidates)
        except FailoverRefused as e:
            return defer.succeed([["fail", "Failure: prerequisites not met for this operation:\n%s" % e],
                                  ["done", "no"]])
        except (errors.GenericError, SystemExit, OSError, KeyError) as e:
            raise RpcFailure("master_failover: this node's view of the cluster: %s" % (e,)) from None
        self.log.info("master-failover to this node asked (no_voting={no_voting}) at {asked:.3f}, view read in"
                      " {view:.2f}s", no_voting=no_voting, asked=asked, view=time.time() - asked)
        d = defer.Deferred.fromCoroutine(takeover.failover(self._reactor, Collected(), view, no_voting))
        return d.addCallback(lambda done: said + [["done", "yes" if done else "no"]])

    # --- node roles: RAPI runs on every master candidate -----------------------------------

    @handler(procedures.node_demote_from_mc)
    def node_demote_from_mc(self) -> defer.Deferred[list[str]]:
        """Stop RAPI and confd here: this node is no longer a master candidate.

        @raise RpcFailure: ssconf names this node master, or WConfD or LuxiD run here
        """
        if daemons.is_master(self.paths):
            raise RpcFailure("ssconf status shows I'm the master node, will not demote")
        running = [name for name in ("ganeti-wconfd", "ganeti-luxid")
                   if daemons.running_pid(self.paths, daemons.BY_NAME[name]) is not None]
        if running:
            raise RpcFailure("%s running here, will not demote" % " and ".join(running))
        return self.stop_daemons(["ganeti-rapi", "ganeti-confd"])

    def stop_rapi(self) -> defer.Deferred[list[str]]:
        """Stop RAPI here, if it runs (in the thread pool): what it said."""
        return self.stop_daemons(["ganeti-rapi"])

    def stop_daemons(self, names: list[str]) -> defer.Deferred[list[str]]:
        """Stop the daemons C{names} here, those running, in that order (in the thread pool): what they said."""
        lines: list[str] = []

        def stop() -> list[str]:
            daemons.stop(self.paths, names, timeout=DAEMON_TIMEOUT, out=lines.append)
            return lines

        return self._in_thread(stop)

    def _rapi_options(self) -> dict[str, list[str]]:
        """RAPI learns the node daemons' port (its web console pushes logouts to the candidates)."""
        return {"ganeti-rapi": ["--rpc-port", str(self._port)]}

    @handler(procedures.node_promote_to_mc)
    def node_promote_to_mc(self) -> defer.Deferred[list[str]]:
        """Start confd and RAPI here (RAPI forwards to the master's): this
        node is now a master candidate.  Running already is fine.

        @raise RpcFailure: no RAPI certificate here, or RAPI does not start
        """
        if not os.path.exists(self.paths.rapi_pem):
            raise RpcFailure("no RAPI certificate at %s; cannot start ganeti-rapi" % self.paths.rapi_pem)
        lines: list[str] = []

        def start() -> list[str]:
            code = daemons.start(self.paths, ["ganeti-confd", "ganeti-rapi"], timeout=DAEMON_TIMEOUT,
                                 out=lines.append, options=self._rapi_options())
            if code != daemons.EXIT_OK:
                raise RpcFailure("starting ganeti-confd and ganeti-rapi failed: %s" % "; ".join(lines))
            return lines

        return self._in_thread(start)

    # --- the master IP -----------------------------------------------------------------

    def _master_ip(self, action: str, params: Any, use_external_mip_script: Any) -> defer.Deferred[None] | None:
        if use_external_mip_script:
            raise RpcFailure("an external master IP script is not supported")
        argv = master_ip_command(action, params)
        if argv is None:
            return None

        def run() -> None:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            if done.returncode != 0 and not (action == "add" and _ALREADY_UP.search(done.stderr)) \
                    and not (action == "del" and _ALREADY_DOWN.search(done.stderr)):
                raise RpcFailure("%s failed: %s" % (" ".join(argv), done.stderr.strip() or done.returncode))

        return self._in_thread(run)

    async def _master_ip_hooked(self, action: str, params: Any, use_external_mip_script: Any) -> None:
        """L{_master_ip} inside the hooks Ganeti runs around it (C{master-ip-turnup}/C{-turndown})."""
        master_ip_command(action, params)  # refuses bad parameters before any hook runs
        if self.hooks is None:
            await defer.maybeDeferred(self._master_ip, action, params, use_external_mip_script)
            return
        try:
            version = ipaddress.ip_address(params.get("ip") or "").version
        except ValueError:
            version = 4
        variables = {"MASTER_NETDEV": params.get("netdev"), "MASTER_IP": params.get("ip"),
                     "MASTER_NETMASK": str(params.get("netmask")), "CLUSTER_IP_VERSION": str(version)}
        op_id, hpath = ("OP_CLUSTER_IP_TURNUP", "master-ip-turnup") if action == "add" else (
            "OP_CLUSTER_IP_TURNDOWN", "master-ip-turndown")
        await self.hooks.run_local(op_id, hpath, variables,
                                   lambda: self._master_ip(action, params, use_external_mip_script))

    @handler(procedures.node_activate_master_ip)
    async def node_activate_master_ip(self, master_params: Any, use_external_mip_script: Any) -> None:
        await self._master_ip_hooked("add", master_params, use_external_mip_script)

    @handler(procedures.node_deactivate_master_ip)
    async def node_deactivate_master_ip(self, master_params: Any, use_external_mip_script: Any) -> None:
        await self._master_ip_hooked("del", master_params, use_external_mip_script)

    @handler(procedures.epoch_claim)
    def epoch_claim(self, epoch: Any, holder: Any) -> int:
        """Record C{epoch} for the new master C{holder} (once per epoch)."""
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
            raise RpcFailure("epoch must be a non-negative integer")
        if not isinstance(holder, str) or not holder or len(holder) > 255 or any(c.isspace() for c in holder):
            raise RpcFailure("holder must be a node name")
        try:
            self._epoch.claim(epoch, holder)
        except StaleEpoch as e:
            holder_note = "" if self._epoch.holder is None else " (claimed by %s)" % self._epoch.holder
            raise RpcFailure("%s%s" % (e, holder_note)) from e
        return epoch

    # --- state for the newest-state-first check -----------------------------------------

    @handler(procedures.failover_status)
    def failover_status(self) -> Any:
        """C{{"epoch", "config_serial", "config_epoch", "queue_serial", "jobs",
        "ha_epoch", "ha_serial"}} of this node: C{config_epoch} is the epoch of
        the master that wrote its config.data (L{ganeti.ha.epoch.read_config_epoch}),
        C{jobs} maps live job file names to their status, C{ha_*} rank its
        HA parameters (L{ganeti.ha.params.HaParams.rank})."""

        def status() -> dict[str, Any]:
            self.flush_config()
            try:
                config_serial = serializer.loads(serializer.read_file(self.paths.config_data)).get("serial_no")
            except (OSError, ValueError, AttributeError):
                config_serial = None
            try:
                queue_serial = int(serializer.read_file(os.path.join(self.paths.queue_dir, "serial")).strip() or 0)
            except (OSError, ValueError):
                queue_serial = None
            jobs = {}
            if os.path.isdir(self.paths.queue_dir):
                # kept between calls: only the job files changed since are read again (a failover asks
                # twice, and a long queue takes seconds to read under load)
                for name, entry in self._listing.entries().items():
                    if replicas.job_id_of(name) is not None and not replicas.is_archived(name):
                        jobs[name] = entry.status
            ha_epoch, ha_serial = ha_params.read(self.paths).rank()
            return {"epoch": self._epoch.highest, "config_serial": config_serial,
                    "config_epoch": read_config_epoch(self.paths), "queue_serial": queue_serial, "jobs": jobs,
                    "ha_epoch": ha_epoch, "ha_serial": ha_serial}

        return self._in_thread(status)

    @handler(procedures.failover_read)
    def failover_read(self, names: Any) -> Any:
        """C{{name: compressed content or null}} of C{"config.data"}, C{"ha.data"}
        and job queue files (names relative to the queue directory)."""
        if not (isinstance(names, list) and len(names) <= MAX_READ and all(isinstance(n, str) for n in names)):
            raise RpcFailure("failover_read takes a list of at most %d names" % MAX_READ)
        real: dict[str, str] = {}
        for name in names:
            if name == "config.data":
                real[name] = self.paths.config_data
            elif name == ha_params.FILE_NAME:
                real[name] = ha_params.params_path(self.paths)
            elif replicas.is_replicated(name):
                real[name] = os.path.join(self.paths.queue_dir, name)
            else:
                raise RpcFailure("failover_read refused: %r is neither config.data, ha.data nor a job queue file" % (name,))

        def read() -> dict[str, Any]:
            self.flush_config()
            found: dict[str, Any] = {}
            for name, path in real.items():
                try:
                    found[name] = wire.compress(serializer.read_file(path))
                except FileNotFoundError:
                    found[name] = None
            return found

        return self._in_thread(read)
