"""Run under Ganeti 3.0.2's own Python package (PYTHONPATH): Ganeti's
C{gnt-cluster verify} and C{gnt-cluster verify-disks} (its C{VerifyCluster}
and C{VerifyDisks}) and the watcher's per-group disk check
(C{watcher._VerifyDisks}: OP_GROUP_VERIFY_DISKS at low priority, its
result unpacked, the job archived) against our LuxiD; prints the exit
codes, what they printed and the watcher's job as JSON.

usage: ganeti_verify.py LUXI_SOCKET
"""

import argparse
import json
import sys

import no_pycurl  # noqa: E402,F401  (first: a stand-in for pycurl)

from ganeti import cli, luxi, watcher  # noqa: E402
from ganeti.client import gnt_cluster  # noqa: E402


def main():
    sock = sys.argv[1]
    sys.argv = ["gnt-cluster", "verify"]  # Ganeti's reason trail names the command from argv
    cli.GetClient = gnt_cluster.GetClient = lambda *args, **kwargs: luxi.Client(address=sock)
    printed = []

    def to_stdout(*args):
        printed.append(args[0] % args[1:] if len(args) > 1 else args[0])

    cli.ToStdout = cli.ToStderr = gnt_cluster.ToStdout = gnt_cluster.ToStderr = to_stdout
    generic = dict(debug=0, dry_run=False, priority=None, reason=None, print_jobid=False, submit_only=False)
    out = {}
    opts = argparse.Namespace(skip_nplusone_mem=False, verbose=False, error_codes=False, simulate_errors=False,
                              ignore_errors=[], nodegroup=None, verify_clutter=False, **generic)
    out["verify_exit"] = gnt_cluster.VerifyCluster(opts, [])
    out["verify"], printed[:] = list(printed), []
    out["verify_disks_exit"] = gnt_cluster.VerifyDisks(argparse.Namespace(nodegroup=None, **generic), [])
    out["verify_disks"] = list(printed)
    cl = luxi.Client(address=sock)
    submitted = []
    submit = cl.SubmitJob
    cl.SubmitJob = lambda ops: submitted.append(submit(ops)) or submitted[-1]
    archive = cl.ArchiveJob
    archived = []

    def archive_job(job_id):
        try:
            archived.append(archive(job_id))
        except Exception as e:
            archived.append("%s: %s" % (type(e).__name__, e))  # the watcher only logs it
            raise
        return archived[-1]

    cl.ArchiveJob = archive_job
    (group_uuid,) = [row[0][1] for row in cl.Query("group", ["uuid"], None).data]
    watcher._VerifyDisks(cl, group_uuid, {}, {})
    out["watcher_jobs"] = len(submitted)
    out["watcher_archived"] = archived
    out["watcher_job"] = cl.QueryJobs(submitted, ["ops", "opresult"])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
