"""Profile the scale benchmark's paths in one process, without daemons:
C{python -m tests.bench.profile_scale [--instances N] [--profile WHAT]}.

LuxiD's query handler over a config of 1,000 nodes and N instances, with a
real liveness roster holding each node's pushed report (as
C{scripts/bench scale}'s simulated nodes), answering:

  - list: what C{gnt-instance list} asks (LUXI C{Query}), encoded as LuxiD
    sends it, then decoded and formatted as the client does;
  - bulk: what C{GET /2/instances?bulk=1} asks (C{QueryInstances}), encoded,
    decoded and reshaped as RAPI does;
  - live: the live list (C{name, status, oper_state, oper_ram, oper_vcpus});
  - update: C{ConfigStore.update_instance} of one instance (WConfD's update).

Prints the CPU time per operation of each (warm: after one run), and with
C{--profile WHAT} the cProfile of that one.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import tempfile
import time
from typing import Any, Callable

import attrs
from twisted.internet.defer import ensureDeferred
from twisted.python.failure import Failure

from ganeti.heartbeat import roster as rost

MASTER = "node1.test"


class _Conn:
    pass


class FakeLiveness:
    def __init__(self, config: Any) -> None:
        self.roster = rost.Roster(0.0, timeout=60)
        node_name = {n.uuid: n.name for n in config.nodes.values()}
        by_node: dict[str, list[str]] = {n: [] for n in node_name.values()}
        for inst in config.instances.values():
            by_node[node_name[inst.primary_node]].append(inst.name)
        now = time.time()
        for name, names in by_node.items():
            conn = _Conn()
            self.roster.hello(name, conn, "boot-" + name, 1.0)
            running = {n: {"state": "running", "memory": 128, "vcpus": 1, "time": now} for n in names}
            self.roster.reported(name, conn, {"full": True, "instances": running}, 1.0)

    def fresh_report(self, name: str) -> Any:
        return self.roster.fresh_report(name)

    def snapshot(self) -> Any:
        return self.roster.snapshot()


class FakeWConfd:
    def __init__(self, config: Any) -> None:
        self.config = config

    async def read_serial(self) -> int:
        return int(self.config.serial_no)

    async def read_config(self) -> Any:
        return self.config


class FakeService:
    watcher = None
    filters = None
    queue = None

    def __init__(self, config: Any) -> None:
        self.liveness = FakeLiveness(config)
        self._wconfd = FakeWConfd(config)

    def wconfd_client(self) -> Any:
        return self._wconfd

    def live_jobs(self) -> dict[int, Any]:
        return {}

    def is_drained(self) -> bool:
        return False


def make_handler(instances: int) -> Any:
    from ganeti.luxid.handler import LuxiHandler
    from ganeti.paths import Paths
    from tests.bench.bench_scale import make_config

    config = make_config(instances)
    service = FakeService(config)
    from ganeti.luxid.live import LiveData

    # the root is read only by cluster queries (the watcher's pause file), which this does not make
    return LuxiHandler(service, Paths(tempfile.gettempdir()), LiveData(lambda: None))


def run(d: Any) -> Any:
    d = ensureDeferred(d)
    assert d.called, "the handler waited"
    result = d.result
    if isinstance(result, Failure):
        result.raiseException()
    return result


def list_op(handler: Any) -> Callable[[], Any]:
    from ganeti.client.formatting import format_query_result
    from ganeti.client.gnt_instance import LIST_FORMAT
    from ganeti.luxi import wire

    fields = ["name", "os", "pnode", "status", "oper_ram"]

    def op() -> Any:
        result = run(handler.handle("Query", ["instance", fields, None]))
        payload = wire.encode_response(True, result)[:-1]
        return "\n".join(format_query_result(wire.decode_result(payload), overrides=LIST_FORMAT)[1])

    return op


def bulk_op(handler: Any) -> Callable[[], Any]:
    """What RAPI does for C{GET /2/instances?bulk=1} (L{ganeti.rapi.bulk}),
    LuxiD's answers encoded and decoded as on the wire."""
    import orjson

    from ganeti.luxi import wire
    from ganeti.rapi.rlib2 import I_FIELDS

    try:
        from ganeti.rapi import bulk
    except ImportError:  # a tree from before it (the "before" figures): every field, reshaped and encoded
        def full() -> Any:
            rows = run(handler.handle("QueryInstances", [[], I_FIELDS, False]))
            rows = orjson.loads(wire.encode_response(True, rows)[:-1])["result"]
            return orjson.dumps([dict(zip(I_FIELDS, row)) for row in rows])

        return full

    cache: dict[Any, Any] = {}

    def call(method: str, args: list[Any]) -> Any:
        result = run(handler.handle(method, args))
        return wire.decode_result(wire.encode_response(True, result)[:-1])

    async def serial() -> Any:
        return call("QueryConfigValues", [["config_serial"]])[0]

    async def query(fields: list[str]) -> Any:
        return call("QueryInstances", [[], fields, False])

    def op() -> Any:
        return run(bulk.bulk_list(cache, "instance", I_FIELDS, serial, query))

    return op


