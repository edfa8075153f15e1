"""Many jobs at once: submit them together, then follow each to its end.

What Ganeti's C{JobExecutor} prints, for the commands that act on several
instances (C{gnt-instance startup --all}) and for the follow-up jobs of
C{gnt-node evacuate|migrate}::

    Submitted jobs 12, 13                       (only when verbose)
    Waiting for job 12 for web1 ...
    <the job's log lines>
    Job 13 for web2 has failed: Failure: ...    (stderr)

With C{--submit} nothing is followed: each job prints as C{12: web1}.
"""

from __future__ import annotations

from typing import Any

from ganeti import cli, errors


class JobExecutor:
    """Queue jobs (or adopt ones already submitted), then wait for them.

    @param verbose: announce the submitted job ids.
    """

    def __init__(self, ctx: cli.Context, verbose: bool = True) -> None:
        self.ctx = ctx
        self.verbose = verbose
        self._queue: list[tuple[str | None, list[dict[str, Any]]]] = []
        #: (name, submitted, job id or error message)
        self.jobs: list[tuple[str | None, bool, Any]] = []

    def queue_job(self, name: str | None, *ops: dict[str, Any]) -> None:
        self._queue.append((name, list(ops)))

    def add_job_id(self, name: str | None, submitted: bool, job_id: Any) -> None:
        """Follow a job submitted elsewhere (C{[ok, id or error]} of a result)."""
        self.jobs.append((name, bool(submitted), job_id))

    def submit_pending(self) -> None:
        """Submit the queued jobs in one C{SubmitManyJobs}."""
        if not self._queue:
            return
        queue, self._queue = self._queue, []
        answers = self.ctx.client().submit_many_jobs([ops for _, ops in queue])
        for (name, _), (ok, value) in zip(queue, answers):
            self.jobs.append((name, bool(ok), value))
            if ok and getattr(self.ctx.opts, "print_jobid", False):
                self.ctx.out("%s" % value)

    @staticmethod
    def _for(name: str | None) -> str:
        return " for %s" % name if name else ""

    def get_results(self) -> list[tuple[bool, Any]]:
        """Follow every job; C{[(success, opcode results or error text), ...]} in order."""
        self.submit_pending()
        if self.verbose:
            ok_ids = [str(value) for _, ok, value in self.jobs if ok]
            if ok_ids:
                self.ctx.out("Submitted jobs %s" % ", ".join(ok_ids))
        results: list[tuple[bool, Any]] = []
        for name, ok, value in self.jobs:
            if not ok:
                self.ctx.err("Failed to submit job%s: %s" % (self._for(name), value))
                results.append((False, value))
                continue
            self.ctx.out("Waiting for job %s%s ..." % (value, self._for(name)))
            try:
                results.append((True, cli.poll_job(self.ctx.client(), value, cli.JobReporter(self.ctx))))
            except errors.JobLost as e:
                self.ctx.err("Job %s%s has been archived, cannot check its result" % (value, self._for(name)))
                results.append((False, cli.format_error(e)[1]))
            except errors.GenericError as e:
                text = cli.format_error(e)[1]
                self.ctx.err("Job %s%s has failed: %s" % (value, self._for(name), text))
                results.append((False, text))
        return results

    def wait_or_show(self, wait: bool) -> list[tuple[bool, Any]]:
        """Follow the jobs, or (C{--submit}) print C{id: name} for each."""
        if wait:
            return self.get_results()
        self.submit_pending()
        for name, ok, value in self.jobs:
            if ok:
                self.ctx.out("%s: %s" % (value, name) if name else "%s" % value)
            else:
                self.ctx.err("Failure for %s: %s" % (name, value))
        return [(ok, value) for _, ok, value in self.jobs]


def follow_up_jobs(ctx: cli.Context, result: Any) -> list[tuple[bool, Any]]:
    """Wait for the jobs an opcode result lists (C{{"jobs": [[ok, id], ...]}})."""
    executor = JobExecutor(ctx)
    jobs = result.get("jobs") if isinstance(result, dict) else None
    for entry in jobs or []:
        if isinstance(entry, (list, tuple)) and len(entry) == 2:
            executor.add_job_id(None, entry[0], entry[1])
    return executor.get_results()
