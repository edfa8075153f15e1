"""ssconf: the small per-key files that every node reads.

WConfD computes the values from the configuration (L{compute}) and sends
them to all master candidates, which store one file per key under the data
directory (L{write_files}): C{ssconf_<key>}, mode 0444, the value's lines
joined by newlines with a final newline, and no file larger than 128 KiB.
L{SimpleStore} reads them back.

The values, and their order, are the ones Ganeti 3.0 writes:

  - C{node_list}, C{node_primary_ips}, C{node_secondary_ips},
    C{node_vm_capable}, C{online_nodes}, C{offline_nodes}, C{ssh_ports}:
    nodes nice-sorted by name (ties by UUID);
  - C{master_candidates} and C{master_candidates_ips}: the master and the
    candidates, ordered by node UUID (Ganeti takes them from its UUID-keyed
    node map, unsorted by name);
  - C{master_candidates_certs}, C{networks}: ordered by UUID;
  - C{nodegroups}: C{<uuid> <name>}, nice-sorted by group name (ties by UUID);
  - C{instance_list}: names nice-sorted; C{cluster_tags}: sorted, unique;
  - C{hvparams_<hv>}: one file per known hypervisor, C{key=value} sorted by
    key, empty when the cluster has no parameters for it.
"""

from __future__ import annotations

import decimal
import os
from typing import Any, Iterable, Mapping

from ganeti import GANETI_RELEASE, errors, serializer
from ganeti.objects import ConfigData, Node, nice_sort, nice_sort_key
from ganeti.paths import Paths

#: Hypervisors that get an C{hvparams_<hv>} file, whether enabled or not.
HYPERVISORS: tuple[str, ...] = ("chroot", "fake", "kvm", "lxc", "xen-hvm", "xen-pvm")

#: Every ssconf key we write, in file name order.
KEYS: tuple[str, ...] = tuple(
    sorted(
        (
            "cluster_name",
            "cluster_tags",
            "enabled_user_shutdown",
            "file_storage_dir",
            "gluster_storage_dir",
            "hypervisor_list",
            "instance_list",
            "maintain_node_health",
            "master_candidates",
            "master_candidates_certs",
            "master_candidates_ips",
            "master_ip",
            "master_netdev",
            "master_netmask",
            "master_node",
            "networks",
            "node_list",
            "node_primary_ips",
            "node_secondary_ips",
            "node_vm_capable",
            "nodegroups",
            "offline_nodes",
            "online_nodes",
            "primary_ip_family",
            "release_version",
            "shared_file_storage_dir",
            "ssh_ports",
            "uid_pool",
        )
        + tuple("hvparams_" + hv for hv in HYPERVISORS)
    )
)

_KEY_SET = frozenset(KEYS)

#: Largest ssconf file, in bytes (Ganeti's readers stop there).
MAX_FILE_SIZE = 128 * 1024

#: Mode of every ssconf file.
FILE_MODE = 0o444

#: Written to C{master_node} when the master is not a known node.
NO_MASTER = "NO MASTER"

#: C{primary_ip_family} values (Python's C{AF_INET}, C{AF_INET6} on Linux).
AF_INET = 2
AF_INET6 = 10


# --- computing ---------------------------------------------------------------


def _bool(value: Any, default: bool = False) -> str:
    """C{True}/C{False} as Haskell's C{show} prints them."""
    return str(bool(default if value is None else value))


def _one(value: Any) -> list[str]:
    """A single-line value; C{None} gives an empty file."""
    return [] if value is None else [str(value)]


