"""LU hooks, the master's side: Ganeti's C{HooksMaster} and C{mcpu._ExecLU}.

An LU that Ganeti gives hooks sets C{HPATH} (C{"instance-add"}, ...) and
C{HTYPE} (C{"INSTANCE"}, ...) and implements C{build_hooks_env()} (its
variables, without the C{GANETI_} prefix) and C{build_hooks_nodes()}
(C{(pre node UUIDs, post node UUIDs)}).  L{execute}, called by the job's
processor once C{check_prereq} passed, runs an LU the way Ganeti's
processor does:

  1. the pre phase: C{hooks_runner(hpath, "pre", env)} on the pre nodes; a
     failing script (C{HKR_FAIL}) anywhere aborts the opcode with
     L{errors.HooksAbort} C{[(node, script, output), ...]} before anything
     changed; offline nodes are skipped, unreachable ones noted in the job
     log;
  2. C{dry_run} stops here;
  3. C{exec_}; then the post phase on the post nodes (C{prepare_post_hook_nodes}
     may extend them), whose environment is built again (the state after
     the change) with the prefix C{GANETI_POST_}, merged with the pre one;
     a failing post script is a warning in the job log
     (C{"On <node> script <script> failed, output: ..."}), never an error;
  4. whatever happened, if the LU wrote the config: the C{config-update}
     hooks (phase post, the pre environment) on the master.

Every script gets C{PATH}, C{GANETI_HOOKS_VERSION} (2), C{GANETI_OP_CODE},
C{GANETI_DATA_DIR}, C{GANETI_HOOKS_PHASE}, C{GANETI_HOOKS_PATH},
C{GANETI_OBJECT_TYPE}, C{GANETI_CLUSTER}, C{GANETI_MASTER} and the LU's
variables, every value a string (L{full_env}).  The node runs the scripts
(L{ganeti.noded.hooks}).  Where Ganeti 3.0's messages name a node by its
UUID (its RPC results are keyed so) these name it (ours).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Mapping

from twisted.internet.defer import CancelledError
from twisted.logger import Logger

from ganeti import errors
from ganeti.cmdlib import hooks_env
from ganeti.cmdlib.base import REGISTRY
from ganeti.objects import ConfigData
from ganeti.rpc import procedures

if TYPE_CHECKING:
    from ganeti.cmdlib.base import LogicalUnit
    from ganeti.opcodes.typed import OpCode

log = Logger()

#: the phases (Ganeti's C{HOOKS_PHASE_*})
PHASE_PRE = "pre"
PHASE_POST = "post"
#: C{PATH} of every hook (Ganeti's C{HOOKS_PATH})
HOOKS_PATH = "/sbin:/bin:/usr/sbin:/usr/bin"
#: Ganeti's C{HOOKS_VERSION}
HOOKS_VERSION = 2
#: the hooks run after any LU that wrote the config (Ganeti's C{HOOKS_NAME_CFGUPDATE})
CFGUPDATE = "config-update"
#: Ganeti's C{HKR_*}
HKR_SKIP, HKR_FAIL, HKR_SUCCESS = 0, 1, 2
#: Ganeti's default data directory, which C{GANETI_DATA_DIR} names
DATA_DIR = "/var/lib/ganeti"

#: the WConfD client calls that change the config (Ganeti's C{write_count})
WRITES = frozenset({"write_config", "write_config_and_unlock", "update", "update_instance", "update_node",
                    "update_group", "update_cluster", "add", "remove", "change_filter"})


def prefixed(env: Mapping[str, Any], phase: str) -> dict[str, Any]:
    """The LU's variables with the phase's prefix (C{GANETI_} or C{GANETI_POST_})."""
    prefix = "GANETI_" if phase == PHASE_PRE else "GANETI_POST_"
    for key in env:
        if key.upper().startswith(prefix):
            raise errors.ProgrammerError("hooks variable %s already has the prefix %s" % (key, prefix))
    return {prefix + key: value for key, value in env.items()}


def full_env(op_id: str, hpath: str, phase: str, phase_env: Mapping[str, Any], *, htype: str | None = None,
             cluster: str | None = None, master: str | None = None, data_dir: str = DATA_DIR) -> dict[str, str]:
    """What a script gets (Ganeti's C{_RunWrapper}): the fixed variables and
    C{phase_env} (already prefixed), every value as a string."""
    env: dict[str, Any] = {
        "PATH": HOOKS_PATH,
        "GANETI_HOOKS_VERSION": HOOKS_VERSION,
        "GANETI_OP_CODE": op_id,
        "GANETI_DATA_DIR": data_dir,
        "GANETI_HOOKS_PHASE": phase,
        "GANETI_HOOKS_PATH": hpath,
    }
    if htype:
        env["GANETI_OBJECT_TYPE"] = htype
    if cluster is not None:
        env["GANETI_CLUSTER"] = cluster
    if master is not None:
        env["GANETI_MASTER"] = master
    clash = set(env) & set(phase_env)
    if clash:
        raise errors.ProgrammerError("hooks variables set twice: %s" % ", ".join(sorted(clash)))
    env.update(phase_env)
    return {str(key): str(value) for key, value in env.items()}


def failures(results: Mapping[str, Any]) -> tuple[list[tuple[str, str, str]], list[str]]:
    """C{(failed scripts [(node, script, output)], notes)} of a phase's RPC
    results C{{node name: RpcResult}}: offline nodes are skipped, a node
    that did not answer is a note."""
    failed: list[tuple[str, str, str]] = []
    notes: list[str] = []
    for name in sorted(results):
        result = results[name]
        if result.offline:
            continue
        if not result.success:
            notes.append("Communication failure to node %s: %s" % (name, result.fail_msg))
            continue
        payload = result.payload if isinstance(result.payload, list) else []
        for entry in payload:
            if isinstance(entry, (list, tuple)) and len(entry) == 3 and entry[1] == HKR_FAIL:
                failed.append((name, str(entry[0]), str(entry[2] or "")))
    return failed, notes


class _CountingWConfd:
    """The job's WConfD client, counting the calls that change the config."""

    def __init__(self, wconfd: Any) -> None:
        self._wconfd = wconfd
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._wconfd, name)
        if name in WRITES:
            def counted(*args: Any, **kwargs: Any) -> Any:
                self.writes += 1
                return value(*args, **kwargs)
            return counted
        return value


