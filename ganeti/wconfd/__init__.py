"""WConfD: the configuration and lock daemon of the master node."""
