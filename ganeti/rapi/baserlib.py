"""The machinery of RAPI resources: routes, the request context, jobs.

A resource is a URI pattern with, per method, an async handler and the
right it needs::

    @route(r"/2/groups/(NAME)/rename", PUT=WRITE)
    async def group_rename(ctx: Context, name: str) -> Any:
        return await ctx.submit("OP_GROUP_RENAME", ctx.body_dict(), static={"group_name": name},
                                resource="r_2_groups_name_rename")

Writes build one opcode from the body plus static values and submit it;
an opcode this cluster does not define answers 501 and submits nothing.
"""

from __future__ import annotations

import re
import time
from typing import Any, Awaitable, Callable, Mapping, TypeVar

import attrs

from ganeti import errors, opcodes
from ganeti.jobs import lifecycle
from ganeti.luxi import jobwait, methods
from ganeti.rapi.http import QueryArgs, bad_request, not_implemented

R = TypeVar("R")

#: who may call a method: anonymous readers (unless authentication is
#: required), users with C{read} or C{write}, users with C{write}
ANON: tuple[str, ...] = ()
READ: tuple[str, ...] = ("read", "write")
WRITE: tuple[str, ...] = ("write",)

#: Ganeti's URI name pattern
NAME = r"[\w\._-]+"

#: seconds one WaitForJobChange of L{Context.wait_for_job} may block
JOB_WAIT_TIMEOUT = 10

REASON_SRC_USER = "gnt:user"
REASON_SRC_RLIB2 = "gnt:library:rlib2"

Handler = Callable[..., Awaitable[Any]]


@attrs.frozen
class Encoded:
    """A handler's answer already encoded as JSON (the server sends C{data} as it is)."""

    data: bytes


@attrs.frozen
class Method:
    handler: Handler
    access: tuple[str, ...]
    doc: str = ""
    #: the opcodes a job submitted by this method holds, in order
    submits: tuple[str, ...] = ()


@attrs.frozen
class Route:
    template: str  # e.g. /2/instances/{name}/startup
    regex: re.Pattern[str]
    methods: dict[str, Method]
    names: tuple[str, ...]


ROUTES: list[Route] = []


def route(
    template: str, submits: Mapping[str, tuple[str, ...]] | None = None, **methods: tuple[str, ...]
) -> Callable[[Handler], Handler]:
    """Register C{handler} for C{template} and the given methods.

    C{template} uses C{{name}}, C{{job_id}} and C{{disk}} placeholders;
    C{submits} maps a method to the opcodes of the job it submits (for the
    OpenAPI document).
    """

    def register(handler: Handler) -> Handler:
        names = tuple(re.findall(r"\{(\w+)\}", template))
        pattern = re.escape(template)
        for name in names:
            part = r"(\d+)" if name in ("job_id", "disk") else "(%s)" % NAME
            pattern = pattern.replace(re.escape("{%s}" % name), part)
        regex = re.compile("^%s$" % pattern)
        doc = (handler.__doc__ or "").strip()
        built = {m: Method(handler, a, doc, tuple((submits or {}).get(m, ()))) for m, a in methods.items()}
        for existing in ROUTES:
            if existing.template == template:
                existing.methods.update(built)
                return handler
        ROUTES.append(Route(template, regex, built, names))
        return handler

    return register


def match(path: str) -> tuple[Route, tuple[str, ...]] | None:
    for r in ROUTES:
        m = r.regex.match(path)
        if m is not None:
            return r, m.groups()
    return None