def _haskell_double(number: float) -> str:
    """Print a non-integral float the way Haskell's C{show} does.

    Ganeti's Haskell writes hvparams numbers with C{show}: shortest
    round-tripping digits, fixed notation for 0.1 <= |x| < 10^7 and
    C{d.ddde<exp>} otherwise (C{1.0e-2}, C{1.5e7}).
    """
    if number != number or number in (float("inf"), float("-inf")):
        return "null"
    if number < 0:
        return "-" + _haskell_double(-number)
    if number == 0:
        return "0.0"
    _sign, digit_tuple, exponent = decimal.Decimal(repr(number)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    # number == 0.<digits> * 10 ** point
    point = len(digit_tuple) + exponent
    if 0.1 <= number < 10**7:
        if point <= 0:
            return "0." + "0" * -point + digits
        whole = digits[:point].ljust(point, "0")
        return whole + "." + (digits[point:] or "0")
    return "%s.%se%d" % (digits[0], digits[1:] or "0", point - 1)


def hvparam_value(value: Any) -> str:
    """One hypervisor parameter as ssconf shows it.

    Strings raw, booleans C{True}/C{False}, numbers as written (an integral
    float such as C{2.0} as C{2}, like Ganeti's JSON library), anything else
    as compact JSON.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer():
            return str(int(value))
        return _haskell_double(value)
    return serializer.dumps(value).decode("utf-8")


def _uid_range(entry: Any) -> str:
    if isinstance(entry, (list, tuple)) and len(entry) == 2:
        lower, upper = entry
        return str(lower) if lower == upper else "%s-%s" % (lower, upper)
    if isinstance(entry, (list, tuple)) and len(entry) == 1:
        return str(entry[0])
    return str(entry)


def _sorted_by_name(items: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """C{(key, object)} pairs nice-sorted by name, ties ordered by key."""
    pairs = sorted(items.items(), key=lambda kv: kv[0])
    pairs.sort(key=lambda kv: nice_sort_key(kv[1].name or ""))
    return pairs


def _ssh_ports(cfg: ConfigData, nodes: list[tuple[str, Node]]) -> list[str]:
    """C{<name>=<port>} with ndparams filled node over group over cluster.

    A node whose group is unknown gets an empty port, as in Ganeti.
    """
    cluster_nd = cfg.cluster.ndparams or {}
    by_group: dict[str, Any] = {}
    lines = []
    for _key, node in nodes:
        group_key = node.group or ""
        if group_key not in by_group:
            group = cfg.nodegroups.get(group_key)
            by_group[group_key] = None if group is None else {**cluster_nd, **(group.ndparams or {})}
        group_nd = by_group[group_key]
        port: Any = None
        if group_nd is not None:
            node_nd = node.ndparams or {}
            port = node_nd["ssh_port"] if "ssh_port" in node_nd else group_nd.get("ssh_port")
        lines.append("%s=%s" % (node.name or "", "" if port is None else port))
    return lines


def _master_name(cfg: ConfigData) -> str:
    master = cfg.cluster.master_node
    if not master:
        return NO_MASTER
    node = cfg.nodes.get(master)
    if node is None:  # Ganeti falls back to a lookup by name
        node = next((n for n in cfg.nodes.values() if n.name == master), None)
    if node is None:
        return NO_MASTER
    return node.name or NO_MASTER


def compute(cfg: ConfigData, release_version: str = GANETI_RELEASE,
            instance_list: list[str] | None = None) -> dict[str, list[str]]:
    """Compute every ssconf value of C{cfg}, each as a list of lines.

    Runs in O(n log n) of the nodes, instances, groups and networks (the
    sorting); nothing is looked up more than once per object.

    @param cfg: the cluster configuration
    @param release_version: the Ganeti release to announce
    @param instance_list: the instance names of C{cfg} already sorted
        (L{ganeti.wconfd.ssconf_writer.SsconfValues} keeps them while they
        do not change: the sort is most of the time at 10,000 instances)
    @return: C{{key: [line, ...]}} for every key in L{KEYS}
    """
    cluster = cfg.cluster
    master_key = cluster.master_node
    nodes = _sorted_by_name(cfg.nodes)
    candidates = [
        node
        for key, node in sorted(cfg.nodes.items(), key=lambda kv: kv[0])
        if key == master_key or node.master_candidate
    ]
    offline = [node.name or "" for _key, node in nodes if node.offline]
    online = [node.name or "" for _key, node in nodes if not node.offline]
    names = [node.name or "" for _key, node in nodes]
    hvparams = cluster.hvparams or {}

    values: dict[str, list[str]] = {
        "cluster_name": _one(cluster.cluster_name),
        "cluster_tags": sorted(set(cluster.tags or ())),
        "file_storage_dir": _one(cluster.file_storage_dir),
        "shared_file_storage_dir": _one(cluster.shared_file_storage_dir),
        "gluster_storage_dir": _one(cluster.gluster_storage_dir),
        "master_candidates": [node.name or "" for node in candidates],
        "master_candidates_ips": [node.primary_ip or "" for node in candidates],
        "master_candidates_certs": [
            "%s=%s" % (uuid, digest) for uuid, digest in sorted((cluster.candidate_certs or {}).items())
        ],
        "master_ip": _one(cluster.master_ip),
        "master_netdev": _one(cluster.master_netdev),
        "master_netmask": _one(cluster.master_netmask),
        "master_node": [_master_name(cfg)],
        "node_list": names,
        "node_primary_ips": ["%s %s" % (n.name or "", n.primary_ip or "") for _k, n in nodes],
        "node_secondary_ips": ["%s %s" % (n.name or "", n.secondary_ip or "") for _k, n in nodes],
        "node_vm_capable": ["%s=%s" % (n.name or "", _bool(n.vm_capable, True)) for _k, n in nodes],
        "offline_nodes": offline,
        "online_nodes": online,
        "primary_ip_family": [str(cluster.primary_ip_family or AF_INET)],
        "instance_list": (instance_list if instance_list is not None
                          else nice_sort(i.name for i in cfg.instances.values() if i.name is not None)),
        "release_version": [release_version],
        "hypervisor_list": [str(hv) for hv in cluster.enabled_hypervisors or ()],
        "maintain_node_health": [_bool(cluster.maintain_node_health)],
        "uid_pool": [_uid_range(entry) for entry in cluster.uid_pool or ()],
        "nodegroups": [
            "%s %s" % (group.uuid or key, group.name or "") for key, group in _sorted_by_name(cfg.nodegroups)
        ],
        "networks": [
            "%s %s" % (net.uuid or key, net.name or "")
            for key, net in sorted(cfg.networks.items(), key=lambda kv: kv[0])
        ],
        "enabled_user_shutdown": [_bool(cluster.enabled_user_shutdown)],
        "ssh_ports": _ssh_ports(cfg, nodes),
    }
    for hv in HYPERVISORS:
        params = hvparams.get(hv) or {}
        values["hvparams_" + hv] = ["%s=%s" % (k, hvparam_value(params[k])) for k in sorted(params)]
    return values


# --- files -------------------------------------------------------------------


def render(lines: Iterable[str] | str) -> bytes:
    """The bytes of an ssconf file holding C{lines}.

    Lines are joined by newlines and a final newline is added unless the
    text is empty or already ends with one, so C{[]} and C{[""]} both give
    an empty file.  A single string is taken as the whole text.
    """
    text = lines if isinstance(lines, str) else "\n".join(lines)
    if text and not text.endswith("\n"):
        text += "\n"
    return text.encode("utf-8")


def _check_key(key: str) -> None:
    if key not in _KEY_SET:
        raise errors.ConfigurationError("Unknown ssconf key %r" % (key,))


def write_files(
    paths: Paths,
    values: Mapping[str, Iterable[str] | str],
    *,
    max_size: int | None = MAX_FILE_SIZE,
) -> list[str]:
    """Store ssconf values as C{ssconf_<key>} files, atomically, mode 0444.

    Every key and size is checked before anything is written, so a bad
    request writes nothing.  A file that already has the wanted content and
    mode is left alone.

    Beware that C{instance_list} outgrows 128 KiB at about 5,000 instances
    with 25-character names; Ganeti refuses to write it then, and so does
    this function unless C{max_size} is raised (or C{None}: no limit).

    @param values: C{{key: [line, ...]}} or C{{key: text}}
    @param max_size: largest file allowed, in bytes
    @return: the keys whose files were (re)written, in the order given
    @raise errors.ConfigurationError: unknown key or a file over C{max_size}
    """
    unknown = sorted(str(key) for key in values if key not in _KEY_SET)
    if unknown:
        raise errors.ConfigurationError("Unknown ssconf key(s): %s; nothing written" % ", ".join(unknown))
    rendered: list[tuple[str, bytes]] = []
    for key, value in values.items():
        data = render(value)
        if max_size is not None and len(data) > max_size:
            raise errors.ConfigurationError(
                "ssconf value %r is %d bytes, more than the %d allowed; nothing written"
                % (key, len(data), max_size)
            )
        rendered.append((key, data))
    os.makedirs(paths.data_dir, mode=0o755, exist_ok=True)
    written = []
    for key, data in rendered:
        path = paths.ssconf(key)
        if _unchanged(path, data):
            continue
        serializer.write_file(path, data, mode=FILE_MODE)
        written.append(key)
    return written


def _unchanged(path: str, data: bytes) -> bool:
    """Whether C{path} already holds exactly C{data} with mode 0444."""
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_mode & 0o7777 != FILE_MODE:
                return False
            return handle.read(len(data) + 1) == data
    except OSError:
        return False


def _read_file(paths: Paths, key: str, max_size: int | None = MAX_FILE_SIZE) -> str:
    """The text of C{ssconf_<key>}, trailing newlines removed."""
    path = paths.ssconf(key)
    try:
        with open(path, "rb") as handle:
            data = handle.read() if max_size is None else handle.read(max_size + 1)
    except FileNotFoundError:
        raise errors.ConfigurationError(
            "ssconf file %s is missing (is this node part of a cluster?)" % path
        ) from None
    except OSError as e:
        raise errors.ConfigurationError("Can't read ssconf file %s: %s" % (path, e)) from e
    if max_size is not None and len(data) > max_size:
        raise errors.ConfigurationError("ssconf file %s is larger than %d bytes" % (path, max_size))
    try:
        return data.decode("utf-8").rstrip("\n")
    except UnicodeDecodeError as e:
        raise errors.ConfigurationError("ssconf file %s is not valid UTF-8: %s" % (path, e)) from e


def read_values(paths: Paths, *, max_size: int | None = MAX_FILE_SIZE) -> dict[str, str]:
    """Every ssconf value present on this node, trailing newlines removed.

    Missing files are left out.

    @raise errors.ConfigurationError: a file is unreadable or over C{max_size}
    """
    values = {}
    for key in KEYS:
        try:
            values[key] = _read_file(paths, key, max_size)
        except errors.ConfigurationError:
            if os.path.exists(paths.ssconf(key)):
                raise
    return values


class SimpleStore:
    """Typed access to the ssconf files of one node.

    Every getter reads its file anew and raises
    L{errors.ConfigurationError} when the file is missing or malformed.
    """

    def __init__(self, paths: Paths, *, max_size: int | None = MAX_FILE_SIZE) -> None:
        self._paths = paths
        self._max_size = max_size

    def get_value(self, key: str) -> str:
        """The raw text of C{key}, trailing newlines removed."""
        _check_key(key)
        return _read_file(self._paths, key, self._max_size)

    def _lines(self, key: str) -> list[str]:
        return self.get_value(key).splitlines()

    def _pairs(self, key: str, separator: str) -> dict[str, str]:
        result = {}
        for line in self._lines(key):
            left, sep, right = line.partition(separator)
            if not sep:
                raise errors.ConfigurationError(
                    "Malformed line %r in ssconf file %s" % (line, self._paths.ssconf(key))
                )
            result[left] = right
        return result

    def get_cluster_name(self) -> str:
        return self.get_value("cluster_name")

    def get_master_node(self) -> str:
        return self.get_value("master_node")

    def get_master_ip(self) -> str:
        return self.get_value("master_ip")

    def get_master_candidates(self) -> list[str]:
        return self._lines("master_candidates")

    def get_master_candidates_ips(self) -> list[str]:
        return self._lines("master_candidates_ips")

    def get_node_list(self) -> list[str]:
        return self._lines("node_list")

    def get_online_nodes(self) -> list[str]:
        return self._lines("online_nodes")

    def get_node_primary_ips(self) -> dict[str, str]:
        """C{{node name: primary IP}}."""
        return self._pairs("node_primary_ips", " ")

    def get_nodegroups(self) -> dict[str, str]:
        """C{{group uuid: group name}}."""
        return self._pairs("nodegroups", " ")

    def get_primary_ip_family(self) -> int:
        """2 (IPv4) or 10 (IPv6)."""
        text = self.get_value("primary_ip_family").strip()
        try:
            family = int(text)
        except ValueError:
            family = None
        if family not in (AF_INET, AF_INET6):
            raise errors.ConfigurationError(
                "Bad primary IP family %r in %s" % (text, self._paths.ssconf("primary_ip_family"))
            )
        return family

    def get_hvparams(self, hypervisor: str) -> dict[str, str]:
        """C{{parameter: value}} of C{hypervisor}, values as text."""
        if hypervisor not in HYPERVISORS:
            raise errors.ConfigurationError("Unknown hypervisor %r" % (hypervisor,))
        return self._pairs("hvparams_" + hypervisor, "=")

    def get_master_candidates_certs(self) -> dict[str, str]:
        """C{{node uuid: SHA1 digest of its client certificate}}."""
        return self._pairs("master_candidates_certs", "=")
