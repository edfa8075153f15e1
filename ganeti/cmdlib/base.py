"""The logical-unit framework: one class per opcode, run by the processor.

The processor (L{ganeti.jobs.processor.Processor}) drives a logical unit
(LU) through these steps, in this order:

  1. C{lu = LUClass(op, ctx, cfg)} with C{op} the typed opcode (a frozen
     class of L{ganeti.opcodes.typed}, built from the validated opcode dict)
     and C{cfg} a config snapshot read before any lock is taken;
  2. L{LogicalUnit.check_arguments}: checks of the opcode alone, then
     C{await} L{LogicalUnit.resolve}: name lookups and address probes;
  3. L{LogicalUnit.expand_names}: resolve names to UUIDs and fill
     L{LogicalUnit.needed_locks} (C{level -> [member, ...]} or L{ALL_SET}),
     L{LogicalUnit.share_locks} (C{level -> True} for shared),
     L{LogicalUnit.add_locks} (C{level -> [member, ...]} for entities the LU
     creates) and L{LogicalUnit.opportunistic_locks}; then
     C{await lu.probe()}, which may ask the nodes before any lock is taken;
  4. the BGL (exclusive if C{REQ_BGL}, shared otherwise, none if
     L{LogicalUnit.uses_bgl} says so), then level by level in lock order:
     L{LogicalUnit.declare_locks} (only for levels present in
     C{needed_locks} or C{add_locks}; C{self.cfg} is re-read first when
     locks were taken since the last read), then that level's locks;
  5. C{self.cfg} is re-read (it now reflects what the locks protect), and
     L{LogicalUnit.check_prereq} runs: raise L{errors.OpPrereqError} with
     an C{ECODE_*} when the operation cannot be done;
  6. the pre hooks (an LU with C{HPATH}: L{ganeti.cmdlib.hooks}), then
     unless C{dry_run}: C{await lu.exec_(feedback)}; its return value is the
     opcode result (JSON-able); raise L{errors.OpExecError} on failure;
     then the post hooks, and the C{config-update} hooks if it wrote the config;
  7. every lock is released, whatever happened.

Changes go through WConfD: L{LogicalUnit.update}, L{LogicalUnit.add},
L{LogicalUnit.remove} and L{LogicalUnit.modify} (read-change-write that
retries when somebody else changed the object first).  WConfD insists that
the LU holds the entity's lock exclusively (the BGL, shared, for the
cluster object).
"""

from __future__ import annotations

import inspect
from typing import Any, Awaitable, Callable, ClassVar, Generic, Iterable, TypeVar, get_args, get_origin

import attrs
from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.internet.task import deferLater

from ganeti import errors, ports
from ganeti.asyncutil import Network
from ganeti.jobs import lifecycle
from ganeti.locking.names import (
    LEVEL_CLUSTER,
    LEVEL_INSTANCE,
    LEVEL_NETWORK,
    LEVEL_NODE,
    LEVEL_NODE_ALLOC,
    LEVEL_NODE_RES,
    LEVEL_NODEGROUP,
    LEVELS,
    group_lock,
)
from ganeti.objects import KINDS, ConfigData, ConfigObject, Disk, Node
from ganeti.opcodes.typed import OpCode

__all__ = [
    "ALL_SET",
    "LEVELS",
    "LEVEL_CLUSTER",
    "LEVEL_INSTANCE",
    "LEVEL_NETWORK",
    "LEVEL_NODE",
    "LEVEL_NODEGROUP",
    "LEVEL_NODE_ALLOC",
    "LEVEL_NODE_RES",
    "LogicalUnit",
    "OpContext",
    "REGISTRY",
    "register",
]


class _AllSet:
    """Marker for "every lock of the level" (the level's group lock)."""

    def __repr__(self) -> str:
        return "ALL_SET"


#: Use as C{needed_locks[level]} to lock a whole level.
ALL_SET: Any = _AllSet()

#: Attempts of L{LogicalUnit.modify} when the object keeps changing under it.
MODIFY_ATTEMPTS = 5

#: The opcode class of an LU (covariant: C{LogicalUnit[OpInstanceStartup]}
#: is a C{LogicalUnit[OpCode]}, what the processor runs).
OpT = TypeVar("OpT", bound=OpCode, covariant=True)

