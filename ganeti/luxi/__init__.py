"""LUXI, the Local UniX Interface between Ganeti's CLI tools, RAPI and luxid.

Each message is a UTF-8 JSON object followed by one ETX byte (C{0x03}):

    request:  {"method": "SubmitJob", "args": [[...]], "version": 3000000}
    response: {"success": true, "result": 17}

Modules:
  - L{ganeti.luxi.methods}: every method, declared once (arguments, types,
    result, doc): the contract clients and server are built from;
  - L{ganeti.luxi.wire}: pure framing and encoding, no Twisted, no I/O;
  - L{ganeti.luxi.server}: the Twisted server protocol and factory;
  - L{ganeti.luxi.client}: a blocking client for the gnt-* tools (no
    Twisted, so that they start fast) and an asynchronous one for daemons.

This package imports nothing itself, so that importing the blocking client
stays cheap.
"""
