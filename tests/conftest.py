import pytest

from ganeti.testing.daemons import make_root, remove_root


@pytest.fixture
def root():
    """A fresh node root with a short path (Unix socket paths must fit)."""
    paths = make_root()
    yield paths
    remove_root(paths)
