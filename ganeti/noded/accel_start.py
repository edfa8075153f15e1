"""At NodeD's start: the KVM acceleration probe, in the background.

When the cluster enables the kvm hypervisor (ssconf C{hypervisor_list}),
NodeD asks the kvm hypervisor for the node's accelerator once the reactor
runs (L{ganeti.backend.hypervisor.kvm_accel}: cached per qemu binary and
boot), so that the first instance start after a node boots does not wait
for the probe (up to its 4 s timeout where KVM hangs, as on these
machines).  C{gnt-instance info} and MonD's C{hv-kvm} report and
C{ganeti_node_kvm_accel_info} metric show its answer.  Nothing happens
without kvm, without qemu, or before the node joined a cluster.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger

from ganeti import errors, ssconf
from ganeti.paths import Paths

log = Logger()
KVM = "kvm"


def probe_at_start(paths: Paths, instances: Any) -> Deferred[str | None] | None:
    """Start the probe if the cluster enables kvm; its Deferred (the accelerator), or C{None}."""
    store = ssconf.SimpleStore(paths)
    try:
        enabled = store.get_value("hypervisor_list").split()
        hvparams: dict[str, Any] = dict(store.get_hvparams(KVM))
    except errors.ConfigurationError:
        return None
    if KVM not in enabled:
        return None
    return ensureDeferred(_probe(instances, hvparams))


async def _probe(instances: Any, hvparams: dict[str, Any]) -> str | None:
    try:
        hyper = instances.hypervisor(KVM)
        binary = hyper._binary(hvparams)
        accel = str(await hyper.node_accel(binary))
    except Exception as exc:  # a probe that cannot run leaves it to the first start, which says why
        log.info("KVM acceleration probe at start skipped: {why}", why=exc)
        return None
    log.info("KVM acceleration probe at start: {accel} with {binary}", accel=accel, binary=binary)
    return accel
