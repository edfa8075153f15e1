"""gnt-instance offers only the disk templates a storage backend implements."""

from __future__ import annotations

from ganeti import completion
from ganeti.backend import storage


def test_instance_commands_offer_only_registered_templates():
    """-t offered plain, drbd, gluster, ... that nothing here creates; the
    list comes from the storage backends', so a new backend adds itself."""
    spec = completion.gnt_tool_spec("gnt-instance", "ganeti.client.gnt_instance")
    for command in ("add", "modify"):
        assert spec.subcommands[command].valued["-t"] == storage.CREATABLE_TEMPLATES
        assert spec.subcommands[command].valued["--disk-template"] == storage.CREATABLE_TEMPLATES
    assert {"plain", "drbd", "gluster"}.isdisjoint(storage.CREATABLE_TEMPLATES)


def test_the_command_line_offers_what_the_logical_units_create() -> None:
    from ganeti.cmdlib import instance_utils

    assert set(instance_utils.SUPPORTED_TEMPLATES) == set(storage.CREATABLE_TEMPLATES)