#: OP_ID -> LU class, filled by L{register}.
REGISTRY: dict[str, type[LogicalUnit[OpCode]]] = {}

_LU = TypeVar("_LU", bound="type[LogicalUnit[OpCode]]")


def op_class(cls: type[LogicalUnit[OpCode]]) -> type[OpCode] | None:
    """The opcode class C{cls} is generic over (C{LogicalUnit[OpX]}), if it says."""
    for klass in cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            origin = get_origin(base)
            args = get_args(base)
            if isinstance(origin, type) and issubclass(origin, LogicalUnit) and args:
                if isinstance(args[0], type) and issubclass(args[0], OpCode):
                    return args[0]
    return None


def register(cls: _LU) -> _LU:
    """Class decorator: make C{cls} the LU for its C{OP_ID}, which must be
    that of the opcode class it is generic over (C{LogicalUnit[OpX]}); an LU
    that does not set C{OP_ID} gets that one."""
    declared = op_class(cls)
    if not cls.OP_ID and declared is not None:
        cls.OP_ID = declared.OP_ID
    if not cls.OP_ID:
        raise errors.ProgrammerError("%s has no OP_ID" % cls.__name__)
    if declared is not None and declared.OP_ID != cls.OP_ID:
        raise errors.ProgrammerError("%s runs %s but reads %s" % (cls.__name__, cls.OP_ID, declared.__name__))
    if cls.OP_ID in REGISTRY and REGISTRY[cls.OP_ID] is not cls:
        raise errors.ProgrammerError("%s already has the LU %s" % (cls.OP_ID, REGISTRY[cls.OP_ID].__name__))
    REGISTRY[cls.OP_ID] = cls
    return cls


Feedback = Callable[..., Any]


#: the node RPC client of this process (a job process's opcodes share its connections): L{process_rpc}
_PROCESS_RPC: dict[tuple[str, int], Any] = {}


def process_rpc(clock: Any, paths: Any, port: int) -> Any:
    """This process's node RPC client for C{paths} and C{port}, made on first use and kept (with the
    connections its pool keeps) until L{close_process_rpc}: the opcodes of a job, and a spare job process
    before its job (L{ganeti.jobs.spare}: its first call to its own node), share it.  A NodeD restarting
    (connection refused) costs a call a pause, not its end."""
    key = (paths.data_dir, port)
    client = _PROCESS_RPC.get(key)
    if client is None:
        from ganeti.rpc import RpcClient, wire

        client = RpcClient.from_paths(clock, paths, port=port, retry_window=wire.RETRY_WINDOW)
        _PROCESS_RPC[key] = client
    return client


async def close_process_rpc() -> None:
    """Close the clients of L{process_rpc} (the end of a job process)."""
    clients = list(_PROCESS_RPC.values())
    _PROCESS_RPC.clear()
    for client in clients:
        await client.close()


