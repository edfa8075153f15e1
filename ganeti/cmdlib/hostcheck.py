"""The name and IP checks of instance names (Ganeti's C{CheckHostnameSane}
and the C{ip_check} probe), for the logical units that give an instance a name.

With C{name_check}, a name must resolve, the resolved (canonical) name
must look like the one given (C{web} may become C{web.example.com}, not
C{db.example.com}) and it replaces the given one; with C{ip_check}, the
name's address must not answer on the node daemon port (another machine
uses it).  Lookups and probes go through the job process's non-blocking
network helper (C{ctx.net}).
"""

from __future__ import annotations

from typing import Any

from ganeti import errors, ports

#: seconds to wait for the instance's IP to answer when C{ip_check} is set
IP_CHECK_TIMEOUT = 1.0
#: the port the IP check probes (Ganeti's DEFAULT_NODED_PORT)
IP_CHECK_PORT = ports.NODED


def check_ip_needs_name(ip_check: bool, name_check: bool, message: str) -> None:
    """Refuse C{ip_check} without C{name_check} (with the LU's own message).

    @raise errors.OpPrereqError: (C{ECODE_INVAL}).
    """
    if ip_check and not name_check:
        raise errors.OpPrereqError(message, errors.ECODE_INVAL)


def looks_like(given: str, canonical: str) -> bool:
    """Whether a resolved name matches the name given (itself, or it with a domain)."""
    return canonical == given or canonical.startswith(given + ".")


async def checked_hostname(net: Any, name: str, what: str, ip_check: bool) -> str:
    """The canonical name of C{name}, after the name (and IP) checks.

    @param net: resolves names and probes ports (L{ganeti.asyncutil}).
    @param what: what the name is, for the errors (C{"instance name"}).
    @raise errors.OpPrereqError: the name does not resolve
        (C{ECODE_RESOLVER}), resolves to another name (C{ECODE_INVAL}), or
        its address answers (C{ECODE_NOTUNIQUE}).
    """
    try:
        canonical, _aliases, addresses = await net.resolve(name)
    except OSError as e:
        raise errors.OpPrereqError("Cannot resolve %s '%s': %s" % (what, name, e), errors.ECODE_RESOLVER) from None
    if not looks_like(name, canonical):
        raise errors.OpPrereqError("Resolved hostname '%s' does not look like '%s'" % (canonical, name),
                                   errors.ECODE_INVAL)
    if ip_check and addresses:
        if await net.port_open(addresses[0], IP_CHECK_PORT, IP_CHECK_TIMEOUT):
            raise errors.OpPrereqError("IP %s of instance %s already in use" % (addresses[0], canonical),
                                       errors.ECODE_NOTUNIQUE)
    return str(canonical)
