"""Node liveness: NodeD's persistent heartbeat connection to LuxiD (RFD 61).

  - L{wire}: the protocol's messages (pure);
  - L{roster}: LuxiD's roster state machine (pure);
  - L{store}: the durable record of roster transitions;
  - L{server}: LuxiD's listener and the service around the roster;
  - L{client}: NodeD's side (master lookup, reconnect with backoff, beats).
"""