class OpContext:
    """What an LU gets from the job process.

    @ivar wconfd: the L{ganeti.wconfd.client.WConfdClient}.
    @ivar owner: the job's lock owner.
    @ivar clock: an C{IReactorTime} (sleeps and timestamps).
    @ivar job_id: the job's id (C{None} outside a job).
    @ivar paths: the master's L{ganeti.paths.Paths} (C{None} in tests).
    @ivar net: a L{ganeti.asyncutil.Network}: name resolution, port probes
        and external programs that never block the reactor (default: one
        on C{clock}).
    @param rpc_port: the node daemons' port (LuxiD's C{--rpc-port}, handed
        to the job process); default: Ganeti's.
    """

    def __init__(
        self,
        wconfd: Any,
        owner: Any,
        clock: Any,
        feedback: Callable[[Any, str], Awaitable[None] | None] | None = None,
        job_id: int | None = None,
        paths: Any = None,
        rpc_factory: Callable[[], Any] | None = None,
        net: Any = None,
        rpc_port: int | None = None,
    ) -> None:
        self.wconfd = wconfd
        self._rpc_port = rpc_port
        self.net = net if net is not None else Network(clock)
        self.owner = owner
        self.clock = clock
        self.job_id = job_id
        self.paths = paths
        self._feedback = feedback
        self._rpc_factory = rpc_factory
        self._rpc: Any = None

    @property
    def rpc_port(self) -> int:
        """The port of every node daemon of the cluster."""
        return ports.NODED if self._rpc_port is None else self._rpc_port

    def rpc(self) -> Any:
        """The node RPC client (L{ganeti.rpc.RpcClient}), created on first use.

        It talks to the node daemons on L{rpc_port}; without C{paths} (and
        no C{rpc_factory}) there is none: L{errors.OpExecError}.
        """
        if self._rpc is None:
            if self._rpc_factory is not None:
                self._rpc = self._rpc_factory()
            elif self.paths is not None:
                from ganeti.cmdlib.liveness_verify import NotingRpc, roster_of

                paths = self.paths
                client = process_rpc(self.clock, paths, self.rpc_port)
                self._rpc = NotingRpc(client,
                                      lambda names: roster_of(self.clock, paths, names),
                                      self.feedback, self.clock)
            else:
                raise errors.OpExecError("No node RPC available in this context")
        return self._rpc

    async def close(self) -> None:
        """Close the RPC client if one was made (not the process's own: L{process_rpc})."""
        rpc, self._rpc = self._rpc, None
        if rpc is not None and self._rpc_factory is not None and hasattr(rpc, "close"):
            await rpc.close()

    def feedback(self, message: Any, kind: str = lifecycle.ELOG_MESSAGE) -> Any:
        """Add C{message} to the opcode's log.

        The job file gets the entry at the next turn of the reactor (with
        other entries made meanwhile); the Deferred returned fires when the
        entry is logged, which in a job is at once.  Awaiting it is optional.
        """
        if self._feedback is None:
            return succeed(None)
        result = self._feedback(message, kind)
        if isinstance(result, Deferred):
            return result
        if inspect.isawaitable(result):
            return ensureDeferred(_awaited(result))
        return succeed(result)

    def sleep(self, seconds: float) -> Any:
        """A Deferred that fires after C{seconds} on the context's clock."""
        return deferLater(self.clock, max(0.0, float(seconds)), lambda: None)


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


