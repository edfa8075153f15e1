"""The OS parts of OP_CLUSTER_SET_PARAMS (C{gnt-os modify}): per-OS
hypervisor parameters (C{os_hvp}), OS parameters (C{osparams}) and the
hidden and blacklisted OS lists, changed as Ganeti changes them.

Pure functions of the current value and the opcode's change; the LU
(L{ganeti.cmdlib.cluster.LUClusterSetParams}) checks and applies them.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Mapping

from ganeti import errors

#: Ganeti's C{DDM_ADD} and C{DDM_REMOVE}: the actions of C{hidden_os} and C{blacklisted_os}
DDM_ADD, DDM_REMOVE = "add", "remove"
#: a parameter given this value (or null) is removed
VALUE_DEFAULT = "default"


def check_os_hvp(given: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """C{{os: {hypervisor: params or None}}} with each hypervisor's
    parameters typed (None removes the OS's entry for that hypervisor)."""
    from ganeti.cmdlib import instance_params

    out: dict[str, dict[str, Any]] = {}
    for os_name, hvs in given.items():
        if not isinstance(hvs, dict):
            raise errors.OpPrereqError("Invalid hypervisor parameters of OS %s: %r (a dict of hypervisor: "
                                       "parameters)" % (os_name, hvs), errors.ECODE_INVAL)
        out[os_name] = {hv: None if params is None else
                        instance_params.check_hvparams_by_hypervisor({hv: params}, allow_default=False)[hv]
                        for hv, params in hvs.items()}
    return out


def os_hvp_changed(current: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The cluster's C{os_hvp} after C{given}: a new OS takes its dict, a
    known one has each hypervisor's parameters updated (None removes one);
    an OS left without any is dropped."""
    out = copy.deepcopy(dict(current))
    for os_name, hvs in given.items():
        if os_name not in out:
            out[os_name] = {hv: dict(params) for hv, params in hvs.items() if params is not None}
            continue
        for hv, params in hvs.items():
            if params is None:
                out[os_name].pop(hv, None)
            else:
                out[os_name][hv] = dict(out[os_name].get(hv) or {}, **params)
    return {os_name: hvs for os_name, hvs in out.items() if hvs}


def osparams_changed(current: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The cluster's C{osparams} after C{given}: each OS's parameters
    updated, C{default} or null removing one; an OS left without any is dropped."""
    out = copy.deepcopy(dict(current))
    for os_name, params in given.items():
        if not isinstance(params, dict):
            raise errors.OpPrereqError("Invalid OS parameters of OS %s: %r (a dict)" % (os_name, params),
                                       errors.ECODE_INVAL)
        merged = dict(out.get(os_name) or {})
        for key, value in params.items():
            if value is None or value == VALUE_DEFAULT:
                merged.pop(key, None)
            else:
                merged[key] = value
        if merged:
            out[os_name] = merged
        else:
            out.pop(os_name, None)
    return out


def check_os_mods(mods: Any, what: str) -> list[list[Any]]:
    """C{[[add|remove, os name], ...]} of C{hidden_os} or C{blacklisted_os}."""
    out = []
    for mod in mods:
        action, name = mod
        if action not in (DDM_ADD, DDM_REMOVE):
            raise errors.OpPrereqError("Invalid modification '%s' of the %s OS list (add or remove)"
                                       % (action, what), errors.ECODE_INVAL)
        out.append([action, name])
    return out


def os_list_changed(current: list[str], mods: list[list[Any]], what: str,
                    feedback: Callable[[str], Any]) -> list[str]:
    """The C{hidden_os} or C{blacklisted_os} list after C{mods}; what is
    there already or missing is ignored with a message, as Ganeti does."""
    out = list(current)
    for action, name in mods:
        if action == DDM_ADD:
            if name in out:
                feedback("OS %s already in %s OS list, ignoring" % (name, what))
            else:
                out.append(name)
        elif name in out:
            out.remove(name)
        else:
            feedback("OS %s not found in %s OS list, ignoring" % (name, what))
    return out


__all__ = ["DDM_ADD", "DDM_REMOVE", "check_os_hvp", "check_os_mods", "os_hvp_changed", "os_list_changed",
           "osparams_changed"]