class Context:
    """One request as handlers see it."""

    def __init__(self, method: str, path: str, args: QueryArgs, body: Any, user: str | None, luxi: Any,
                 clock: Callable[[], float] = time.time) -> None:
        self.method = method
        self.path = path
        self.args = args
        self.body = body
        self.user = user
        self.luxi = luxi
        self.clock = clock

    # --- body ---------------------------------------------------------------
    def body_dict(self) -> dict[str, Any]:
        if self.body is None:
            return {}
        if not isinstance(self.body, dict):
            raise bad_request("Body must be a JSON object (a dictionary), not %s" % type(self.body).__name__)
        return dict(self.body)

    # --- LUXI (calls declared in ganeti.luxi.methods) ----------------------
    async def run(self, request: methods.Request[R]) -> R:
        """A declared LUXI call: C{await ctx.run(methods.QueryTags.call(kind, name))}."""
        result: R = await self.luxi.call(request.method, *request.args)
        return result

    async def run_alone(self, request: methods.Request[R]) -> R:
        """A declared LUXI call on a connection of its own (for calls that wait)."""
        result: R = await self.luxi.call_alone(request.method, *request.args)
        return result

    async def read(self, request: methods.Request[R]) -> R:
        """A read-only call; identical concurrent reads may share one LUXI call (do not modify the result)."""
        read = getattr(self.luxi, "read", None)
        if read is None:
            return await self.run(request)
        result: R = await read(request.method, *request.args)
        return result

    async def shared(self, key: Any, compute: Callable[[], Awaitable[Any]]) -> Any:
        """C{await compute()}, shared by identical concurrent requests when the LUXI pool can.

        C{key} must determine the answer entirely (see L{ganeti.rapi.luxi.LuxiPool.shared});
        do not modify the result.
        """
        shared = getattr(self.luxi, "shared", None)
        if shared is None:
            return await compute()
        return await shared(key, compute)

    # --- jobs ---------------------------------------------------------------
    def reason(self, resource: str) -> list[list[Any]]:
        now = int(self.clock() * 1e9)
        trail: list[list[Any]] = []
        text = self.args.one("reason")
        if text is not None:
            trail.append([REASON_SRC_USER, text, now])
        trail.append(["%s:%s" % (REASON_SRC_RLIB2, resource), "", now])
        return trail

    def opcode(
        self,
        op_id: str,
        body: dict[str, Any] | None = None,
        static: dict[str, Any] | None = None,
        rename: dict[str, str] | None = None,
        resource: str = "",
        dry_run: bool = True,
    ) -> dict[str, Any]:
        """Build and check one opcode (Ganeti's C{FillOpcode}).

        @raise HttpError: 501 if this cluster has no C{op_id}; 400 for a
            static parameter also in the body, a parameter given under two
            names, an unknown parameter or a value of the wrong type.
        """
        opdef = opcodes.OPCODES.get(op_id)
        if opdef is None:
            raise not_implemented(
                "%s is not implemented by this cluster yet (opcode %s does not exist); nothing was submitted"
                % (self.path, op_id)
            )
        params = dict(body or {})
        for old, new in (rename or {}).items():
            if old in params:
                if new in params:
                    raise bad_request("Parameter '%s' was renamed to '%s', but both are given" % (old, new))
                params[new] = params.pop(old)
        for key in static or {}:
            if key in params:
                raise bad_request("Parameter '%s' must not be given in the body" % key)
        params.update(static or {})
        for forbidden in ("OP_ID", "reason"):
            if forbidden in params:
                raise bad_request("Parameter '%s' must not be given" % forbidden)
        known = {p.name for p in opdef.all_params}
        unknown = sorted(k for k in params if k not in known)
        if unknown:
            raise bad_request("Unknown parameter(s) for %s: %s" % (op_id, ", ".join(unknown)))
        if dry_run and "dry-run" in self.args:
            if "dry_run" in params:
                raise bad_request("Parameter 'dry_run' must not be given in the body as well as 'dry-run' in the query")
            params["dry_run"] = self.args.bool("dry-run")
        op = {"OP_ID": op_id, **params, "reason": self.reason(resource)}
        try:
            opcodes.validate(op)
        except errors.OpPrereqError as e:
            raise bad_request(str(e.args[0])) from None
        return op

    async def submit(self, op_id: str, body: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        """Submit a one-opcode job; the answer is the job id."""
        return await self.submit_ops([self.opcode(op_id, body, **kwargs)])

    async def submit_ops(self, ops: list[dict[str, Any]]) -> int:
        return await self.run(methods.SubmitJob.call(ops))

    async def run_job(self, ops: list[dict[str, Any]]) -> list[Any]:
        """Submit a job and wait for it (Ganeti's C{PollJob}): its opcode results.

        @raise errors.GenericError: the error the job failed with (decoded),
            L{errors.OpExecError} if it was canceled, L{errors.JobLost} if
            it disappeared
        """
        return await self.wait_for_job(int(await self.submit_ops(ops)))

    async def wait_for_job(self, job_id: int) -> list[Any]:
        """Wait for job C{job_id} to end (see L{run_job}; L{ganeti.luxi.jobwait.follow})."""
        rows = await jobwait.run_async(jobwait.follow(job_id, JOB_WAIT_TIMEOUT), self._perform)
        ended = jobwait.outcome(job_id, rows)
        if ended.status == lifecycle.SUCCESS:
            return ended.results
        if ended.status == lifecycle.CANCELED:
            raise errors.OpExecError("Job %s was canceled" % job_id)
        if ended.failed is not None:
            raise errors.decode(ended.error)
        raise errors.OpExecError("Job %s failed: %s" % (job_id, ended.results))

    async def _perform(self, request: methods.Request[Any]) -> Any:
        """One call of L{jobwait.follow}: a wait on a connection of its own."""
        if request.method == methods.WaitForJobChange.name:
            return await self.run_alone(request)
        return await self.run(request)
