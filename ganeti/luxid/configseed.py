"""The config a job process starts with: the fork server's copy.

Every job process (a spare, L{ganeti.jobs.spare}, or one forked for its
job) needs the config before its job runs, and decoding a config of
10,000 instances takes about half a second of CPU (docs/benchmarks.md,
jobs).  The fork server keeps one copy, L{ConfigSeed}: before each fork
it asks WConfD what changed since the copy's serial (L{ReadConfig} with
C{deltas}: nothing when it is current, the change records after a change,
the whole config only when WConfD no longer keeps them) and brings the
copy forward.  The child inherits it (L{ganeti.jobs.wconfdlink.inherit}),
and its WConfD client's first read gets only what changed since the fork.

The fork server runs no reactor: the exchange is one AMP request on a
blocking Unix socket, connected for it and closed before the fork, with a
timeout.  A WConfD that does not answer is not asked again for
L{RETRY_AFTER} seconds; the children then read the config as before.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any, Callable, cast

from twisted.protocols import amp

from ganeti.objects import ConfigData
from ganeti.wconfd.client import config_of_answer
from ganeti.wconfd.commands import ReadConfig

#: seconds the fork server waits for WConfD's answer
TIMEOUT = 1.0
#: seconds WConfD is left alone after it did not answer
RETRY_AFTER = 5.0


class SeedError(Exception):
    """WConfD could not be asked, or its answer is not one."""


def _read_box(stream: Any, deadline: float) -> dict[bytes, bytes]:
    """One AMP box from C{stream} (keys and values, each behind its 16-bit
    length; an empty key ends it), before C{deadline}."""
    box: dict[bytes, bytes] = {}

    def read(size: int) -> bytes:
        if time.monotonic() > deadline:
            raise SeedError("no whole answer within the timeout")
        data = stream.read(size)
        if len(data) != size:
            raise SeedError("WConfD closed the connection")
        return cast(bytes, data)

    while True:
        (key_size,) = struct.unpack("!H", read(2))
        if key_size == 0:
            return box
        key = read(key_size)
        (value_size,) = struct.unpack("!H", read(2))
        box[key] = read(value_size) if value_size else b""


def ask_config(path: str, copy: ConfigData | None, timeout: float = TIMEOUT) -> dict[str, Any]:
    """L{ReadConfig} from the WConfD listening at C{path}, on a connection of
    its own: what changed since C{copy} (the whole config without one); the
    answer as L{ReadConfig} parses it.

    @raise SeedError: not connected, no answer in time, an error answer, or
        an answer that is not one
    """
    deadline = time.monotonic() + timeout
    arguments: dict[str, Any] = {}
    if copy is not None:
        arguments.update(unless_serial=copy.serial_no, deltas=True)
        if copy.mtime is not None:
            arguments["unless_mtime"] = float(copy.mtime)  # (a config.data may hold a whole number)
    try:
        request = ReadConfig.makeArguments(arguments, None)  # (ValueError on a copy that is not one: a bug)
        request[b"_command"] = ReadConfig.commandName
        request[b"_ask"] = b"1"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)  # (each wait; the whole answer by the deadline)
            sock.connect(path)
            sock.sendall(amp.AmpBox(request).serialize())
            with sock.makefile("rb") as stream:
                box = _read_box(stream, deadline)
    except (OSError, struct.error) as e:
        raise SeedError("cannot ask WConfD at %s: %s" % (path, e)) from e
    if b"_error" in box:
        raise SeedError("WConfD refused: %s" % box.get(b"_error_description", b"?").decode("utf-8", "replace"))
    if box.get(b"_answer") != b"1":
        raise SeedError("not an answer to the request")
    try:
        return dict(ReadConfig.parseResponse(box, None))
    except Exception as e:  # (whatever the argument types raise on junk)
        raise SeedError("WConfD's answer is not a config: %s" % (e,)) from e


class ConfigSeed:
    """The fork server's copy of the config (L{serial}, L{config}), brought
    forward by L{refresh} before each fork."""

    def __init__(self, path: str, timeout: float = TIMEOUT, clock: Callable[[], float] = time.monotonic,
                 ask: Callable[[str, ConfigData | None, float], dict[str, Any]] = ask_config) -> None:
        self.path = path
        self.timeout = timeout
        self.clock = clock
        self._ask = ask
        self.config: ConfigData | None = None
        self._quiet_until = 0.0

    @property
    def serial(self) -> int | None:
        """The copy's serial (C{None} without one)."""
        return self.config.serial_no if self.config is not None else None

    def refresh(self) -> None:
        """Ask WConfD what changed since the copy (or the whole config, without
        one) and bring the copy forward.  WConfD not answering: the copy is
        kept (a child asks for the changes since it), and WConfD left alone
        for L{RETRY_AFTER} seconds; an answer that does not apply to the copy
        (never from WConfD): the copy is dropped, the next refresh reads the
        whole config."""
        now = self.clock()
        if now < self._quiet_until:
            return
        try:
            answer = self._ask(self.path, self.config, self.timeout)
        except Exception:  # (SeedError: WConfD did not answer; anything else: the fork server goes on without)
            self._quiet_until = now + RETRY_AFTER
            return
        try:
            self.config = config_of_answer(answer, self.config)
        except Exception:  # (ValueError, KeyError...: not an answer for this copy) read the whole config next
            self._quiet_until = now + RETRY_AFTER
            self.drop()

    def drop(self) -> None:
        """Forget the copy (an idle fork server keeps none)."""
        self.config = None