def live_op(handler: Any) -> Callable[[], Any]:
    from ganeti.luxi import wire

    fields = ["name", "status", "oper_state", "oper_ram", "oper_vcpus"]

    def op() -> Any:
        result = run(handler.handle("Query", ["instance", fields, None]))
        return wire.encode_response(True, result)

    return op


def profile_updates(instances: int, rounds: int, profile: bool) -> None:
    """C{update_instance} through a real WConfD (twistd, under cProfile
    when C{profile}) holding the benchmark's config of C{instances}."""
    import signal
    import subprocess

    from twisted.internet import defer, task

    from ganeti.testing.cluster import BIN
    from ganeti.testing.daemons import LiveOwner, make_root, remove_root, seed_config
    from ganeti.wconfd.client import WConfdClient
    from tests.bench.bench_scale import cpu_seconds, make_config

    config = make_config(instances)
    root = make_root("profsu")
    seed_config(root, config)
    stats = os.path.join(root.root, "wconfd.prof")
    argv = [os.path.join(BIN, "twistd"), "-n", "--pidfile=", "--logfile=" + os.path.join(root.root, "wconfd.log")]
    if profile:
        argv += ["--profile", stats, "--profiler", "cprofile", "--savestats"]
    proc = subprocess.Popen(argv + ["ganeti-wconfd", "--root", root.root], cwd=root.root)

    async def drive(reactor: Any) -> None:
        deadline = time.monotonic() + 300
        while not os.path.exists(root.wconfd_socket):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("WConfD did not start")
            await task.deferLater(reactor, 0.1, lambda: None)
        await task.deferLater(reactor, 1, lambda: None)
        client = await WConfdClient.connect(reactor, root.wconfd_socket)
        owner = LiveOwner(root, 300).owner
        target = sorted(i.name for i in config.instances.values())[0]
        await client.try_update_locks(owner, [("cluster/BGL", "shared"), ("instance/" + target, "exclusive")])
        inst = await client.read_instance(target)
        cpu0, wall0 = cpu_seconds(proc.pid), time.perf_counter()
        for i in range(rounds):
            inst = await client.update_instance(owner, attrs.evolve(inst, os="img-%d" % i))
        wall, cpu = time.perf_counter() - wall0, cpu_seconds(proc.pid) - cpu0
        print("update   %9.2f ms CPU of WConfD, %.2f ms wall (%d, sequential)"
              % (cpu * 1000 / rounds, wall * 1000 / rounds, rounds))
        await client.close()

    try:
        task.react(lambda reactor: defer.ensureDeferred(drive(reactor)))
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        if profile and os.path.exists(stats):
            for order in ("cumulative", "tottime"):
                out = io.StringIO()
                pstats.Stats(stats, stream=out).sort_stats(order).print_stats(40)
                print(out.getvalue())
        remove_root(root)


def measure(name: str, op: Callable[[], Any], rounds: int, profile: bool) -> None:
    op()  # warm: the per-serial columns
    gc.collect()
    gc.freeze()  # as the daemons' FrozenHeapService does with what they hold for long
    samples = []
    for _ in range(rounds):
        start = time.process_time()
        op()
        samples.append((time.process_time() - start) * 1000)
    print("%-8s %9.1f ms CPU (least of %d; median %.1f)" % (name, min(samples), rounds, sorted(samples)[rounds // 2]))
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        op()
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(45)
        print(out.getvalue())
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
        print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instances", type=int, default=10000)
    parser.add_argument("--profile", default="")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("what", nargs="*", default=["list", "bulk", "live"])
    args = parser.parse_args()
    if args.what == ["update"]:
        profile_updates(args.instances, args.rounds * 20, args.profile == "update")
        return
    handler = make_handler(args.instances)
    ops = {"list": list_op, "bulk": bulk_op, "live": live_op}
    for what in args.what:
        measure(what, ops[what](handler), args.rounds, args.profile == what)


if __name__ == "__main__":
    main()
