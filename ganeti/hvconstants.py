"""Hypervisor names and the values hypervisors report over RPC.

Shared by the node side (L{ganeti.backend.hypervisor}, which implements
the hypervisors) and the master side (the logical units in
L{ganeti.cmdlib}, which read what noded reports), so neither reaches into
the other.  Values are Ganeti's.  Nothing but constants.
"""

from __future__ import annotations

#: the hypervisor kinds this cluster implements
HT_FAKE = "fake"
HT_KVM = "kvm"

#: an instance's state in instance info (Ganeti's HvInstanceState): running
STATE_RUNNING = 0
#: the guest powered itself off; its process still exists
STATE_SHUTDOWN = 1

#: the kinds of console info
CONS_MESSAGE = "msg"
CONS_SSH = "ssh"
CONS_VNC = "vnc"
CONS_SPICE = "spice"
