"""The HA cluster parameters' names, defaults and bounds (constants only).

L{ganeti.ha.params} holds the parameters' model (attrs) and their file; the opcodes, and through them the
command line, need only these numbers, without attrs or Twisted.
"""

from __future__ import annotations

#: the parameters an admin changes (opcode fields, C{gnt-cluster modify} options)
PARAMETERS = ("liveness_timeout", "auto_failover", "failover_timeout")

#: seconds without a byte before LuxiD marks a node unreachable
DEFAULT_LIVENESS_TIMEOUT = 2.0
#: seconds the master must be unreachable for a majority before a candidate takes over
DEFAULT_FAILOVER_TIMEOUT = 10.0

#: bounds an admin may set (seconds)
LIVENESS_TIMEOUT_RANGE = (0.5, 300.0)
FAILOVER_TIMEOUT_RANGE = (2.0, 3600.0)

__all__ = ["DEFAULT_FAILOVER_TIMEOUT", "DEFAULT_LIVENESS_TIMEOUT", "FAILOVER_TIMEOUT_RANGE", "LIVENESS_TIMEOUT_RANGE",
           "PARAMETERS"]
