"""Node storage: diskless, file and sharedfile disks, and path refusals."""

import os

import pytest
from zope.interface.verify import verifyObject

from ganeti import errors
from ganeti.backend import storage
from ganeti.backend.storage.diskless import DisklessStorage
from ganeti.backend.storage.file import FileStorage
from ganeti.backend.storage.sharedfile import SharedFileStorage
from ganeti.objects import Disk
from ganeti.paths import Paths

MIB = 1024 * 1024


@pytest.fixture
def paths(tmp_path):
    return Paths(str(tmp_path / "node1"))


@pytest.fixture(params=[storage.DT_FILE, storage.DT_SHARED_FILE])
def files(request, paths):
    return storage.for_template(request.param, paths)


def test_for_template(paths):
    assert isinstance(storage.for_template("diskless", paths), DisklessStorage)
    file_ = storage.for_template("file", paths)
    assert type(file_) is FileStorage and file_.base_dir == paths.file_storage_dir
    shared = storage.for_template("sharedfile", paths)
    assert type(shared) is SharedFileStorage
    assert shared.base_dir == paths.shared_file_storage_dir
    assert storage.for_template("file", paths, file_storage_dir="/x/y").base_dir == "/x/y"
    with pytest.raises(errors.OpExecError):
        storage.for_template("drbd", paths)


@pytest.mark.parametrize("template", storage.TEMPLATES)
def test_provides_interface(paths, template):
    assert verifyObject(storage.IDiskStorage, storage.for_template(template, paths))


def test_create_is_sparse(files):
    path = files.create(files.default_path("inst1", 0), 1024)
    assert path == os.path.join(files.base_dir, "inst1", "disk0")
    st = os.stat(path)
    assert st.st_size == 1024 * MIB
    assert st.st_blocks * 512 < MIB  # a GiB disk takes (almost) no space
    assert files.size(path) == 1024
    assert files.hypervisor_path(path) == path


def test_relative_path_is_under_base(files):
    path = files.create("inst1/disk1", 10)
    assert path == os.path.join(files.base_dir, "inst1", "disk1")


def test_create_refuses_existing_and_bad_sizes(files):
    files.create("inst1/disk0", 10)
    with pytest.raises(errors.OpExecError):
        files.create("inst1/disk0", 10)
    for size in (0, -1, "10", 1.5, True):
        with pytest.raises(errors.OpExecError):
            files.create("inst1/disk9", size)
    assert not os.path.exists(os.path.join(files.base_dir, "inst1", "disk9"))


def test_grow(files):
    path = files.create("inst1/disk0", 100)
    assert files.grow(path, 50, dryrun=True) == 150
    assert files.size(path) == 100
    assert files.grow(path, 50) == 150
    st = os.stat(path)
    assert st.st_size == 150 * MIB and st.st_blocks * 512 < MIB
    with pytest.raises(errors.OpExecError):
        files.grow(path, -10)
    with pytest.raises(errors.OpExecError):
        files.grow("inst1/missing", 10)


def test_data_survives_grow(files):
    path = files.create("inst1/disk0", 1)
    with open(path, "r+b") as handle:
        handle.write(b"bootsector")
    files.grow(path, 1)
    with open(path, "rb") as handle:
        assert handle.read(10) == b"bootsector"


def test_remove(files):
    path = files.create("inst1/disk0", 10)
    other = files.create("inst1/disk1", 10)
    files.remove(path)
    assert not os.path.exists(path) and os.path.exists(other)
    files.remove(path)  # already gone: fine
    files.remove(other)
    assert not os.path.exists(os.path.dirname(other))  # empty instance dir goes too
    assert os.path.isdir(files.base_dir)


def test_hypervisor_path_of_missing_disk(files):
    with pytest.raises(errors.OpExecError):
        files.hypervisor_path("inst1/disk0")


def _refused(files, path):
    for call in (
        lambda: files.create(path, 10),
        lambda: files.remove(path),
        lambda: files.grow(path, 10),
        lambda: files.hypervisor_path(path),
        lambda: files.check_path(path),
    ):
        with pytest.raises(errors.OpExecError):
            call()


def test_refuses_paths_outside(files, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_bytes(b"precious")
    for path in (
        str(victim),
        "/etc/passwd",
        os.path.join(files.base_dir, "..", "x"),
        os.path.join(files.base_dir, "inst1", "..", "disk0"),  # inside, but '..'
        "../x",
        files.base_dir,  # the directory itself is no disk
        files.base_dir + "-evil/disk0",  # a sibling sharing the prefix
        "",
        "a\0b",
    ):
        _refused(files, path)
    assert victim.read_bytes() == b"precious"
    assert not (tmp_path / "x").exists()


def test_refuses_symlinks_out(files, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_bytes(b"precious")
    os.makedirs(files.base_dir)
    os.symlink(str(outside), os.path.join(files.base_dir, "inst1"))
    os.symlink(str(victim), os.path.join(files.base_dir, "disk-link"))
    _refused(files, "inst1/disk0")
    _refused(files, "inst1/victim")
    _refused(files, "disk-link")
    assert victim.read_bytes() == b"precious"
    assert os.listdir(outside) == ["victim"]


def test_symlink_inside_is_fine(files):
    os.makedirs(os.path.join(files.base_dir, "real"))
    os.symlink("real", os.path.join(files.base_dir, "alias"))
    path = files.create("alias/disk0", 10)
    assert path == os.path.join(files.base_dir, "real", "disk0")


def test_symlinked_base_dir(tmp_path):
    real = tmp_path / "real-storage"
    real.mkdir()
    link = tmp_path / "storage"
    link.symlink_to(real)
    files = FileStorage(str(link))
    path = files.create("inst1/disk0", 10)
    assert path == str(real / "inst1" / "disk0")
    files.remove(str(link / "inst1" / "disk0"))
    assert not os.path.exists(path)


def test_directory_is_not_a_disk(files):
    os.makedirs(os.path.join(files.base_dir, "inst1", "dir"))
    with pytest.raises(errors.OpExecError):
        files.hypervisor_path("inst1/dir")
    with pytest.raises(errors.OpExecError):
        files.remove("inst1/dir")


def test_default_path_refuses_bad_names(files):
    for name in ("", "a/b", "..", ".x"):
        with pytest.raises(errors.OpExecError):
            files.default_path(name, 0)


def test_shared_dir_is_the_same_for_two_nodes(tmp_path):
    shared = str(tmp_path / "shared")
    node1 = storage.for_template("sharedfile", Paths(str(tmp_path / "n1")), shared_file_storage_dir=shared)
    node2 = storage.for_template("sharedfile", Paths(str(tmp_path / "n2")), shared_file_storage_dir=shared)
    path = node1.create("inst1/disk0", 10)
    assert node2.hypervisor_path(path) == path
    node2.remove(path)
    assert not os.path.exists(path)


def test_diskless(paths):
    diskless = storage.for_template("diskless", paths)
    for call in (
        lambda: diskless.create("x", 10),
        lambda: diskless.grow("x", 10),
        lambda: diskless.hypervisor_path("x"),
        lambda: diskless.size("x"),
        lambda: diskless.check_path("x"),
        lambda: diskless.default_path("inst1", 0),
    ):
        with pytest.raises(errors.OpExecError):
            call()
    diskless.remove("x")


def test_disk_path():
    assert storage.disk_path(Disk(logical_id=["loop", "/srv/d/disk0"])) == "/srv/d/disk0"
    assert storage.disk_path(Disk()) is None
    assert storage.disk_path(Disk(logical_id=["xenvg", 5])) is None
