"""The disk templates' names (Ganeti's C{DT_*}): standard library only.

L{ganeti.backend.storage} holds the drivers; this module only names the
templates, so that the command-line tools can offer them (C{gnt-instance
add -t}) without importing the node side.
"""

from __future__ import annotations

DT_DISKLESS = "diskless"
DT_FILE = "file"
DT_SHARED_FILE = "sharedfile"
#: images in a Ceph pool (L{ganeti.backend.storage.rbd}); not an L{IDiskStorage}
DT_RBD = "rbd"

#: ExtStorage volumes (L{ganeti.backend.storage.extstorage}) and adopted block devices; not L{IDiskStorage}s
DT_EXT = "ext"
DT_BLOCK = "blockdev"

#: the templates with an L{IDiskStorage} driver (L{ganeti.backend.storage.for_template})
TEMPLATES = (DT_DISKLESS, DT_FILE, DT_SHARED_FILE)
#: every template this implementation creates disks of (what C{gnt-instance add -t} offers)
CREATABLE_TEMPLATES = TEMPLATES + (DT_RBD, DT_EXT, DT_BLOCK)
