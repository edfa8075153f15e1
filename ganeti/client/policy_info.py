"""Commands that show instance policies and search tags, with Ganeti's output:

    gnt-cluster search-tags PATTERN      every object's tags matching a regex
    gnt-cluster show-ispecs-cmd          the gnt-cluster init options of the policy
    gnt-group info [GROUP...]            a group's parameters and policy
    gnt-group show-ispecs-cmd [GROUP...] the gnt-group add options of their policies

Imported only when one of them runs (L{ganeti.client.command.Command}'s
lazy functions).
"""

from __future__ import annotations

import argparse
from typing import Any, Mapping

from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Context

#: Ganeti's names of the policy's parts
MINMAX, STD, DISK_TEMPLATES = "minmax", "std", "disk-templates"
#: the min/max keys and the ratio parameters, in the order they are shown
#: (Ganeti's order depends on a frozenset's hash, so varies between runs)
MINMAX_KEYS = ("min", "max")
RATIOS = ("spindle-ratio", "vcpu-ratio")


# --- search-tags ----------------------------------------------------------------------------
def search_tags(ctx: Context, opts: argparse.Namespace) -> int:
    """Print C{PATH TAG} for every tag matching the pattern; exit 1 if none."""
    from ganeti.client.jobs import opcode, submit_opcodes

    (found,) = submit_opcodes(ctx, [opcode(ctx, "OP_TAGS_SEARCH", pattern=opts.pattern)])
    if not found:
        return EXIT_FAILURE
    for path, tag in sorted(tuple(entry) for entry in found):
        ctx.out("%s %s" % (path, tag))
    return EXIT_SUCCESS




# --- --ipolicy-bounds-specs -----------------------------------------------------------------------
#: the parameters of an instance spec, and those given in MiB (units allowed)
ISPEC_PARAMETERS = ("cpu-count", "disk-count", "disk-size", "memory-size", "nic-count", "spindle-use")
ISPEC_SIZES = ("disk-size", "memory-size")


def bounds_specs(text: str) -> list[dict[str, Any]]:
    """argparse type of C{--ipolicy-bounds-specs}: C{min:k=v,.../max:k=v,...},
    more pairs separated by C{//}; each spec complete, as Ganeti requires."""
    from ganeti.client.instance_opts import parse_size

    pairs = []
    for pair in text.split("//"):
        specs: dict[str, Any] = {}
        for part in pair.split("/"):
            key, sep, values = part.partition(":")
            if key not in MINMAX_KEYS or not sep:
                raise argparse.ArgumentTypeError("Invalid key in bounds instance specifications: %s" % key)
            if key in specs:
                raise argparse.ArgumentTypeError("%s given twice in %r" % (key, pair))
            spec: dict[str, int] = {}
            for item in values.split(","):
                name, eq, value = item.partition("=")
                if name not in ISPEC_PARAMETERS or not eq:
                    raise argparse.ArgumentTypeError("Invalid parameter %r in %s instance specs (known: %s)"
                                                     % (item, key, ", ".join(ISPEC_PARAMETERS)))
                try:
                    spec[name] = parse_size(value) if name in ISPEC_SIZES else int(value)
                except ValueError as e:
                    raise argparse.ArgumentTypeError("Invalid parameter %s (%s) in %s instance specs: %s"
                                                     % (name, value, key, e)) from None
            missing = [name for name in ISPEC_PARAMETERS if name not in spec]
            if missing:
                raise argparse.ArgumentTypeError("Missing parameters in ipolicy spec %s: %s"
                                                 % (key, ", ".join(missing)))
            specs[key] = spec
        if set(specs) != set(MINMAX_KEYS):
            raise argparse.ArgumentTypeError("Each bounds pair needs both min and max: %r" % pair)
        pairs.append(specs)
    return pairs


# --- the command line of a policy --------------------------------------------------------------
def _specs(specs: Mapping[str, Any]) -> str:
    return ",".join("%s=%s" % (key, specs[key]) for key in sorted(specs))


