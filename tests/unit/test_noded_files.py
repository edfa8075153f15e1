"""The path allow-list of upload_file and the queue procedures."""

from __future__ import annotations

import os

import pytest

from ganeti.noded import files


def test_allowed_uploads(root):
    assert files.upload_file(root, "/var/lib/ganeti/config.data") == root.config_data
    assert files.upload_file(root, "/var/lib/ganeti/ssconf_master_node") == root.ssconf("master_node")
    assert files.upload_file(root, "/var/lib/ganeti/rapi.pem") == root.rapi_pem
    assert files.upload_file(root, "/var/lib/ganeti/hmac.key") == root.hmac_key
    assert files.upload_file(root, "/var/lib/ganeti/queue/job-17") == os.path.join(root.queue_dir, "job-17")


@pytest.mark.parametrize(
    "vpath",
    [
        "/etc/passwd",
        "/var/lib/ganeti/client.pem",
        "/var/lib/ganeti/ssconf_no_such_key",
        "/var/lib/ganeti/locks.data",
        "/var/lib/ganeti/queue/lock",
        "/var/lib/ganeti/queue/../config.data",
        "/var/lib/ganeti/../../../etc/passwd",
        "var/lib/ganeti/config.data",
        "/var/lib/ganeti/config.data\0",
        None,
    ],
)
def test_refused_uploads(root, vpath):
    with pytest.raises(files.PathRefused):
        files.upload_file(root, vpath)


def test_queue_files_only_inside_the_queue(root):
    assert files.queue_file(root, "/var/lib/ganeti/queue/archive/0/job-5").endswith("queue/archive/0/job-5")
    for bad in ("/var/lib/ganeti/config.data", "/var/lib/ganeti/queue", "/var/lib/ganeti/queue/lock", "/x/../var/lib/ganeti/queue/a"):
        with pytest.raises(files.PathRefused):
            files.queue_file(root, bad)


def test_symlinked_directory_leaving_the_root_is_refused(root, tmp_path):
    root.ensure_dirs()
    os.symlink(str(tmp_path), os.path.join(root.queue_dir, "archive"))
    with pytest.raises(files.PathRefused):
        files.queue_file(root, "/var/lib/ganeti/queue/archive/0/job-1")
    with pytest.raises(files.PathRefused):
        files.queue_file(root, "/var/lib/ganeti/queue/archive/job-1")
