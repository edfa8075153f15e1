"""The cluster configuration: checks and helpers around L{ganeti.objects}."""
