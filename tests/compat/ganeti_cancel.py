"""Run under Ganeti 3.0.2's own Python package (PYTHONPATH): Ganeti's
C{gnt-debug test-jobqueue} submission and dependency checks and C{gnt-job
cancel [--kill --yes-do-it] JOB_ID}, against our LuxiD; prints what
happened as JSON.

usage: ganeti_cancel.py LUXI_SOCKET JOB_ID
"""

import argparse
import json
import sys

from ganeti import cli, errors, luxi
from ganeti.client import gnt_debug, gnt_job


def main():
    sock, job_id = sys.argv[1], sys.argv[2]
    out = {}
    cli.GetClient = lambda *args, **kwargs: luxi.Client(address=sock)
    printed = []
    cli.ToStdout = gnt_debug.ToStdout = lambda *args: printed.append(args[0] % args[1:] if len(args) > 1 else args[0])
    try:
        gnt_debug._TestJobSubmission(argparse.Namespace(debug=False))
        out["submission"] = "ok"
    except errors.GenericError as e:
        out["submission"] = "%s: %s" % (type(e).__name__, e)
    try:
        gnt_debug._TestJobDependency(argparse.Namespace(debug=False))
        out["dependency"] = "ok"
    except errors.GenericError as e:
        out["dependency"] = "%s: %s" % (type(e).__name__, e)
    opts = argparse.Namespace(kill=False, yes_do_it=False, status_filter=None, force=True)
    try:
        gnt_job.CancelJobs(argparse.Namespace(**dict(vars(opts), kill=True)), [job_id], cl=luxi.Client(address=sock))
    except errors.OpPrereqError as e:
        out["kill_unconfirmed"] = e.args[0]
    lines = []
    out["plain_exit"] = gnt_job.CancelJobs(opts, [job_id], cl=luxi.Client(address=sock), _stdout_fn=lines.append)
    out["plain"] = lines
    lines = []
    opts = argparse.Namespace(kill=True, yes_do_it=True, status_filter=None, force=True)
    out["kill_exit"] = gnt_job.CancelJobs(opts, [job_id], cl=luxi.Client(address=sock), _stdout_fn=lines.append)
    out["kill"] = lines
    out["printed"] = printed
    print(json.dumps(out))


if __name__ == "__main__":
    main()
