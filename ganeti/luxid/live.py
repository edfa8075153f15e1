"""Live data for LuxiD's queries: what the node daemons report right now.

A query field that shows more than the config says (an instance's
C{status} or C{oper_ram}, a node's C{mfree}, ...) declares it in
L{FieldDef.needs}.  L{needed} reads those marks for the fields a query
asks for and the fields its filter looks at; L{LiveData.gather} then asks
the online, vm-capable nodes in parallel, each with a short timeout, and
builds the C{live} dict of L{ganeti.query.fields.QueryContext}::

    {"node1": {"instances": {"web1": {"state": "running", "memory": 512,
                                      "vcpus": 1, "time": 17.5}}},
     "node2": {"mfree": 3072, "mtotal": 4096, "bootid": "...", ...}}

Which calls each need makes:
  - L{NEED_LIVE_INSTANCES}: C{all_instances_info} with
    C{[enabled hypervisors, {hv: cluster hvparams}]} on every node;
  - L{NEED_CONSOLE}: that, then C{instance_console_info} with the
    instance's C{INST_DICT} on the primary node of each instance found
    running there (only the instances the query names, when it names some);
  - L{NEED_LIVE_NODES}: C{node_info} with C{[storage units, [[default
    hypervisor, its hvparams]]]} on every node.

A node that does not answer in time, or answers an error, is left out of
the dict: its cells become C{RS_NODATA}.  Offline nodes are not asked
(their cells are C{RS_OFFLINE}).  Concurrent queries that need the same
calls share one round of them.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable, Mapping, cast

from twisted.internet.defer import Deferred, ensureDeferred, gatherResults
from twisted.logger import Logger

from ganeti import errors, ports
from ganeti.objects import ConfigData, Instance, Node
from ganeti.query import engine
from ganeti.query import fields as q
from ganeti.reactors import ITimeTCPReactor
from ganeti.rpc import procedures
from ganeti.rpc.live import asked_nodes, hypervisor_args, instances_report, node_info_args, node_report

#: seconds a node has to answer a live-data call
LIVE_TIMEOUT = 5.0

_MAX_FILTER_DEPTH = 64


# --- which data a query needs (pure) ----------------------------------------------------------


def _filter_fields(qfilter: Any, out: list[str], depth: int = 0) -> None:
    """Append the field names a qlang filter looks at to C{out}."""
    if not isinstance(qfilter, (list, tuple)) or not qfilter or depth > _MAX_FILTER_DEPTH:
        return
    op = qfilter[0]
    if op in ("&", "|", "!"):
        for sub in qfilter[1:]:
            _filter_fields(sub, out, depth + 1)
    elif len(qfilter) >= 2 and isinstance(qfilter[1], str):
        out.append(qfilter[1])


def needed(resource: Any, fields: Iterable[Any], qfilter: Any = None) -> frozenset[str]:
    """The C{NEED_*} data a query of C{resource} needs; empty: config only.

    Never raises: an unknown resource or a malformed filter needs nothing
    (the query itself reports the error).
    """
    try:
        res = engine.get_resource(resource)
    except errors.OpPrereqError:
        return frozenset()
    names = [f for f in fields if isinstance(f, str)] if isinstance(fields, (list, tuple)) else []
    _filter_fields(qfilter, names)
    needs: set[str] = set()
    for name in names:
        fdef = res.fields.get(name)
        if fdef is not None:
            needs |= fdef.needs
    return frozenset(needs)


def wanted_instances(config: ConfigData, names: Iterable[Any] | None) -> list[Instance] | None:
    """The instances C{names} designate (full names, UUIDs or unique short
    names); C{None} (all) when no names are given."""
    if not names:
        return None
    from ganeti.query import common

    found = []
    for name in names:
        inst = common.find(config.instances, name)
        if inst is not None and inst not in found:
            found.append(inst)
    return found


# --- asking the nodes ---------------------------------------------------------------------


class LiveData:
    """Asks the node daemons for the live data of a query.

    @param rpc_factory: makes the node RPC client (a L{ganeti.rpc.RpcClient}
        or a fake with its C{call} and C{call_one}), once, on first use.
    @param timeout: seconds each node has to answer.
    """

    log = Logger()

    def __init__(self, rpc_factory: Callable[[], Any], timeout: float = LIVE_TIMEOUT) -> None:
        self._rpc_factory = rpc_factory
        self._rpc: Any = None
        self.timeout = timeout
        self._inflight: dict[Any, list[Deferred[Any]]] = {}

    @classmethod
    def for_node(cls, reactor: ITimeTCPReactor, paths: Any, port: int = ports.NODED, timeout: float = LIVE_TIMEOUT) -> LiveData:
        """Talk to the nodes (on C{port}) with this node's cluster certificate."""

        def factory() -> Any:
            from ganeti.rpc import RpcClient

            return RpcClient.from_paths(reactor, paths, port=port)

        return cls(factory, timeout)

    def rpc(self) -> Any:
        if self._rpc is None:
            self._rpc = self._rpc_factory()
        return self._rpc

    async def close(self) -> None:
        rpc, self._rpc = self._rpc, None
        if rpc is not None and hasattr(rpc, "close"):
            await rpc.close()

    async def gather(
        self, config: ConfigData, needs: Iterable[str], names: Iterable[Any] | None = None,
        reports: Callable[[str], Mapping[str, Any] | None] | None = None,
    ) -> dict[str, Any]:
        """The C{live} dict for a query that C{needs} this data.

        @param names: the instances the query names (for consoles), or
            C{None} for all.
        @param reports: the latest state report a connected node pushed
            (L{ganeti.heartbeat.server.LivenessService.fresh_report}); only
            nodes without one are asked by RPC.
        """
        needs = frozenset(needs)
        nodes = asked_nodes(config)
        live: dict[str, dict[str, Any]] = {}
        if not nodes:
            return live
        pushed: dict[str, Mapping[str, Any]] = {}
        if reports is not None:
            for name in nodes:
                report = reports(name)
                if report is not None:
                    pushed[name] = report
        if q.NEED_LIVE_NODES in needs:
            ask = {n: a for n, a in nodes.items() if not pushed.get(n, {}).get("node")}
            for name in nodes:
                if name not in ask:
                    live.setdefault(name, {}).update(pushed[name]["node"])
            if ask:
                found = await self._shared(("node_info", id(config), tuple(ask)), lambda: self._node_info(config, ask))
                for name, report in found.items():
                    live.setdefault(name, {}).update(report)
        if q.NEED_LIVE_INSTANCES in needs or q.NEED_CONSOLE in needs:
            ask = {n: a for n, a in nodes.items() if n not in pushed}
            running: dict[str, dict[str, Any]] = {n: dict(pushed[n].get("instances", {})) for n in nodes
                                                  if n in pushed}
            if ask:
                running.update(await self._shared(("instances", id(config), tuple(ask)),
                                                  lambda: self._instances(config, ask)))
            if q.NEED_CONSOLE in needs:
                wanted = wanted_instances(config, names)
                recheck = self._stale_for_console(config, nodes, pushed, running, wanted)
                if recheck:
                    running.update(await self._shared(("instances", id(config), tuple(recheck)),
                                                      lambda: self._instances(config, recheck)))
                running = await self._with_consoles(config, nodes, running, wanted)
            for name, report in running.items():
                live.setdefault(name, {})["instances"] = report
        return live

    async def instances_now(self, config: ConfigData, node: str) -> dict[str, Any] | None:
        """What runs on C{node} now, asked by RPC (not from a pushed report):
        C{{instance: info}}, C{None} if the node did not answer."""
        address = asked_nodes(config).get(node)
        if address is None:
            return None
        return (await self._instances(config, {node: address})).get(node)

    async def _shared(self, key: Any, make: Callable[[], Awaitable[Any]]) -> Any:
        """C{await make()}, or the result of the same call already under way."""
        waiters = self._inflight.get(key)
        if waiters is not None:
            d: Deferred[Any] = Deferred()
            waiters.append(d)
            return await d
        self._inflight[key] = waiters = []
        try:
            result = await make()
        except BaseException as e:
            del self._inflight[key]
            for w in waiters:
                w.errback(e)
            raise
        del self._inflight[key]
        for w in waiters:
            w.callback(result)
        return result

    async def _call(self, nodes: Mapping[str, str], call: procedures.Call[Any]) -> dict[str, Any]:
        """C{{node: payload}} of the nodes whose call succeeded."""
        procedure = call.procedure
        try:
            results = await self.rpc().run(nodes, call.within(self.timeout))
        except Exception:
            self.log.failure("live data: {procedure} failed", procedure=procedure)
            return {}
        out = {}
        for name, result in results.items():
            if result.failed:
                self.log.debug(
                    "live data: {procedure} on {node}: {why}", procedure=procedure, node=name, why=result.fail_msg
                )
                continue
            out[name] = result.payload
        return out

    async def _node_info(self, config: ConfigData, nodes: Mapping[str, str]) -> dict[str, dict[str, Any]]:
        storage, hv_specs = node_info_args(config)
        answers = await self._call(nodes, procedures.node_info.call(storage, hv_specs))
        out = {}
        for name, payload in answers.items():
            report = node_report(payload)
            if report is not None:
                out[name] = report
        return out

    async def _instances(self, config: ConfigData, nodes: Mapping[str, str]) -> dict[str, dict[str, Any]]:
        names, hvparams = hypervisor_args(config)
        answers = await self._call(nodes, procedures.all_instances_info.call(names, hvparams))
        out = {}
        for name, payload in answers.items():
            report = instances_report(payload)
            if report is not None:
                out[name] = report
        return out

    @staticmethod
    def _stale_for_console(config: ConfigData, nodes: Mapping[str, str], pushed: Mapping[str, Any],
                           running: Mapping[str, Mapping[str, Any]], wanted: list[Instance] | None,
                           ) -> dict[str, str]:
        """The primary nodes whose pushed report does not list an instance
        whose console is asked for by name: asked again by RPC, since a
        report may lag a start that just happened (C{gnt-instance startup}
        then C{gnt-instance console})."""
        recheck: dict[str, str] = {}
        for inst in wanted or []:
            pnode = config.nodes.get(inst.primary_node or "")
            name = pnode.name if pnode is not None else None
            if (name is not None and name in pushed and name in nodes
                    and inst.name not in running.get(name, {})):
                recheck[name] = nodes[name]
        return recheck

    async def _with_consoles(
        self,
        config: ConfigData,
        nodes: Mapping[str, str],
        running: dict[str, dict[str, Any]],
        wanted: list[Instance] | None,
    ) -> dict[str, dict[str, Any]]:
        """A copy of C{running} with each wanted instance's console added,
        asked from its primary node if it runs there."""
        out = {node: dict(report) for node, report in running.items()}
        candidates = wanted if wanted is not None else list(config.instances.values())
        calls = []
        for inst in candidates:
            pnode: Node | None = config.nodes.get(inst.primary_node or "")
            node = pnode.name if pnode is not None else None
            if node is None or node not in nodes or inst.name is None or inst.name not in out.get(node, {}):
                continue
            calls.append(ensureDeferred(self._console(config, inst, node, nodes[node], out)))
        if calls:
            await gatherResults(calls)
        return out

    async def _console(
        self, config: ConfigData, inst: Instance, node: str, address: str, out: dict[str, dict[str, Any]]
    ) -> None:
        from ganeti.rpc.instances import encode_instance

        try:
            result = await self.rpc().run_one(
                node, address, procedures.instance_console_info.call(encode_instance(config, inst)).within(self.timeout)
            )
        except Exception:
            self.log.failure("live data: instance_console_info of {instance} failed", instance=inst.name)
            return
        if result.failed or not isinstance(result.payload, Mapping):
            return
        name = cast(str, inst.name)  # the caller skips an instance without one
        out[node][name] = dict(out[node][name], console=dict(result.payload))