class LogicalUnit(Generic[OpT]):
    """Base of every LU.  Subclass for one opcode class, set C{OP_ID},
    decorate with L{register}::

        @register
        class LUInstanceStartup(LogicalUnit[OpInstanceStartup]):
            OP_ID = "OP_INSTANCE_STARTUP"
            ...
                self.op.instance_name        # mypy checks the field
                self.op = attrs.evolve(self.op, instance_uuid=inst.uuid)

    @cvar OP_ID: the opcode this LU runs.
    @cvar REQ_BGL: take the BGL exclusively (default); False: shared.
    @cvar HPATH: the hooks path (C{"instance-add"}; C{None}: no hooks, as a
        Ganeti C{NoHooksLU}); with it C{HTYPE} (C{"INSTANCE"}, ...) and
        L{build_hooks_env} and L{build_hooks_nodes}.
    @ivar op: the typed opcode (defaults filled in); frozen: an LU keeps
        names it resolves with C{attrs.evolve}.
    @ivar cfg: a L{ConfigData} snapshot (see the module docstring for when it
        is refreshed).
    @ivar ctx: the L{OpContext}.
    @ivar needed_locks: C{level -> [member, ...] | ALL_SET}.
    @ivar share_locks: C{level -> bool} (True: shared); default exclusive.
    @ivar add_locks: C{level -> [member, ...]}: new locks to create and hold.
    @ivar opportunistic_locks: C{level -> True}: take of that level's
        C{needed_locks} only those free (waiting, pushed by WConfD, until at
        least C{opportunistic_locks_count[level]} (default 1) are); what was
        got is in C{acquired[level]}.
    @ivar opportunistic_locks_count: C{level -> int}, see above.
    @ivar dry_run_result: the result of a C{dry_run} opcode.
    """

    OP_ID: ClassVar[str | None] = None
    REQ_BGL: ClassVar[bool] = True
    HPATH: ClassVar[str | None] = None
    HTYPE: ClassVar[str | None] = None

    def __init__(self, op: OpT, ctx: OpContext, cfg: ConfigData | None = None) -> None:
        self.op: OpT = op
        self.ctx = ctx
        self.cfg: ConfigData = cfg if cfg is not None else ConfigData()
        self.needed_locks: dict[str, Any] = {}
        self.share_locks: dict[str, bool] = {}
        self.add_locks: dict[str, list[str]] = {}
        self.opportunistic_locks: dict[str, bool] = {}
        self.opportunistic_locks_count: dict[str, int] = {}
        self.dry_run_result: Any = None
        #: level -> member names held (or ALL_SET); kept by the processor
        self.acquired: dict[str, Any] = {}

    # --- hooks (override) ------------------------------------------------
    def uses_bgl(self) -> bool:
        """Whether to take the BGL at all (mode from C{REQ_BGL})."""
        return True

    def check_arguments(self) -> None:
        """Checks that need nothing but the opcode."""

    async def resolve(self) -> None:
        """After L{check_arguments}, before L{expand_names}: look names up
        and probe addresses, through C{self.ctx.net} (never blocking the
        job's reactor).  Runs again on every locking attempt."""

    def expand_names(self) -> None:
        """Resolve names; fill C{needed_locks}, C{share_locks}, C{add_locks}."""

    async def probe(self) -> None:
        """After L{expand_names}, before any lock: ask the nodes what the lock
        declarations depend on (e.g. which nodes have room); may narrow
        C{needed_locks}.  Runs again on every locking attempt."""

    def declare_locks(self, level: str) -> None:
        """Compute the locks of C{level} from the locks held so far."""

    def check_prereq(self) -> None:
        """Check that the operation can be done; raise L{errors.OpPrereqError}."""

    async def exec_(self, feedback: Feedback) -> Any:
        """Do it; return the opcode result."""
        raise NotImplementedError("%s does not implement exec_" % type(self).__name__)

    # --- LU hooks (Ganeti's BuildHooksEnv, BuildHooksNodes, PreparePostHookNodes) ---
    def build_hooks_env(self) -> dict[str, Any]:
        """The hooks' variables, without the C{GANETI_} prefix (after
        C{check_prereq}; again after C{exec_} for the post phase)."""
        raise NotImplementedError("%s has HPATH but no build_hooks_env" % type(self).__name__)

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        """C{(node UUIDs of the pre phase, node UUIDs of the post phase)}."""
        raise NotImplementedError("%s has HPATH but no build_hooks_nodes" % type(self).__name__)

    def prepare_post_hook_nodes(self, nodes: list[str]) -> list[str]:
        """The post phase's nodes, just before it runs (default: C{nodes})."""
        return nodes

    # --- lock helpers ------------------------------------------------------
    def share_all(self) -> None:
        """Take every lock of this LU in shared mode."""
        self.share_locks = {level: True for level in LEVELS}

    def owned_locks(self, level: str) -> frozenset[str]:
        """The members of C{level} this LU holds (every member for ALL_SET)."""
        held = self.acquired.get(level)
        if held is None:
            return frozenset()
        if held is ALL_SET:
            return frozenset(level_members(self.cfg, level))
        return frozenset(held)

    async def release_locks(self, level: str, keep: Iterable[str] = ()) -> None:
        """Release the locks of C{level} this LU holds, except the members in C{keep}.

        A whole level held through its group lock is narrowed to the kept
        members (taken in the same mode) before the group lock goes.
        """
        held = self.acquired.get(level)
        if held is None:
            return
        keep_set = set(keep)
        if held is ALL_SET:
            mode = "shared" if self.share_locks.get(level) else "exclusive"
            request = [("%s/%s" % (level, m), mode) for m in sorted(keep_set)]
            request.append((group_lock(level), "release"))
            blockers = await self.ctx.wconfd.try_update_locks(self.ctx.owner, request)
            if blockers:
                raise errors.LockError("cannot narrow the %s locks: held by %s" % (level, blockers))
            self.acquired[level] = sorted(keep_set)
            return
        drop = [m for m in held if m not in keep_set]
        if drop:
            await self.ctx.wconfd.try_update_locks(
                self.ctx.owner, [("%s/%s" % (level, m), "release") for m in drop]
            )
        self.acquired[level] = [m for m in held if m in keep_set]

    # --- feedback -------------------------------------------------------------
    def feedback(self, message: Any) -> Any:
        return self.ctx.feedback(message)

    def log_info(self, message: str, *args: Any) -> Any:
        """Ganeti's C{LogInfo}: a C{" - INFO: "} line in the job log."""
        return self.ctx.feedback(" - INFO: %s" % (message % args if args else message))

    def log_warning(self, message: str, *args: Any) -> Any:
        """Ganeti's C{LogWarning}: a C{" - WARNING: "} line in the job log."""
        return self.ctx.feedback(" - WARNING: %s" % (message % args if args else message))

    # --- config changes --------------------------------------------------------
    async def update(
        self,
        kind: str,
        obj: ConfigObject,
        release: Iterable[str] = (),
        disks: Iterable[Disk] = (),
        remove_disks: Iterable[str] = (),
    ) -> Any:
        """Store a changed entity (its C{serial_no} must be the stored one).

        @param disks: for an instance, new disks it lists (added with it).
        @param remove_disks: for an instance, uuids of disks it no longer
            lists that leave the config in the same change.
        @return: the stored object (new serial and mtime); C{self.cfg} is
            updated with it.
        """
        disks, remove_disks = list(disks), list(remove_disks)
        extra: dict[str, Any] = {}
        if disks:
            extra["disks"] = disks
        if remove_disks:
            extra["remove_disks"] = remove_disks
        stored = await self.ctx.wconfd.update(self.ctx.owner, kind, obj, release=list(release), **extra)
        if extra:
            table = dict(self.cfg.disks)
            for disk in disks:
                table[disk.uuid] = attrs.evolve(disk, serial_no=1)  # type: ignore[index]
            for uuid in remove_disks:
                table.pop(uuid, None)
            self.cfg = attrs.evolve(self.cfg, disks=table)
        self._patch_cfg(kind, stored)
        return stored

    async def add(
        self, kind: str, obj: ConfigObject, release: Iterable[str] = (), disks: Iterable[Disk] = ()
    ) -> Any:
        """Add a new entity (an instance with its C{disks}); returns it as
        stored (C{self.cfg} updated)."""
        disks = list(disks)
        if disks:
            uuid = await self.ctx.wconfd.add(self.ctx.owner, kind, obj, disks=disks, release=list(release))
        else:
            uuid = await self.ctx.wconfd.add(self.ctx.owner, kind, obj, release=list(release))
        stored = await read_entity(self.ctx.wconfd, kind, uuid)
        if disks:
            table = dict(self.cfg.disks)
            for disk_uuid in stored.disks:
                table[disk_uuid] = await read_entity(self.ctx.wconfd, "disk", disk_uuid)
            self.cfg = attrs.evolve(self.cfg, disks=table)
        self._patch_cfg(kind, stored)
        return stored

    async def remove(self, kind: str, key: str, release: Iterable[str] = ()) -> None:
        """Remove the entity of C{kind} with uuid (or name) C{key}."""
        current = _find(self.cfg, kind, key)
        await self.ctx.wconfd.remove(self.ctx.owner, kind, key, release=list(release))
        if current is not None:
            _, attr = KINDS[kind]
            items = dict(getattr(self.cfg, attr))
            items.pop(current.uuid, None)
            changes: dict[str, Any] = {attr: items}
            self.cfg = attrs.evolve(self.cfg, **changes)

    async def modify(self, kind: str, key: str | None, change: Callable[[Any], Any]) -> Any:
        """Read the entity afresh, apply C{change}, store the result.

        Retries (re-reading) when another writer changed the object in
        between, which can only happen to objects guarded by a shared lock
        (the cluster, under the shared BGL).  C{change} may raise to abort;
        if it returns the object unchanged nothing is written.
        """
        for attempt in range(MODIFY_ATTEMPTS):
            current = await read_entity(self.ctx.wconfd, kind, key)
            changed = change(current)
            if changed == current:
                self._patch_cfg(kind, current)
                return current
            try:
                return await self.update(kind, changed)
            except errors.ConfigurationError as e:
                if "changed since it was read" not in str(e) or attempt == MODIFY_ATTEMPTS - 1:
                    raise
        raise errors.ProgrammerError("unreachable")  # pragma: no cover

    def _patch_cfg(self, kind: str, stored: Any) -> None:
        if kind == "cluster":
            self.cfg = attrs.evolve(self.cfg, cluster=stored)
            return
        if kind not in KINDS:
            return
        _, attr = KINDS[kind]
        items = dict(getattr(self.cfg, attr))
        items[stored.uuid] = stored
        changes: dict[str, Any] = {attr: items}
        self.cfg = attrs.evolve(self.cfg, **changes)


