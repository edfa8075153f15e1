"""OP_OS_DIAGNOSE (L{ganeti.cmdlib.operating_system}): merging what the
nodes' C{os_diagnose} answers, the filters and fields of the result, and the
LU run through the processor against fake nodes."""

from __future__ import annotations

from typing import Any

import attrs
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors, opcodes
from ganeti.cmdlib import operating_system as osdiag
from tests.unit.instance_fakes import MASTER, N2, N3, FakeNodes, change_node, cluster
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_processor import Env

NOOP = ["noop", "/srv/ganeti/os/noop", True, "", [], [], [20], True]
DEB = ["debootstrap", "/srv/ganeti/os/debootstrap", True, "", ["default", "minimal"],
       [["dhcp", "use dhcp"], ["mirror", "the mirror"]], [20, 15], True]


def diagnose(fields: list[str], names: list[str] | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"OP_ID": "OP_OS_DIAGNOSE", "output_fields": fields}
    if names is not None:
        op["names"] = names
    return op


class MergeTests(SynchronousTestCase):
    def test_the_same_everywhere(self) -> None:
        merged = osdiag.merge({MASTER: [NOOP, DEB], N2: [DEB, NOOP]})
        self.assertEqual(sorted(merged), ["debootstrap", "noop"])
        deb = merged["debootstrap"]
        self.assertTrue(deb.valid and deb.trusted)
        self.assertEqual((deb.variants, deb.parameters, deb.api_versions),
                         (["default", "minimal"], [["dhcp", "use dhcp"], ["mirror", "the mirror"]], [20, 15]))
        self.assertEqual(deb.node_status[N2], [DEB[1:]])

    def test_only_what_every_node_offers(self) -> None:
        other = list(DEB)
        other[4], other[5], other[6], other[7] = ["minimal", "extra"], [["dhcp", "use dhcp"]], [20], False
        deb = osdiag.merge({MASTER: [DEB], N2: [other]})["debootstrap"]
        self.assertTrue(deb.valid)
        self.assertEqual((deb.variants, deb.parameters, deb.api_versions, deb.trusted),
                         (["minimal"], [["dhcp", "use dhcp"]], [20], False))

    def test_missing_or_invalid_on_one_node_is_invalid(self) -> None:
        broken = ["noop", "/x/noop", False, "missing create script", [], [], [], False]
        merged = osdiag.merge({MASTER: [NOOP, DEB], N2: [broken]})
        self.assertFalse(merged["noop"].valid)
        self.assertEqual(merged["noop"].node_status[N2], [broken[1:]])
        self.assertFalse(merged["debootstrap"].valid)
        self.assertEqual(merged["debootstrap"].node_status[N2], [])
        self.assertEqual((merged["debootstrap"].variants, merged["debootstrap"].trusted), ([], False))

    def test_the_first_directory_counts(self) -> None:
        shadow = ["noop", "/usr/share/ganeti/os/noop", False, "broken", [], [], [], True]
        noop = osdiag.merge({MASTER: [NOOP, shadow]})["noop"]
        self.assertTrue(noop.valid)
        self.assertEqual(len(noop.node_status[MASTER]), 2)
        self.assertFalse(osdiag.merge({MASTER: [shadow, NOOP]})["noop"].valid)

    def test_malformed_answers_are_skipped(self) -> None:
        merged = osdiag.merge({MASTER: [NOOP, "junk", ["x"]], N2: "not a list"})
        self.assertEqual(list(merged), ["noop"])
        self.assertFalse(merged["noop"].valid)  # node2 answered nothing usable

    def test_os_names(self) -> None:
        self.assertEqual(opcodes.os_names("noop", []), ["noop"])
        self.assertEqual(opcodes.os_names("deb", ["a", "b"]), ["deb+a", "deb+b"])


class OsDiagnoseTests(LUTestCase):
    def setUp(self) -> None:
        cfg = cluster(nodes=2)
        cfg = attrs.evolve(cfg, cluster=attrs.evolve(cfg.cluster, hidden_os=["hiddenos"],
                                                     blacklisted_os=["bados"],
                                                     osparams={"debootstrap": {"dhcp": "yes"}}))
        self.env = Env(change_node(cfg, N3, vm_capable=False))
        self.rpc = FakeNodes()
        hidden = ["hiddenos", "/srv/ganeti/os/hiddenos", True, "", [], [], [20], True]
        black = ["bados", "/srv/ganeti/os/bados", True, "", [], [], [20], True]
        broken = ["broken", "/srv/ganeti/os/broken", False, "no create script", [], [], [], False]
        self.rpc.os_list = [NOOP, DEB, hidden, black, broken]
        self.next_id = 100

    def test_names_and_variants_of_the_valid_visible_oses(self) -> None:
        self.assertEqual(self.ok(diagnose(["name", "variants"])),
                         [["debootstrap", ["default", "minimal"]], ["noop", []]])
        # online vm-capable nodes only
        self.assertEqual(sorted(n for p, n, _ in self.rpc.calls if p == "os_diagnose"), [MASTER, N2])

    def test_status_fields_keep_what_they_describe(self) -> None:
        self.assertEqual(self.ok(diagnose(["name", "valid"])),
                         [["broken", False], ["debootstrap", True], ["noop", True]])
        self.assertEqual(self.ok(diagnose(["name", "hidden"])),
                         [["debootstrap", False], ["hiddenos", True], ["noop", False]])
        self.assertEqual(self.ok(diagnose(["name", "blacklisted", "hidden", "valid"])), [
            ["bados", True, False, True], ["broken", False, False, False], ["debootstrap", False, False, True],
            ["hiddenos", False, True, True], ["noop", False, False, True]])

    def test_every_field(self) -> None:
        fields = list(opcodes.OS_FIELDS)
        (row,) = self.ok(diagnose(fields, names=["debootstrap"]))
        values = dict(zip(fields, row))
        self.assertEqual(values["parameters"], [["dhcp", "use dhcp"], ["mirror", "the mirror"]])
        self.assertEqual((values["api_versions"], values["trusted"], values["osparams"], values["os_hvp"]),
                         ([20, 15], True, {"dhcp": "yes"}, {}))
        self.assertEqual(sorted(values["node_status"]), [MASTER, N2])
        self.assertEqual(values["node_status"][MASTER], [DEB[1:]])

    def test_names_filter(self) -> None:
        self.assertEqual(self.ok(diagnose(["name"], names=["noop", "nosuch"])), [["noop"]])

    def test_unknown_field(self) -> None:
        self.assertIn("colour", self.error(diagnose(["name", "colour"]), code=errors.ECODE_INVAL))

    def test_an_unreachable_node_is_left_out_with_a_warning(self) -> None:
        self.rpc.down.add(N2)
        self.assertEqual(self.ok(diagnose(["name"])), [["debootstrap"], ["noop"]])
        self.assertTrue(any("node2" in line and "WARNING" in line for line in self.log), self.log)

    def test_offline_nodes_are_not_asked(self) -> None:
        self.env = Env(change_node(cluster(nodes=2), N2, offline=True))
        self.ok(diagnose(["name"]))
        self.assertEqual(sorted(n for p, n, _ in self.rpc.calls), [MASTER, N3])

    def test_required_fields(self) -> None:
        self.assertRaises(Exception, opcodes.validate, {"OP_ID": "OP_OS_DIAGNOSE"})
        self.assertEqual(opcodes.validate(diagnose(["name"]))["names"], [])
