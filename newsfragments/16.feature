ganeti-mond on every node (Ganeti's API and report format, collectors following the cluster's data-collector settings, plugins) and Prometheus metrics on MonD and RAPI.
