"""Watching directories with inotify: the one owner of that mechanism (and L{file_stamp} for those who poll).

confd reloads C{config.data} when WConfD replaces it, LuxiD reloads a job
file when its job process rewrites it, and the heartbeat reporter looks at
the node when a state file changes.  Each names the events it wants and
gets the changed file's name (a C{str}) in a callback; L{DirectoryWatcher}
hides Twisted's C{inotify} module, its masks and its byte paths.

inotify exists on Linux only: elsewhere L{DirectoryWatcher.watch} raises
L{WatchUnavailable} and the caller falls back to its timer.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable

from twisted.internet.interfaces import IReactorFDSet
from twisted.logger import Logger
from twisted.python.filepath import FilePath


def file_stamp(path: str) -> tuple[int, int, int] | None:
    """What tells a changed file (inode, size, mtime), or None when it cannot be stat'ed: a file
    read again only when its stamp changed costs one C{stat} per use."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


#: a file was closed after writing, or renamed into the directory (an atomic replace)
WRITTEN = "written"
#: a file was created
CREATED = "created"
#: a file was deleted, or renamed out of the directory
REMOVED = "removed"

# Linux's inotify event bits (include/uapi/linux/inotify.h): stable kernel ABI
_IN_CLOSE_WRITE = 0x00000008
_IN_MOVED_FROM = 0x00000040
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_DELETE = 0x00000200

_MASKS = {
    WRITTEN: _IN_CLOSE_WRITE | _IN_MOVED_TO,
    CREATED: _IN_CREATE,
    REMOVED: _IN_DELETE | _IN_MOVED_FROM,
}


class WatchUnavailable(Exception):
    """inotify cannot watch the directory (not Linux, no such directory, out of watches)."""


def event_mask(events: Iterable[str]) -> int:
    """The inotify mask for a set of event names (L{WRITTEN}, L{CREATED}, L{REMOVED}).

    @raise ValueError: an unknown event name, or none at all.
    """
    mask = 0
    for event in events:
        if event not in _MASKS:
            raise ValueError("unknown directory event %r (known: %s)" % (event, ", ".join(sorted(_MASKS))))
        mask |= _MASKS[event]
    if not mask:
        raise ValueError("no directory events to watch")
    return mask


def _inotify_notifier(reactor: IReactorFDSet) -> Any:
    try:
        from twisted.internet import inotify
    except ImportError as e:  # not Linux
        raise WatchUnavailable("no inotify on this system: %s" % e) from e
    notifier: Any = inotify.INotify  # untyped in Twisted
    return notifier(reactor)


class DirectoryWatcher:
    """Calls C{callback(name)} when a file in a watched directory changes.

    One inotify descriptor serves every directory given to L{watch}; it is
    opened at the first one and closed by L{stop}.

    @param events: which changes to report (L{WRITTEN}, L{CREATED}, L{REMOVED}).
    @param notifier_factory: builds the notifier from the reactor (tests
        pass a fake); the default is Twisted's C{INotify}.
    """

    log = Logger()

    def __init__(
        self,
        reactor: IReactorFDSet,
        callback: Callable[[str], None],
        events: Iterable[str] = (WRITTEN,),
        notifier_factory: Callable[[Any], Any] = _inotify_notifier,
    ) -> None:
        self.reactor = reactor
        self.callback = callback
        self.mask = event_mask(events)
        self._factory = notifier_factory
        self._notifier: Any = None

    @property
    def active(self) -> bool:
        """Whether at least one directory is watched."""
        return self._notifier is not None

    def watch(self, directory: str) -> None:
        """Start reporting changes in C{directory}.

        @raise WatchUnavailable: inotify cannot watch it; nothing changes
            (directories watched before stay watched).
        """
        notifier = self._notifier
        fresh = notifier is None
        try:
            if fresh:
                notifier = self._factory(self.reactor)
                notifier.startReading()
            notifier.watch(FilePath(directory), mask=self.mask, callbacks=[self._event])
        except WatchUnavailable:
            raise
        except Exception as e:
            if fresh and notifier is not None:
                notifier.loseConnection()
            raise WatchUnavailable("cannot watch %s: %s" % (directory, e)) from e
        self._notifier = notifier

    def stop(self) -> None:
        """Stop watching every directory (idempotent)."""
        notifier, self._notifier = self._notifier, None
        if notifier is not None:
            notifier.loseConnection()

    def _event(self, _watch: Any, path: FilePath[Any], _mask: int) -> None:
        name = path.basename()
        if isinstance(name, bytes):
            name = name.decode(errors="surrogateescape")
        try:
            self.callback(name)
        except Exception:  # one bad event must not stop the watch
            self.log.failure("handling a change of {name} failed", name=name)
