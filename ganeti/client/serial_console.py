"""Attach to a kvm instance's serial console: its qemu's Unix socket.

Ganeti's C{gnt-instance console} runs C{socat STDIO,raw,echo=0,escape=0x1d
UNIX-CONNECT:<socket>} on the primary node over ssh.  The kvm hypervisor
here describes the console as a message plus that command (the
C{InstanceConsole} slots C{message}, C{host}, C{command}); where the socket
is on this machine (every node of a loopback cluster, or the admin logged
in on the node), C{gnt-instance console} attaches itself, as socat would:

  - on a terminal, the terminal goes raw and C{Ctrl-]} (L{ESCAPE}) leaves;
  - otherwise (a pipe, a file) input is copied until its end, then the
    output for L{LINGER} more seconds, so scripts can talk to the guest.

It also ends when qemu closes the socket.  Standard library only.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import termios
import time
import tty
from typing import Any

from ganeti.console_socket import is_local_socket, socket_path

__all__ = ["ESCAPE", "LINGER", "ConsoleError", "attach", "is_local_socket", "socket_path"]

#: Ctrl-], socat's escape=0x1d
ESCAPE = b"\x1d"
#: seconds the output is still copied after the input ended (socat's -t)
LINGER = 0.5
_CHUNK = 65536


class ConsoleError(Exception):
    """The console cannot be attached to; the message says why."""


def attach(path: str, stdin: int | None = None, stdout: int | None = None, linger: float = LINGER) -> int:
    """Copy between the descriptors and the console socket at C{path}
    until the input ends (then L{LINGER}), the escape key on a terminal,
    or qemu hangs up.  Returns 0.

    @raise ConsoleError: the socket cannot be connected to.
    """
    stdin = sys.stdin.fileno() if stdin is None else stdin
    stdout = sys.stdout.fileno() if stdout is None else stdout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as e:
        sock.close()
        raise ConsoleError("Cannot connect to the serial console socket %s: %s" % (path, e.strerror or e)) from None
    terminal = os.isatty(stdin)
    saved = termios.tcgetattr(stdin) if terminal else None
    try:
        if terminal:
            tty.setraw(stdin)
        _copy(sock, stdin, stdout, terminal, linger)
    finally:
        if saved is not None:
            termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
        sock.close()
    return 0


def _copy(sock: socket.socket, stdin: int, stdout: int, terminal: bool, linger: float) -> None:
    reading_input = True
    deadline: float | None = None
    while True:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        if deadline is not None and wait == 0.0:
            return
        sources: list[Any] = [sock] + ([stdin] if reading_input else [])
        ready, _, _ = select.select(sources, [], [], wait)
        if sock in ready:
            data = sock.recv(_CHUNK)
            if not data:
                return                          # qemu closed the console
            _write_all(stdout, data)
        if reading_input and stdin in ready:
            data = os.read(stdin, _CHUNK)
            if terminal and ESCAPE in data:
                data = data.split(ESCAPE, 1)[0]
                if data:
                    sock.sendall(data)
                return
            if not data:
                reading_input = False
                deadline = time.monotonic() + linger
                continue
            sock.sendall(data)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        written = os.write(fd, data)
        data = data[written:]
