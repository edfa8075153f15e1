"""MonD's data collectors.

A collector has a C{name}, a C{category} (C{None} for Ganeti's "default"),
a C{kind} (L{KIND_PERF} or L{KIND_STATUS}) and a C{collect(view)} method
that returns the report's C{data} (or a Deferred of it) and raises
L{CollectorError} with a status code when it cannot.  The service runs
collectors on timers and keeps their reports in a cache; a request only
reads that cache.  C{present(data, verbose)} is what a request sees:
status collectors keep Ganeti's field set unless C{verbose=1} asks for
their details.
"""

from __future__ import annotations

from typing import Any

import attrs

from ganeti.mond.report import KIND_PERF, KIND_STATUS, STATUS_BAD, VERSION_BUILTIN

__all__ = ["ClusterView", "Collector", "CollectorError", "KIND_PERF", "KIND_STATUS"]


class CollectorError(Exception):
    """A collector cannot produce its data; C{code} is the status to report."""

    def __init__(self, message: str, code: int = STATUS_BAD) -> None:
        super().__init__(message)
        self.code = code


@attrs.frozen
class ClusterView:
    """What MonD knows of the cluster, as of its last configuration refresh.

    @ivar node: this node's name
    @ivar master: whether this node is the master (it runs the master daemons)
    @ivar candidate: whether this node is a master candidate (it runs RAPI too)
    @ivar hypervisors: the enabled hypervisors
    @ivar file_storage_dir: cluster-wide path of file disks ("" : none)
    @ivar shared_file_storage_dir: likewise for sharedfile disks
    @ivar instances: the node's primary instances, each a dict with
        C{name uuid admin_state hypervisor mtime memory vcpus state_reason}
    @ivar source: where the instance list came from (C{confd},
        C{config replica}, C{cache}, C{none})
    @ivar stale: why the view may be out of date ("" : it is current)
    """

    node: str = ""
    master: bool = False
    candidate: bool = False
    hypervisors: tuple[str, ...] = ()
    file_storage_dir: str = ""
    shared_file_storage_dir: str = ""
    instances: tuple[dict[str, Any], ...] = ()
    source: str = "none"
    stale: str = ""
    interval: float = 5.0


class Collector:
    """Base class: subclasses set the class attributes and C{collect}."""

    name: str = ""
    category: str | None = None
    kind: int = KIND_PERF
    version: str = VERSION_BUILTIN
    format_version: int = 1

    def available(self, view: ClusterView) -> bool:
        """Whether this collector applies to the node (e.g. its hypervisor is enabled)."""
        return True

    def collect(self, view: ClusterView) -> Any:
        raise NotImplementedError

    def present(self, data: Any, verbose: bool) -> Any:
        return data

    def stop(self) -> None:
        """MonD stops: end whatever this collector still runs."""