class HooksMaster:
    """The hooks of one LU run (Ganeti's C{HooksMaster.BuildFromLu}).

    Built after C{check_prereq}: the pre environment is computed here.
    """

    def __init__(self, lu: LogicalUnit[OpCode]) -> None:
        self.lu = lu
        self.op_id = lu.OP_ID or ""
        self.hpath: str | None = lu.HPATH
        self.htype: str | None = lu.HTYPE
        self._env_fn: Callable[[], dict[str, Any]] = lu.build_hooks_env
        self._post_nodes_fn: Callable[[list[str]], list[str]] = lu.prepare_post_hook_nodes
        nodes_fn: Callable[[], tuple[list[str], list[str]]] = lu.build_hooks_nodes
        # the table is for the LUs registered for their opcodes (not, say, a test's stand-in)
        declared = hooks_env.SPECS.get(self.op_id) if self.hpath is None and REGISTRY.get(self.op_id) is type(lu) \
            else None
        if declared is not None:
            self.hpath, self.htype = declared.hpath, declared.htype
            self._env_fn = lambda: declared.env(lu)
            nodes_fn = lambda: declared.nodes(lu)  # noqa: E731
            if declared.post_nodes is not None:
                self._post_nodes_fn = lambda nodes: declared.post_nodes(lu, nodes)  # type: ignore[misc]
        cfg = lu.cfg
        self.cluster_name = cfg.cluster.cluster_name
        self.master_name = cfg.master_node_name()
        self.pre_nodes: frozenset[str] = frozenset()
        self.post_nodes: frozenset[str] = frozenset()
        self.pre_env: dict[str, Any] = {}
        if self.hpath is not None:
            pre, post = nodes_fn()
            self.pre_nodes, self.post_nodes = frozenset(n for n in pre if n), frozenset(n for n in post if n)
            self.pre_env = prefixed(self._env_fn(), PHASE_PRE)

    def _env(self, hpath: str, phase: str, phase_env: Mapping[str, Any]) -> dict[str, str]:
        return full_env(self.op_id, hpath, phase, phase_env, htype=self.htype, cluster=self.cluster_name,
                        master=self.master_name)

    async def _send(self, cfg: ConfigData, nodes: Iterable[str], hpath: str, phase: str,
                    env: dict[str, str]) -> dict[str, Any]:
        targets, offline = resolve_nodes(cfg, nodes)
        call = procedures.hooks_runner.call(hpath, phase, env)
        try:
            rpc = self.lu.ctx.rpc()
            results: dict[str, Any] = await rpc.run(targets, call, offline=offline)
        except errors.OpExecError:  # a context without node RPC (unit tests): no node runs hooks
            return {}
        except (CancelledError, GeneratorExit):
            raise
        except Exception as e:  # no node RPC here (no cluster certificate): every node is unreachable
            from ganeti.rpc.client import RpcResult

            return {name: RpcResult.failure(name, "cannot talk to the node daemons: %s" % e) for name in targets}
        return results

    async def run_phase(self, phase: str) -> dict[str, Any] | None:
        """Run C{phase}; L{errors.HooksAbort} when a pre script failed."""
        if self.hpath is None:
            return None
        if phase == PHASE_PRE:
            nodes, env = self.pre_nodes, self.pre_env
        else:
            self.lu.cfg = await self.lu.ctx.wconfd.read_config()  # the state after the change
            try:
                nodes = frozenset(n for n in self._post_nodes_fn(sorted(self.post_nodes)) if n)
                env = dict(prefixed(self._env_fn(), PHASE_POST))
            except Exception as e:  # the change is made: a warning, not a failed job
                log.error("job {job}: post hooks of {hpath}: {e!r}", job=self.lu.ctx.job_id, hpath=self.hpath, e=e)
                await self.lu.log_warning("Post hooks of %s not run: %s", self.hpath, e)
                return None
            env.update(self.pre_env)
        if not nodes:
            return None
        results = await self._send(self.lu.cfg, nodes, self.hpath, phase, self._env(self.hpath, phase, env))
        failed, notes = failures(results)
        for note in notes:
            await self.lu.log_warning("%s", note)
        log.info("job {job}: hooks {hpath}-{phase} on {nodes}: {failed} failed", job=self.lu.ctx.job_id,
                 hpath=self.hpath, phase=phase, nodes=", ".join(sorted(results)), failed=len(failed))
        if failed and phase == PHASE_PRE:
            raise errors.HooksAbort(failed)
        for node, script, output in failed:
            await self.lu.log_warning("On %s script %s failed, output: %s", node, script, output or "(no output)")
        return results

    async def run_config_update(self) -> None:
        """The C{config-update} hooks on the master (their results are ignored, as Ganeti does)."""
        if self.master_name is None:
            return
        env = self._env(CFGUPDATE, PHASE_POST, self.pre_env)
        try:
            cfg = await self.lu.ctx.wconfd.read_config()
            await self._send(cfg, [self.master_name], CFGUPDATE, PHASE_POST, env)
        except Exception as e:
            log.warn("job {job}: config-update hooks not run: {e}", job=self.lu.ctx.job_id, e=e)


