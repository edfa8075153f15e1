"""Tests for L{ganeti.locking.names}: parsing, formatting, order, implications."""

from __future__ import annotations

import random

import pytest

from ganeti.errors import LockError
from ganeti.locking import names
from ganeti.locking.names import (
    BGL,
    CONFIG_LOCK,
    EXCLUSIVE,
    GROUP_MEMBER,
    LEVELS,
    NAL,
    RELEASE,
    SHARED,
    LockName,
    group_lock,
)


def test_constants() -> None:
    assert LEVELS == ("cluster", "instance", "node-alloc", "nodegroup", "node", "node-res", "network")
    assert BGL == "cluster/BGL"
    assert NAL == "node-alloc/NAL"
    assert CONFIG_LOCK == "cluster/config"
    assert GROUP_MEMBER == "[lockset]"
    assert (SHARED, EXCLUSIVE, RELEASE) == ("shared", "exclusive", "release")


@pytest.mark.parametrize("level", LEVELS)
def test_group_lock(level: str) -> None:
    name = group_lock(level)
    assert name == level + "/[lockset]"
    parsed = LockName.parse(name)
    assert parsed.is_group
    assert parsed.implied is None
    assert parsed.group_name is None


def test_group_lock_unknown_level() -> None:
    with pytest.raises(LockError, match="Unknown lock level"):
        group_lock("config")


@pytest.mark.parametrize(
    "text, level, member",
    [
        ("cluster/BGL", "cluster", "BGL"),
        ("cluster/[lockset]", "cluster", "[lockset]"),
        ("cluster/config", "cluster", "config"),
        ("node-alloc/NAL", "node-alloc", "NAL"),
        ("instance/web1.example.com", "instance", "web1.example.com"),
        ("nodegroup/5a3c4b2e-0000-4000-8000-000000000001", "nodegroup", "5a3c4b2e-0000-4000-8000-000000000001"),
        ("node/6c3f", "node", "6c3f"),
        ("node-res/6c3f", "node-res", "6c3f"),
        ("network/abc", "network", "abc"),
    ],
)
def test_parse_and_format(text: str, level: str, member: str) -> None:
    parsed = LockName.parse(text)
    assert (parsed.level, parsed.member) == (level, member)
    assert str(parsed) == text
    assert parsed == LockName(level, member)
    assert names.parse(text) is parsed  # cached


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "Malformed lock name"),
        ("BGL", "Malformed lock name"),
        ("instance", "Malformed lock name"),
        ("instance/", "Empty member"),
        ("bogus/x", "Unknown lock level 'bogus'"),
        ("config/config", "Unknown lock level 'config'"),
        ("Instance/x", "Unknown lock level 'Instance'"),
        ("/x", "Unknown lock level ''"),
        ("instance/a/b", "contains '/'"),
        ("node//x", "contains '/'"),
        ("instance/a b", "blanks"),
        ("instance/ a", "blanks"),
        ("instance/a\n", "blanks"),
        ("instance/a\x00", "blanks"),
        ("cluster/BGL2", "Level 'cluster' has no lock 'BGL2'"),
        ("cluster/bgl", "has no lock"),
        ("node-alloc/x", "Level 'node-alloc' has no lock 'x'"),
    ],
)
def test_parse_malformed(text: str, message: str) -> None:
    with pytest.raises(LockError, match=message):
        LockName.parse(text)


@pytest.mark.parametrize("value", [None, 3, b"cluster/BGL", ["cluster/BGL"]])
def test_parse_not_a_string(value: object) -> None:
    with pytest.raises(LockError, match="must be a string"):
        LockName.parse(value)


def test_construct_validates() -> None:
    with pytest.raises(LockError):
        LockName("bogus", "x")
    with pytest.raises(LockError):
        LockName("instance", "")


@pytest.mark.parametrize(
    "text, implied",
    [
        ("cluster/BGL", "cluster/[lockset]"),
        ("node-alloc/NAL", "node-alloc/[lockset]"),
        ("instance/a", "instance/[lockset]"),
        ("nodegroup/g", "nodegroup/[lockset]"),
        ("node/n", "node/[lockset]"),
        ("node-res/n", "node-res/[lockset]"),
        ("network/x", "network/[lockset]"),
        ("cluster/[lockset]", None),
        ("instance/[lockset]", None),
        ("cluster/config", None),
    ],
)
def test_implied(text: str, implied: str | None) -> None:
    parsed = LockName.parse(text)
    result = parsed.implied
    assert (None if result is None else str(result)) == implied
    assert parsed.group_name == implied
    assert parsed.is_group == (text.endswith("/[lockset]"))
    assert parsed.is_config == (text == CONFIG_LOCK)


#: Every kind of lock, in the expected total order.
ORDERED = [
    "cluster/[lockset]",
    "cluster/BGL",
    "instance/[lockset]",
    "instance/a",
    "instance/a.example.com",
    "instance/b",
    "instance/web1",
    "node-alloc/[lockset]",
    "node-alloc/NAL",
    "nodegroup/[lockset]",
    "nodegroup/0000",
    "nodegroup/ffff",
    "node/[lockset]",
    "node/0000",
    "node/1111",
    "node-res/[lockset]",
    "node-res/0000",
    "network/[lockset]",
    "network/0000",
    "cluster/config",
]


def test_total_order() -> None:
    shuffled = list(ORDERED)
    for seed in range(20):
        random.Random(seed).shuffle(shuffled)
        assert names.sorted_names(shuffled) == ORDERED
    keys = [LockName.parse(n).sort_key for n in ORDERED]
    assert all(a < b for a, b in zip(keys, keys[1:]))


def test_order_is_not_string_order() -> None:
    # String order would put "cluster/config" before "instance/..." and
    # "node-res" before "nodegroup"; lock order does not.
    assert names.sort_key("cluster/config") > names.sort_key("network/zzz")
    assert names.sort_key("nodegroup/x") < names.sort_key("node/a")
    assert names.sort_key("node/zzz") < names.sort_key("node-res/a")
    assert names.sort_key("instance/[lockset]") < names.sort_key("instance/0")
    assert names.sort_key("cluster/[lockset]") < names.sort_key("cluster/BGL")


def test_equality_and_hash() -> None:
    a, b = LockName("instance", "x"), LockName.parse("instance/x")
    assert a == b and hash(a) == hash(b)
    assert a != LockName("node", "x")
    assert len({a, b}) == 1
