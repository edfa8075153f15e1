"""NodeD: the node daemon serving node RPC."""
