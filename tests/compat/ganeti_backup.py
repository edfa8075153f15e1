"""Run under Ganeti 3.0.2's own Python package (PYTHONPATH): Ganeti's
C{gnt-backup export}, C{list}, C{list-fields} and C{remove} against our
LuxiD; prints what happened as JSON.

usage: ganeti_backup.py LUXI_SOCKET INSTANCE NODE
"""

import argparse
import json
import sys

from ganeti import cli, luxi
from ganeti.client import gnt_backup


def main():
    sock, instance, node = sys.argv[1:4]
    printed = []

    def to_stdout(*args):
        printed.append(args[0] % args[1:] if len(args) > 1 else args[0])

    cli.GetClient = gnt_backup.GetClient = lambda *args, **kwargs: luxi.Client(address=sock)
    cli.ToStdout = gnt_backup.ToStdout = to_stdout
    common = dict(submit_only=False, print_jobid=False, dry_run=False, debug=0, priority=None, reason=[],
                  force=True, verbose=False, units=None, separator="|", no_headers=True, output=None, nodes=[])
    out = {}
    opts = argparse.Namespace(node=node, transport_compression="none", shutdown=True, shutdown_timeout=120,
                              remove_instance=False, ignore_remove_failures=False, zero_free_space=False,
                              zeroing_timeout_fixed=None, zeroing_timeout_per_mib=None, long_sleep=True, **common)
    out["export"] = gnt_backup.ExportInstance(opts, [instance])
    out["list"] = gnt_backup.PrintExportList(argparse.Namespace(**common), [])
    out["list_lines"] = [line for line in printed if "|" in line]
    printed[:] = []
    out["fields"] = gnt_backup.ListExportFields(argparse.Namespace(**common), [])
    out["field_lines"] = [line for line in printed if "|" in line]
    out["remove"] = gnt_backup.RemoveExport(argparse.Namespace(**common), [instance])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
