"""ganeti-mond: the monitoring daemon (Ganeti's MonD API and Prometheus metrics)."""