# --- config lookups shared by LUs ------------------------------------------------


async def read_entity(wconfd: Any, kind: str, key: str | None) -> Any:
    """One entity, read from WConfD now, as a record."""
    if kind == "cluster":
        return await wconfd.read_cluster()
    cls, _ = KINDS[kind]
    return cls.from_dict(await wconfd.read_entity(kind, key))


def _find(cfg: ConfigData, kind: str, key: str) -> Any:
    if kind == "cluster":
        return cfg.cluster
    items = getattr(cfg, KINDS[kind][1])
    found = items.get(key)
    if found is not None:
        return found
    for item in items.values():
        if getattr(item, "name", None) == key:
            return item
    return None


def match_name(short: str, names: Iterable[str]) -> str | None:
    """Ganeti's name expansion: C{short} itself, or the one name it is a prefix of.

    C{"web1"} matches C{"web1.example.com"} (a prefix ending at a dot);
    comparisons ignore case; ambiguity gives C{None}.
    """
    names = list(names)
    if short in names:
        return short
    lower = short.lower()
    exact = [n for n in names if n.lower() == lower]
    if len(exact) == 1:
        return exact[0]
    prefix = lower + "."
    found = [n for n in names if n.lower().startswith(prefix)]
    return found[0] if len(found) == 1 else None


