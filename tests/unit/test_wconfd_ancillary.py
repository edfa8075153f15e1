"""The cluster-wide files WConfD gives a node it reaches first (L{ganeti.wconfd.replication.ancillary_files})."""

from __future__ import annotations

import os

from ganeti.noded import files
from ganeti.rpc import wire
from ganeti.wconfd.replication import ancillary_files


def test_the_rapi_users_file_travels_with_the_secrets(root):
    root.ensure_dirs()
    for path, text in ((root.hmac_key, b"key"), (root.rapi_pem, b"pem"), (root.rapi_users, b"jack {HA1}x write\n")):
        with open(path, "wb") as handle:
            handle.write(text)
    found = {details[0]: details for details in ancillary_files(root)}
    users = wire.virtual_path(root.root, root.rapi_users)
    assert sorted(found) == sorted(wire.virtual_path(root.root, p) for p in (root.hmac_key, root.rapi_pem,
                                                                              root.rapi_users))
    assert wire.decompress(found[users][1]) == b"jack {HA1}x write\n"
    # a node takes it: it is one of the files upload_file may replace
    assert files.upload_file(root, users) == root.rapi_users


def test_missing_files_are_left_out(root):
    root.ensure_dirs()
    assert ancillary_files(root) == []
    assert not os.path.exists(root.rapi_users)


def test_the_web_consoles_logouts_travel_too(root):
    """A candidate that missed the master RAPI's push of a logout gets it with the next configuration."""
    root.ensure_dirs()
    with open(root.ui_revoked, "wb") as handle:
        handle.write(b'{"abc": 1700000000.0}')
    (details,) = ancillary_files(root)
    assert details[0] == wire.virtual_path(root.root, root.ui_revoked)
    assert wire.decompress(details[1]) == b'{"abc": 1700000000.0}'
    assert files.upload_file(root, details[0]) == root.ui_revoked
