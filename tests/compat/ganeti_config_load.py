"""Run under Ganeti 3.0.2's own Python package (PYTHONPATH): load one of
our config.data files with Ganeti's own code, C{objects.ConfigData.FromDict}
then C{UpgradeConfig} (what Ganeti's config writer does on start-up), its
networks' address pools with Ganeti's C{network.AddressPool}, and
print a summary as JSON; exit non-zero with the error when it cannot.

usage: ganeti_config_load.py CONFIG_DATA
"""

import json
import sys

from ganeti import network, objects, serializer  # noqa: E402


def main():
    with open(sys.argv[1]) as handle:
        data = serializer.LoadJson(handle.read())
    config = objects.ConfigData.FromDict(data)
    config.UpgradeConfig()
    config.ToDict()  # and back, as Ganeti writes it
    networks = {}
    for net in config.networks.values():
        pool = network.AddressPool(net)  # Ganeti's pool: checks the sizes of both bit strings
        pool.Validate()
        networks[net.name] = {"free": pool.GetFreeCount(), "reserved": pool.GetReservedCount(),
                              "external": pool.GetExternalReservations(), "map": pool.GetMap()}
    print(json.dumps({
        "cluster_name": config.cluster.cluster_name,
        "serial_no": config.serial_no,
        "nodes": sorted(n.name for n in config.nodes.values()),
        "instances": sorted(i.name for i in config.instances.values()),
        "tags": sorted(config.cluster.GetTags()),
        "max_running_jobs": config.cluster.max_running_jobs,
        "filters": {uuid: [rule.priority, rule.predicates, rule.action] for uuid, rule in config.filters.items()},
        "networks": networks,
        "group_networks": {g.name: g.networks for g in config.nodegroups.values()},
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
