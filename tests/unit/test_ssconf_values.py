"""WConfD's ssconf values per config serial (L{ganeti.wconfd.ssconf_writer.SsconfValues}):
the same as computing them afresh, the sorted instance list kept while the names stay."""

from __future__ import annotations

import attrs

from ganeti import ssconf
from ganeti.config.bootstrap import grow, initial_config
from ganeti.wconfd.ssconf_writer import SsconfValues


def test_same_values_as_computed_afresh() -> None:
    config = grow(initial_config("ss.test", "node1.test", "192.0.2.1"), nodes=2, instances=12)
    values = SsconfValues()
    assert values(config) == ssconf.compute(config)
    first = values(config)["instance_list"]
    # an instance modified: a new serial, the same names: the sorted list is kept
    uuid, inst = sorted(config.instances.items())[0]
    changed = attrs.evolve(config, serial_no=config.serial_no + 1,
                           instances={**config.instances, uuid: attrs.evolve(inst, os="other")})
    assert values(changed) == ssconf.compute(changed)
    assert values(changed)["instance_list"] is first
    # renamed, added, removed: sorted again
    renamed = attrs.evolve(changed, serial_no=changed.serial_no + 1,
                           instances={**changed.instances, uuid: attrs.evolve(inst, name="inst10a.example.test")})
    assert values(renamed) == ssconf.compute(renamed)
    assert "inst10a.example.test" in values(renamed)["instance_list"]
    grown = attrs.evolve(grow(renamed, instances=1), serial_no=renamed.serial_no + 1)
    assert values(grown) == ssconf.compute(grown)
    fewer = attrs.evolve(grown, serial_no=grown.serial_no + 1,
                         instances={u: i for u, i in grown.instances.items() if u != uuid})
    assert values(fewer) == ssconf.compute(fewer)
    assert "inst10a.example.test" not in values(fewer)["instance_list"]