def ispecs_options(ipolicy: Mapping[str, Any], group: bool) -> str:
    """The C{--ipolicy-std-specs} (cluster only) and C{--ipolicy-bounds-specs}
    options that create C{ipolicy} (Ganeti's layout, one leading space each)."""
    out = []
    std = ipolicy.get(STD)
    if not group and std:
        out.append(" --ipolicy-std-specs %s" % _specs(std))
    bounds = ["min:%s/max:%s" % (_specs(mm["min"]), _specs(mm["max"]))
              for mm in ipolicy.get(MINMAX) or [] if mm.get("min") and mm.get("max")]
    if bounds:
        out.append(" --ipolicy-bounds-specs %s" % "//".join(bounds))
    return "".join(out)


def show_cluster_ispecs(ctx: Context, opts: argparse.Namespace) -> int:
    info = ctx.client().query_cluster_info()
    ctx.out("gnt-cluster init%s %s" % (ispecs_options(info.get("ipolicy") or {}, False), info["name"]))
    return EXIT_SUCCESS


def show_group_ispecs(ctx: Context, opts: argparse.Namespace) -> int:
    field = "ipolicy" if opts.include_defaults else "custom_ipolicy"
    for name, ipolicy in ctx.client().query_groups(opts.groups, ["name", field], False):
        ctx.out("gnt-group add%s %s" % (ispecs_options(ipolicy or {}, True), name))
    return EXIT_SUCCESS




# --- gnt-group info -------------------------------------------------------------------------------
def params_info(own: Mapping[str, Any], actual: Mapping[str, Any]) -> dict[str, Any]:
    """Each parameter of C{actual}: its own value, else C{default (VALUE)};
    nested dicts likewise (Ganeti's C{FormatParamsDictInfo})."""
    out: dict[str, Any] = {}
    for key, value in actual.items():
        if isinstance(value, dict) and value:
            out[key] = params_info(own.get(key) or {}, value)
        else:
            out[key] = str(own[key]) if key in own else "default (%s)" % (value,)
    return out


def policy_info(own: Mapping[str, Any], effective: Mapping[str, Any], cluster: bool) -> list[tuple[str, Any]]:
    """An instance policy as Ganeti's C{FormatPolicyInfo} lays it out."""
    if cluster:
        effective = own
    bounds = own.get(MINMAX) or effective.get(MINMAX) or []
    custom = bool(own.get(MINMAX))
    minmax = [[("%s/%d" % (key, index), params_info(mm[key] if custom else {}, mm[key])) for key in MINMAX_KEYS]
              for index, mm in enumerate(bounds)]
    out: list[tuple[str, Any]] = [("bounds specs", minmax)]
    if cluster:
        out.append((STD, params_info(own.get(STD) or {}, own.get(STD) or {})))
    templates = own.get(DISK_TEMPLATES)
    out.append(("allowed disk templates", ", ".join(templates) if templates is not None
                else "default (%s)" % ", ".join(effective.get(DISK_TEMPLATES) or [])))
    out.extend((key, str(own[key]) if key in own else "default (%s)" % (effective.get(key),)) for key in RATIOS)
    return out


GROUP_INFO_FIELDS = ["name", "ndparams", "custom_ndparams", "diskparams", "custom_diskparams", "ipolicy",
                     "custom_ipolicy"]


def group_info(ctx: Context, opts: argparse.Namespace) -> int:
    from ganeti.client.formatting import format_generic_info

    rows = ctx.client().query_groups(opts.groups, GROUP_INFO_FIELDS, False)
    groups = []
    for name, ndparams, own_nd, diskparams, own_disk, ipolicy, own_ipolicy in rows:
        groups.append([
            ("Node group", name),
            ("Node parameters", params_info(own_nd or {}, ndparams or {})),
            ("Disk parameters", params_info(own_disk or {}, diskparams or {})),
            ("Instance policy", policy_info(own_ipolicy or {}, ipolicy or {}, False)),
        ])
    if groups:
        ctx.out(format_generic_info(groups))
    return EXIT_SUCCESS




__all__ = ["group_info", "ispecs_options", "params_info", "policy_info", "search_tags", "show_cluster_ispecs",
           "show_group_ispecs"]