def expand_instance_name(cfg: ConfigData, name: str) -> str:
    """The full name of instance C{name} (short names expanded)."""
    if name in cfg.instances:  # a UUID
        return cfg.instances[name].name  # type: ignore[return-value]
    full = match_name(name, [i.name for i in cfg.instances.values() if i.name])
    if full is None:
        raise errors.OpPrereqError("Instance '%s' not known" % name, errors.ECODE_NOENT)
    return full


def expand_node(cfg: ConfigData, name: str) -> Node:
    """The node called C{name} (or with that UUID; short names expanded)."""
    node = cfg.nodes.get(name)
    if node is not None:
        return node
    full = match_name(name, [n.name for n in cfg.nodes.values() if n.name])
    if full is None:
        raise errors.OpPrereqError("Node '%s' not known" % name, errors.ECODE_NOENT)
    return next(n for n in cfg.nodes.values() if n.name == full)


def lookup_group(cfg: ConfigData, name: str | None) -> str:
    """The UUID of node group C{name} (a name or a UUID; None: the only group)."""
    if name is None:
        if len(cfg.nodegroups) != 1:
            raise errors.OpPrereqError(
                "More than one node group exists. Target group must be specified explicitly.", errors.ECODE_INVAL
            )
        return next(iter(cfg.nodegroups))
    if name in cfg.nodegroups:
        return name
    for group in cfg.nodegroups.values():
        if group.name == name:
            return group.uuid  # type: ignore[return-value]
    raise errors.OpPrereqError("Node group '%s' not found" % name, errors.ECODE_NOENT)


def lookup_network(cfg: ConfigData, name: str) -> str:
    """The UUID of network C{name} (a name or a UUID)."""
    if name in cfg.networks:
        return name
    for net in cfg.networks.values():
        if net.name == name:
            return net.uuid  # type: ignore[return-value]
    raise errors.OpPrereqError("Network '%s' not found" % name, errors.ECODE_NOENT)


def level_members(cfg: ConfigData, level: str) -> list[str]:
    """Every lock member of C{level} the config gives rise to."""
    if level == LEVEL_INSTANCE:
        return [i.name for i in cfg.instances.values() if i.name]
    if level == LEVEL_NODEGROUP:
        return list(cfg.nodegroups)
    if level in (LEVEL_NODE, LEVEL_NODE_RES):
        return list(cfg.nodes)
    if level == LEVEL_NETWORK:
        return list(cfg.networks)
    if level == LEVEL_CLUSTER:
        return ["BGL"]
    if level == LEVEL_NODE_ALLOC:
        return ["NAL"]
    raise errors.ProgrammerError("unknown lock level %r" % level)
