"""The hypervisor interface, and the names of the implementations.

A hypervisor runs instances on one node.  noded holds one object per
hypervisor kind and node root (L{get_hypervisor}); each method returns its
result or a Deferred of it (noded calls them through C{maybeDeferred}) and
fails with L{HypervisorError} when the operation fails.

The values that cross the RPC boundary are plain JSON-able dicts:

  - instance info (C{instance_info}, C{all_instances_info}):
    C{{"memory": MiB, "vcpus": int, "state": int, "time": seconds}}, where
    C{state} is L{STATE_RUNNING} or L{STATE_SHUTDOWN} (Ganeti's
    C{HvInstanceState});
  - node info (C{node_info}'s hypervisor part): C{memory_total},
    C{memory_free}, C{memory_dom0}, C{memory_hv}, C{cpu_total},
    C{cpu_nodes}, C{cpu_sockets}, C{cpu_dom0} (MiB and counts);
  - console info: C{{"instance", "kind", ...}} with C{kind} one of
    L{CONS_MESSAGE}, L{CONS_SSH}, L{CONS_VNC}, L{CONS_SPICE} and the fields
    Ganeti's C{InstanceConsole} has for that kind (C{message}; C{host},
    C{user}, C{command}; C{host}, C{port}, C{display}).

Migration runs in Ganeti's order, each step on the node named:
  1. source: C{migration_info(instance)} -> opaque JSON-able C{info};
  2. target: C{accept_instance(instance, info, target=<its own address>)};
  3. source: C{migrate_instance(instance, target)} (noded adds C{live=}
     when the method takes that keyword), then
     C{get_migration_status(instance)} until it is no longer C{active};
  4. target: C{finalize_migration(instance, info, success)};
  5. source: C{finalize_migration(instance, None, success)}.
An implementation tells from its own state whether it is the source or the
target of a finalize.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, TypeVar, Union

from zope.interface import Interface

from ganeti import errors
from ganeti.hvconstants import (  # noqa: F401  (re-exported: the hypervisors' names)
    CONS_MESSAGE,
    CONS_SPICE,
    CONS_SSH,
    CONS_VNC,
    HT_FAKE,
    HT_KVM,
    STATE_RUNNING,
    STATE_SHUTDOWN,
)
from ganeti.objects import beparams_memory, beparams_vcpus

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

_T = TypeVar("_T")
#: what a hypervisor method returns: the result, or a Deferred of it
MaybeDeferred = Union[_T, "Deferred[_T]"]


class HypervisorError(errors.OpExecError):
    """A hypervisor operation failed (Ganeti's C{errors.HypervisorError})."""


class IHypervisor(Interface):
    """One hypervisor on one node."""

    def start_instance(instance: Any, block_devices: list[Any], startup_paused: bool) -> MaybeDeferred[None]:
        """Start C{instance} (an L{ganeti.objects.Instance} with filled
        C{hvparams} and C{beparams}) with C{block_devices}, a list of
        C{(disk, path, uri)} triples as C{blockdev_assemble} returns them.
        Raise L{HypervisorError} if it is already running."""

    def stop_instance(instance: Any, force: bool, timeout: int | None) -> MaybeDeferred[None]:
        """Stop C{instance}: cleanly within C{timeout} seconds, then hard.
        With C{force}, stopping an instance that is not running succeeds."""

    def reboot_instance(instance: Any) -> MaybeDeferred[None]:
        """Reboot a running C{instance} in place."""

    def list_instances() -> list[str]:
        """The names of the instances running (or paused) here, sorted."""

    def get_instance_info(name: str) -> MaybeDeferred[dict[str, Any] | None]:
        """The info dict of instance C{name}, or C{None} if it is not here."""

    def get_all_instances_info() -> MaybeDeferred[dict[str, dict[str, Any]]]:
        """C{{name: info dict}} for every instance running here."""

    def get_console_info(instance: Any) -> dict[str, Any]:
        """How to reach the console of C{instance}."""

    def migration_info(instance: Any) -> Any:
        """Source side: what the target needs to accept C{instance}."""

    def accept_instance(instance: Any, info: Any, target: str = "") -> MaybeDeferred[None]:
        """Target side: prepare to receive C{instance} on address C{target}."""

    def migrate_instance(instance: Any, target: str) -> MaybeDeferred[None]:
        """Source side: send C{instance} to node C{target}."""

    def get_migration_status(instance: Any) -> MaybeDeferred[dict[str, Any]]:
        """Source side: C{{"status": "completed"|"active"|"failed"|"none", ...}}."""

    def finalize_migration(instance: Any, info: Any, success: bool) -> MaybeDeferred[None]:
        """Either side: commit (C{success}) or roll back the migration."""

    def get_node_info() -> dict[str, Any]:
        """The hypervisor's memory and CPU figures for this node."""


def instance_memory(instance: Any) -> int:
    """The memory (MiB) C{instance} runs with, from its filled beparams."""
    return beparams_memory(getattr(instance, "beparams", None) or {})


def instance_vcpus(instance: Any) -> int:
    """The virtual CPUs C{instance} runs with, from its filled beparams."""
    return beparams_vcpus(getattr(instance, "beparams", None) or {})


#: hypervisor name -> "module:class"; each class is built as C{cls(paths, reactor)}
#: except the fake one, which needs no reactor
_IMPLEMENTATIONS = {
    HT_FAKE: "ganeti.backend.hypervisor.fake:FakeHypervisor",
    HT_KVM: "ganeti.backend.hypervisor.kvm:KVMHypervisor",
}

_cache: dict[tuple[str, str], tuple[Any, Any]] = {}


def get_hypervisor(name: str, paths: Any, reactor: Any) -> Any:
    """The hypervisor C{name} of the node rooted at C{paths.root}.

    One object per (name, root), made on first use (the KVM module is only
    imported then); asking again with another reactor makes a new one.
    @raise HypervisorError: an unknown hypervisor, or one that cannot load
    """
    if not isinstance(name, str) or name not in _IMPLEMENTATIONS:
        raise HypervisorError("Unknown hypervisor %r" % (name,))
    key = (name, paths.root)
    cached = _cache.get(key)
    if cached is not None and cached[0] is reactor:
        return cached[1]
    module_name, _, class_name = _IMPLEMENTATIONS[name].partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise HypervisorError("Hypervisor %s is not available: %s" % (name, exc)) from None
    instance = cls(paths) if name == HT_FAKE else cls(paths, reactor)
    _cache[key] = (reactor, instance)
    return instance
