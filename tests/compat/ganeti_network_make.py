"""Run under Ganeti 3.0.2's own Python package (PYTHONPATH): make a network
as Ganeti's C{LUNetworkAdd} does (C{AddressPool.InitializeNetwork}, external
reservations) and reserve instance addresses, with Ganeti's own code; print
the network's config.data dict as JSON.

usage: ganeti_network_make.py NAME CIDR GATEWAY EXT_IP,... INSTANCE_IP,...
"""

import json
import sys

from ganeti import network, objects  # noqa: E402


def main():
    name, cidr, gateway, external, instance = sys.argv[1:6]
    net = objects.Network(name=name, network=cidr, gateway=gateway or None, uuid="0123-" + name, serial_no=1,
                          ctime=1.0, mtime=1.0)
    pool = network.AddressPool.InitializeNetwork(net)
    for ip in filter(None, external.split(",")):
        pool.Reserve(ip, external=True)
    for ip in filter(None, instance.split(",")):
        pool.Reserve(ip)
    print(json.dumps(net.ToDict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
