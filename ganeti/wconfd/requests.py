"""Answers of applied requests, so that a retried request is not applied twice.

A client of WConfD numbers its mutating calls (a request id, increasing for
each call of a client); when the connection breaks before the answer came
back, the client sends the same call with the same id again.  WConfD keeps
the answer of the last requests of each owner: a retry of one of those gets
the recorded answer, and nothing is applied a second time.

The answers are kept durably with the change they answer (in the same
journal record, see L{ganeti.wconfd.service}); this module is the pure
table, and the shape of each kind of answer: no Twisted, no I/O.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable

from ganeti import errors
from ganeti.locking import Owner

#: answers kept per owner (a client has at most a few calls in flight)
WINDOW = 64

Answer = dict[str, Any]


def write_answer(serial: int) -> Answer:
    """The answer of L{ganeti.wconfd.service.WConfdService.write_config} on the wire."""
    return {"serial_no": serial}


def update_answer(stored: Any, serial: int) -> Answer:
    """The answer of L{ganeti.wconfd.service.WConfdService.update_entity} on the wire."""
    return {"serial_no": stored.serial_no, "mtime": stored.mtime, "config_serial": serial}


def add_answer(stored: Any, serial: int) -> Answer:
    """The answer of L{ganeti.wconfd.service.WConfdService.add_entity} on the wire."""
    return {"uuid": stored.uuid, "config_serial": serial}


def config_serial(answer: Any) -> int | None:
    """The config serial a recorded answer of a config change names (C{None}: a lock answer)."""
    if not isinstance(answer, dict):
        return None
    serial = answer.get("config_serial")
    if serial is None and set(answer) == {"serial_no"}:
        serial = answer["serial_no"]  # L{write_answer}
    return serial if isinstance(serial, int) else None


def blockers_answer(blockers: Iterable[Owner]) -> Answer:
    """The answer of a lock call that names the owners in the way."""
    return {"blockers": [b.to_wire() for b in blockers]}


def remove_answer(serial: int) -> Answer:
    """The answer of L{ganeti.wconfd.service.WConfdService.remove_entity} on the wire."""
    return {"config_serial": serial}


class RequestLog:
    """The recorded answers of each owner's last L{WINDOW} requests."""

    def __init__(self, window: int = WINDOW) -> None:
        if window < 1:
            raise ValueError("the window must hold at least one answer")
        self.window = window
        self._answers: dict[Owner, OrderedDict[int, Any]] = {}

    def answer(self, owner: Owner, rid: int) -> Any:
        """The recorded answer of C{owner}'s request C{rid}, or C{None}."""
        answers = self._answers.get(owner)
        if answers is None:
            return None
        return answers.get(rid)

    def record(self, owner: Owner, rid: int, answer: Any) -> None:
        """Remember that C{owner}'s request C{rid} was applied with C{answer}.

        @param answer: any JSON value except C{None}.
        """
        if answer is None:
            raise ValueError("an answer cannot be None")
        answers = self._answers.setdefault(owner, OrderedDict())
        answers[rid] = answer
        answers.move_to_end(rid)
        while len(answers) > self.window:
            answers.popitem(last=False)

    def forget(self, owner: Owner) -> None:
        """Drop C{owner}'s answers (it is dead: it will not retry)."""
        self._answers.pop(owner, None)

    def owners(self) -> list[Owner]:
        return list(self._answers)

    def __len__(self) -> int:
        return sum(len(a) for a in self._answers.values())

    def to_data(self) -> list[Any]:
        """JSON form: C{[[owner, [[rid, answer], ...]], ...]}."""
        return [[owner.to_wire(), [[rid, answer] for rid, answer in answers.items()]] for owner, answers in self._answers.items()]

    def load(self, data: Any) -> None:
        """Add the answers of L{to_data}'s form; bad entries are skipped."""
        if not isinstance(data, list):
            return
        for entry in data:
            try:
                owner = Owner.from_wire(entry[0])
                pairs: Iterable[Any] = entry[1]
                for rid, answer in pairs:
                    if isinstance(rid, int) and answer is not None:
                        self.record(owner, rid, answer)
            except (TypeError, ValueError, IndexError, KeyError, errors.GenericError):
                continue