def resolve_nodes(cfg: ConfigData, nodes: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """C{({name: address}, offline names)} of node UUIDs or names; an unknown
    one is taken as a name (and address), as Ganeti's RPC resolver does."""
    targets: dict[str, str] = {}
    offline: list[str] = []
    for key in nodes:
        node = cfg.find_node(key)
        if node is None:
            targets[key] = key
            continue
        name = node.name or key
        targets[name] = node.primary_ip or name
        if node.offline:
            offline.append(name)
    return targets, offline


async def execute(lu: LogicalUnit[OpCode], run: Callable[[], Awaitable[Any]]) -> Any:
    """Run C{lu} (its C{check_prereq} passed) with its hooks: pre phase,
    C{run()} unless C{dry_run}, post phase, C{config-update}; see the
    module docstring."""
    ctx = lu.ctx
    master = HooksMaster(lu)
    await master.run_phase(PHASE_PRE)
    if getattr(lu.op, "dry_run", False):
        return lu.dry_run_result
    counting = _CountingWConfd(ctx.wconfd)
    ctx.wconfd = counting
    try:
        result = await run()
        await master.run_phase(PHASE_POST)
    except (GeneratorExit, CancelledError):  # killed: stop now
        ctx.wconfd = counting._wconfd
        raise
    except BaseException:
        ctx.wconfd = counting._wconfd
        if counting.writes:
            await master.run_config_update()
        raise
    ctx.wconfd = counting._wconfd
    if counting.writes:
        await master.run_config_update()
    return result
