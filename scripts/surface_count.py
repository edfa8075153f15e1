"""Count what we have of Ganeti 3.0.2's surface: gnt-* subcommands, opcodes
with a logical unit, node RPC procedures (the plain/DRBD-only ones left out),
and the long options of the subcommands both have.

Run from the checkout: C{.venv/bin/python scripts/surface_count.py} (needs
Ganeti's extracted package in C{.venv/ganeti-3.0}).  Prints the three counts
and what is missing of each.
"""

from __future__ import annotations

import ast
import glob
import importlib
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GANETI = os.path.join(HERE, ".venv/ganeti-3.0/usr/share/ganeti/3.0")
#: Node RPC procedures only plain (LVM) or DRBD disks use: they cannot run on these machines.
PLAIN_DRBD = {"blockdev_addchildren", "blockdev_removechildren", "blockdev_getmirrorstatus",
              "blockdev_getmirrorstatus_multi", "blockdev_pause_resume_sync", "blockdev_open", "blockdev_close",
              "drbd_attach_net", "drbd_disconnect_net", "drbd_helper", "drbd_needs_activation", "drbd_wait_sync",
              "lv_list", "vg_list", "node_volumes"}


def report(what: str, have: set[str], theirs: set[str]) -> None:
    got = have & theirs
    print("%s: %d of %d (%.0f%%)" % (what, len(got), len(theirs), 100.0 * len(got) / len(theirs)))
    print("  missing: %s" % (" ".join(sorted(theirs - have)) or "none"))


def subcommands() -> None:
    theirs: set[str] = set()
    ours: set[str] = set()
    for path in sorted(glob.glob(os.path.join(GANETI, "ganeti/client/gnt_*.py"))):
        module = os.path.basename(path)[:-3]
        tool = module.replace("_", "-")
        for node in ast.walk(ast.parse(open(path).read())):
            if (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "commands" for t in node.targets)
                    and isinstance(node.value, ast.Dict)):
                theirs.update("%s %s" % (tool, k.value) for k in node.value.keys if isinstance(k, ast.Constant))
        try:
            mine = getattr(importlib.import_module("ganeti.client." + module), "COMMANDS", {})
        except ImportError:
            mine = {}
        ours.update("%s %s" % (tool, name) for name in mine)
    report("gnt-* subcommands", ours, theirs)


def opcodes() -> None:
    source = open(os.path.join(GANETI, "ganeti/opcodes.py")).read()
    names = [m.group(1) for m in re.finditer(r"^class Op(\w+)\(", source, re.M)]
    theirs = {"OP_" + re.sub(r"(?<!^)(?=[A-Z])", "_", n).upper() for n in names
              if n not in ("Code", "InstanceMultiAllocBase")}
    from ganeti.cmdlib import REGISTRY

    report("opcodes with a logical unit", set(REGISTRY), theirs)


def procedures() -> None:
    listed = subprocess.check_output([sys.executable, "-c", (
        "import json, sys; sys.path.insert(0, %r); from ganeti import rpc_defs; "
        "print(json.dumps(sorted(c[0] for calls in rpc_defs.CALLS.values() for c in calls.values())))") % GANETI],
        cwd="/")
    theirs = set(json.loads(listed))
    from ganeti.rpc import procedures as ours

    report("node RPC procedures", set(ours.TABLE.names()), theirs)
    report("node RPC procedures, plain/DRBD-only left out", set(ours.TABLE.names()), theirs - PLAIN_DRBD)


def long_options() -> None:
    import argparse

    listed = subprocess.check_output([sys.executable, "-c", (
        "import glob, json, os, sys, importlib; sys.path.insert(0, %r); out = {}\n"
        "for f in sorted(glob.glob(%r + '/ganeti/client/gnt_*.py')):\n"
        "    mod = os.path.basename(f)[:-3]; m = importlib.import_module('ganeti.client.' + mod)\n"
        "    for name, spec in getattr(m, 'commands', {}).items():\n"
        "        out[mod.replace('_', '-') + ' ' + name] = sorted(s for o in spec[2] for s in o._long_opts)\n"
        "print(json.dumps(out))") % (GANETI, GANETI)], cwd="/")
    theirs = json.loads(listed)
    from ganeti.client.launch import TOOLS

    have: set[str] = set()
    known: set[str] = set()
    for tool, module in TOOLS.items():
        try:
            commands = getattr(importlib.import_module(module), "COMMANDS", {})
        except (ImportError, TypeError):
            continue
        for name, command in commands.items():
            if "%s %s" % (tool, name) not in theirs:
                continue
            parser = argparse.ArgumentParser(add_help=False)
            if command.setup:
                command.setup(parser)
            taken = {o for a in parser._actions for o in a.option_strings} | {"--debug", "--help", "--reason"}
            for option in theirs["%s %s" % (tool, name)]:
                known.add("%s %s %s" % (tool, name, option))
                if option in taken:
                    have.add("%s %s %s" % (tool, name, option))
    report("long options of the subcommands both have", have, known)


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    subcommands()
    opcodes()
    procedures()
    long_options()
