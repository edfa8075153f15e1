"""Job filter rules in LuxiD: the rules the scheduler applies, and their LUXI methods.

LuxiD reads the rules from config.data (through WConfD) when it connects
to WConfD (again after WConfD restarts) and after every change it makes;
L{FilterTable} holds them in evaluation order for
L{ganeti.jobs.scheduler.schedule}.  The LUXI methods C{ReplaceFilter},
C{DeleteFilter} and C{QueryFilters} (L{FilterMethods}, a part of
L{ganeti.luxid.handler.LuxiHandler}) work as Ganeti's LuxiD: a change goes
straight to WConfD, not through the job queue, so a rule can always be
lifted, and the scheduler runs again at once.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Protocol

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from ganeti import errors
from ganeti.jobs import filtering
from ganeti.objects import ConfigData, new_uuid
from ganeti.query import engine, qlang
from ganeti.query.fields import RS_NORMAL, QueryContext

#: the reason trail entry LuxiD adds to every rule it stores (Ganeti's)
LUXID_REASON_SOURCE = "luxid"


class FilterTable:
    """The job filter rules LuxiD applies, in evaluation order."""

    log = Logger()

    def __init__(self, changed: Callable[[], Any] = lambda: None) -> None:
        """@param changed: called when the rules changed (LuxiD schedules again)."""
        self.rules: list[filtering.FilterRule] = []
        self._stored: dict[str, Any] = {}
        self._changed = changed

    def load(self, stored: Mapping[str, Any]) -> bool:
        """Take the rules of config.data's C{filters}; whether they changed.
        A rule that cannot be read is left out, with a warning."""
        stored = dict(stored)
        if stored == self._stored:
            return False
        rules, problems = filtering.rules_from_config(stored)
        for problem in problems:
            self.log.warn("ignoring a job filter rule: {problem}", problem=problem)
        self.rules, self._stored = rules, stored
        self._changed()
        return True

    async def refresh(self, wconfd: Any) -> bool:
        """Read the rules from WConfD; whether they changed (C{False} on failure, logged)."""
        try:
            config = await wconfd.read_config()
        except Exception:
            self.log.failure("cannot read the job filter rules from WConfD")
            return False
        return self.load(config.filters)

    async def follow(self, wconfd: Any) -> None:
        """Read the rules now, and again whenever C{wconfd} reconnects (WConfD restarted)."""
        wconfd.reconnected.append(lambda: Deferred.fromCoroutine(self.refresh(wconfd)))
        await self.refresh(wconfd)


class FilterService(Protocol):
    """What the filter methods need of LuxiD's job service.

    @ivar filters: the rules the scheduler applies (a L{FilterTable}).
    @ivar queue: the job queue (C{serial()}: the newest job id).
    """

    filters: Any
    queue: Any


class FilterMethods:
    """LUXI C{ReplaceFilter}, C{DeleteFilter}, C{QueryFilters} (a mixin of LuxiD's handler)."""

    service: FilterService

    async def config(self) -> ConfigData:
        raise NotImplementedError

    async def _wconfd(self) -> Any:
        raise NotImplementedError

    async def _filters_changed(self) -> None:
        self.service.filters.load((await self.config()).filters)  # (LuxiD schedules again)

    async def luxi_ReplaceFilter(self, uuid: str | None, priority: int, predicates: list[Any], action: Any,
                                 reason: list[Any]) -> str:
        if uuid is None:
            uuid = new_uuid()
        elif not filtering.is_uuid(uuid):
            raise errors.OpPrereqError("Unable to parse UUID %r" % (uuid,), errors.ECODE_INVAL)
        rule = {
            "watermark": self.service.queue.serial(),  # the newest job id
            "priority": filtering.check_priority(priority),
            "predicates": filtering.check_predicates(predicates),
            "action": filtering.check_action(action),
            "reason_trail": filtering.check_reason(reason) + [[LUXID_REASON_SOURCE, "", time.time_ns()]],
            "uuid": uuid,
        }
        await (await self._wconfd()).change_filter(uuid, rule)
        await self._filters_changed()
        return uuid

    async def luxi_DeleteFilter(self, uuid: str) -> None:
        if uuid not in (await self.config()).filters:
            raise errors.OpPrereqError("Filter rule with UUID %s does not exist" % uuid, errors.ECODE_NOENT)
        await (await self._wconfd()).change_filter(uuid, None)
        await self._filters_changed()

    async def luxi_QueryFilters(self, uuids: list[str] | None, fields: list[str]) -> list[list[Any]]:
        resource = engine.get_resource("filter")
        unknown = [name for name in fields if name not in resource.fields]
        if unknown:
            raise errors.OpPrereqError("Unknown output fields selected: %s" % ", ".join(unknown), errors.ECODE_INVAL)
        qfilter = qlang.make_simple_filter("uuid", list(uuids)) if uuids else None
        answer = engine.query("filter", fields, qfilter, QueryContext(config=await self.config()))
        return [[value if status == RS_NORMAL else None for status, value in row] for row in answer["data"]]


__all__ = ["FilterMethods", "FilterTable"]
