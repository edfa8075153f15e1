"""High availability: master failover, the master epoch, automatic failover.

Pure decisions (stdlib and attrs only: no Twisted, no I/O), tested directly:

  - L{failover}: Ganeti's checks and votes of a master failover, the
    start-up vote of the master daemons, which node holds the newest state;
  - L{election}: the automatic failover's election and a master's step-down.

The rest wires them to files, timers and node RPC:

  - L{epoch}: the master epoch that fences a replaced master (its records; the
    daemons' fencing services in L{epochwatch});
  - L{params}: the HA cluster parameters (C{ha.data}) and the last failover
    (their names, defaults and bounds in L{bounds}, for the opcodes);
  - L{keeper}: WConfD's side of the HA parameters (change, store, replicate);
  - L{voting}: the start-up vote gate of WConfD and LuxiD;
  - L{takeover}: the take-over steps of a failover, reporting through a
    L{takeover.Progress} (C{gnt-cluster master-failover} prints it, NodeD
    logs it);
  - L{elector}: NodeD's election procedures and service;
  - L{stepdown}: a LuxiD without a majority steps down.

Node liveness (the heartbeat) is L{ganeti.heartbeat}'s.  Nothing here
imports the command line (L{ganeti.client}).
"""
