"""ganeti-twistd: twistd that knows only Ganeti's daemons.

Same command line, options and behaviour as C{twistd} (it is twistd's own
runner: daemonizing, pid file, logging, the status pipe, C{-n}...)::

    ganeti-twistd -n --pidfile= ganeti-noded --root /

What differs is how the daemon's plugin is found.  C{twistd} lists its
subcommands by loading every C{IServiceMaker} plugin on the path, Twisted's
own included (conch, mail, names, web, words...): resolving the interfaces
their cache entries name imports C{twisted.trial} (and with it
C{unittest}), C{twisted.words} and others, some 1.7 MiB of memory that each
daemon then keeps for its lifetime.  This launcher lists Ganeti's plugin
modules only (L{PLUGINS}), through C{ServerOptions._getPlugins}, the seam
twistd's options provide for it.  C{twistd} itself still starts every
daemon as before.

Importing this module first keeps the system's OpenSSL out of the daemon
until it is used (L{ganeti.leanimports}).
"""

from __future__ import annotations

import importlib
from typing import Any

from ganeti import leanimports

leanimports.defer_system_openssl()  # before Twisted's imports probe for it

from twisted.application import app  # noqa: E402
from twisted.scripts import twistd  # noqa: E402

#: Ganeti's twistd plugin modules (twisted/plugins/ganeti_*.py)
PLUGINS = ("ganeti_confd", "ganeti_luxid", "ganeti_mond", "ganeti_noded", "ganeti_rapi", "ganeti_wconfd")


def ganeti_plugins(interface: Any, package: Any = None) -> list[Any]:
    """The objects of Ganeti's plugin modules that provide C{interface}
    (C{twisted.plugin.getPlugins}' signature; C{package} is ignored)."""
    found = []
    for name in PLUGINS:
        module = importlib.import_module("twisted.plugins." + name)
        for value in vars(module).values():
            if interface.providedBy(value):
                found.append(value)
    return found


class ServerOptions(twistd.ServerOptions):
    """twistd's options, with Ganeti's daemons as the only subcommands."""

    _getPlugins = staticmethod(ganeti_plugins)


def main() -> None:
    """Run as C{twistd} would (C{twisted.scripts.twistd.run}); LuxiD's job
    fork server is forked first (L{ganeti.forkseed})."""
    import sys

    if "ganeti-luxid" in sys.argv:
        from ganeti import forkseed

        forkseed.prefork(sys.argv)
    # Twisted leaves app.run untyped
    app.run(twistd.runApp, ServerOptions)  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main()
