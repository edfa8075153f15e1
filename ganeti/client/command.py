"""What a gnt-* subcommand is, and the context it runs with.

Each tool is a dict of subcommands, name -> L{Command}, run by
L{ganeti.client.runner.run}::

    COMMANDS = {"delay": Command(delay, _setup_delay, "Executes a TestDelay OpCode")}

A command function takes a L{Context} and the parsed options and returns
the exit status (L{EXIT_SUCCESS} ...; C{None} means 0).  The LUXI client
(with the path layout) is imported on the first call that needs the master
daemon, so C{--help} and bad usage never pay for it.

Exit statuses: 0 success, 1 failure, 2 bad usage (nothing was sent),
13 confirmation refused (Ganeti's values; 14, an unknown query field, is
L{ganeti.client.formatting.EXIT_UNKNOWN_FIELD}).  Standard library only.
"""

from __future__ import annotations

import argparse

from ganeti.lighttyping import cast

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, TextIO

    from ganeti.luxi.client import LuxiClient

EXIT_SUCCESS = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_CONFIRMATION = 13



class ParserExit(Exception):
    """The command line was refused, or C{--help} shown: exit with C{status}."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class Command:
    """One subcommand of a tool.

    @ivar func: the function, or C{"module:function"} imported when run.
    @ivar setup: adds the subcommand's options and arguments to its parser.
    @ivar help: one line for the command list, and the start of C{--help}.
    @ivar description: more text for C{--help}.

    A plain class, not a C{NamedTuple}: every tool builds dozens at start,
    and a C{NamedTuple} compiles its postponed annotations when defined.
    """

    __slots__ = ("func", "setup", "help", "description")

    def __init__(self, func: CommandFunc | str, setup: Callable[[argparse.ArgumentParser], None] | None,
                 help: str, description: str = "") -> None:  # noqa: A002  (Ganeti's word)
        self.func = func
        self.setup = setup
        self.help = help
        self.description = description

    def __repr__(self) -> str:
        return "Command(%r, %r, %r)" % (self.func, self.setup, self.help)

    def resolve(self) -> CommandFunc:
        if isinstance(self.func, str):
            import importlib

            module, _, name = self.func.partition(":")
            return cast("CommandFunc", getattr(importlib.import_module(module), name))
        return self.func


class Context:
    """What a command runs with: its options, output streams and client."""

    def __init__(
        self,
        prog: str,
        command: str,
        opts: argparse.Namespace,
        stdout: TextIO,
        stderr: TextIO,
        client_factory: Callable[[Context], Any] | None = None,
        parser: argparse.ArgumentParser | None = None,
    ) -> None:
        self.prog = prog
        self.parser = parser
        self.command = command
        self.opts = opts
        self.stdout = stdout
        self.stderr = stderr
        self._client_factory = client_factory
        self._client: LuxiClient | None = None

    def usage_error(self, message: str) -> None:
        """Reject the command line: usage and C{message} on stderr, exit status 2."""
        if self.parser is None:
            self.err("%s %s: error: %s" % (self.prog, self.command, message))
            raise ParserExit(EXIT_USAGE)
        self.parser.error(message)

    @property
    def root(self) -> str | None:
        return getattr(self.opts, "root", None)

    def client(self) -> LuxiClient:
        """The LUXI client, made on first use: its methods are the declared
        LUXI calls (L{ganeti.luxi.methods}), which mypy checks.  By default a
        L{ganeti.luxi.master.MasterClient}: it finds the master wherever it is
        and waits for a new one across a failover."""
        if self._client is None:
            if self._client_factory is not None:
                self._client = self._client_factory(self)
            else:
                from ganeti.luxi.master import MasterClient
                from ganeti.paths import Paths

                # rides through a master failover, saying once on stderr that it waits
                self._client = MasterClient(Paths.from_option(self.root), on_wait=self.err)
        return self._client

    def close(self) -> None:
        client: Any = self._client
        self._client = None
        if client is not None and hasattr(client, "close"):
            client.close()

    def out(self, text: str = "") -> None:
        """Print a line on stdout, at once (Ganeti's C{ToStdout})."""
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def err(self, text: str) -> None:
        """Print a line on stderr (Ganeti's C{ToStderr})."""
        self.stderr.write(text + "\n")
        self.stderr.flush()


if TYPE_CHECKING:
    #: a command function: (context, options) -> exit status (None means 0)
    CommandFunc = Callable[[Context, argparse.Namespace], int | None]
