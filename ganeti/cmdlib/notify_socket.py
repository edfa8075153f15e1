"""The Unix socket handshake of the test opcodes (OP_TEST_DELAY with
C{interruptible}, OP_TEST_JQUEUE), as Ganeti's clients speak it.

The job process listens on a fresh socket in a private temporary
directory and names it in the job log (C{delay-test} or C{jqueue-test}
entries); one client connects, which the job may wait for, then sends a
byte or closes the connection, which the job may wait for too::

    sock = NotifySocket(reactor)
    path = sock.listen()
    try:
        await feedback((path,), ELOG_DELAY_TEST)
        await sock.wait_connected(timeout)      # TimeoutError when nobody came
    finally:
        await sock.close()                      # the socket file and its directory go
    await sock.wait_confirmed(timeout)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from twisted.internet.defer import Deferred, TimeoutError, maybeDeferred
from twisted.internet.protocol import Factory, Protocol

__all__ = ["NotifySocket", "TimeoutError"]


class _Client(Protocol):
    """The one connected client: any byte or the end of the connection confirms."""

    factory: NotifySocket

    def connectionMade(self) -> None:
        self.factory.client_connected(self)

    def dataReceived(self, data: bytes) -> None:
        if data:
            self.factory.client_confirmed()

    def connectionLost(self, reason: Any = None) -> None:
        self.factory.client_confirmed()


class NotifySocket(Factory):
    """A listening Unix socket for one client (see the module docstring).

    @ivar path: the socket's path once L{listen} ran.
    """

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self.path: str | None = None
        self._dir: str | None = None
        self._port: Any = None
        self._client: _Client | None = None
        self._connected: Deferred[None] = Deferred()
        self._confirmed: Deferred[None] = Deferred()

    def listen(self) -> str:
        """Create the directory and listen; the socket's path."""
        self._dir = tempfile.mkdtemp(prefix="ganeti-test-")
        self.path = os.path.join(self._dir, "sock")
        try:
            self._port = self.reactor.listenUNIX(self.path, self, backlog=1)
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        return self.path

    def buildProtocol(self, addr: Any) -> Protocol | None:
        if self._client is not None:
            return None  # one client only: later ones are closed at once
        client = _Client()
        client.factory = self
        return client

    def client_connected(self, client: _Client) -> None:
        self._client = client
        if not self._connected.called:
            self._connected.callback(None)

    def client_confirmed(self) -> None:
        if not self._confirmed.called:
            self._confirmed.callback(None)

    def wait_connected(self, timeout: float) -> Deferred[None]:
        """Fires when the client connected; L{TimeoutError} after C{timeout} s."""
        return self._connected.addTimeout(timeout, self.reactor)

    def wait_confirmed(self, timeout: float) -> Deferred[None]:
        """Fires when the client sent a byte or closed; L{TimeoutError} after C{timeout} s."""
        return self._confirmed.addTimeout(timeout, self.reactor)

    async def close(self) -> None:
        """Stop listening and remove the directory (a connected client stays)."""
        port, self._port = self._port, None
        if port is not None:
            await maybeDeferred(port.stopListening)
        directory, self._dir = self._dir, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)

    def disconnect(self) -> None:
        """Close the client's connection, if there is one."""
        if self._client is not None and self._client.transport is not None:
            self._client.transport.loseConnection()
