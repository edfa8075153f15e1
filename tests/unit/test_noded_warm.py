"""Where NodeD keeps the warm launcher of the master daemons: where the master role can come."""

from __future__ import annotations

from ganeti import ssconf
from ganeti.daemons import write_node_identity
from ganeti.noded.warm import wanted
from ganeti.paths import Paths


def node(tmp_path, name: str, master: str, candidates: list[str]) -> Paths:
    paths = Paths(str(tmp_path / name))
    paths.ensure_dirs()
    write_node_identity(paths, name, "127.0.1.1")
    ssconf.write_files(paths, {"master_node": master, "master_candidates": candidates,
                               "node_list": ["a", "b", "c"]}, max_size=None)
    return paths


def test_candidates_and_the_master_keep_one(tmp_path):
    assert wanted(node(tmp_path, "b", "a", ["a", "b"]))
    assert wanted(node(tmp_path, "a", "a", ["a", "b"]))


def test_a_plain_node_and_a_lone_master_keep_none(tmp_path):
    assert not wanted(node(tmp_path, "c", "a", ["a", "b"]))
    assert not wanted(node(tmp_path, "a", "a", ["a"]))


def test_no_cluster_yet_keeps_none(tmp_path):
    paths = Paths(str(tmp_path / "new"))
    paths.ensure_dirs()
    assert not wanted(paths)
