"""A new cluster activates only the data collectors MonD has here."""

from __future__ import annotations

from ganeti.config.bootstrap import initial_config
from ganeti.mond.collectors.host import CpuAvgLoad, DiskStats
from ganeti.query.cluster import cluster_info


def test_new_cluster_lists_only_collectors_mond_has():
    """gnt-cluster info listed Ganeti's drbd and lv collectors as active,
    though nothing here collects them."""
    config = initial_config("cluster.test", "node1.test", "127.0.1.1")
    assert set(config.cluster.data_collectors) == {CpuAvgLoad.name, DiskStats.name}
    assert all(params["active"] for params in config.cluster.data_collectors.values())
    info = cluster_info(config)
    assert info["enabled_data_collectors"] == {"cpu-avg-load": True, "diskstats": True}
