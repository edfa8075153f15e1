"""The confd service: owns the HMAC key and the index, and reloads them.

C{config.data} is watched with inotify on the data directory (WConfD and
NodeD replace it by rename, so C{IN_MOVED_TO}; C{IN_CLOSE_WRITE} for
editors), and checked again every C{check_interval} seconds in case an event
was missed.  A reload builds the whole new L{Index} first and then swaps
one attribute, so a query sees the old or the new config, never a mix.  A
file that does not parse is logged and the old index keeps serving.
"""

from __future__ import annotations

import gc
import os
import time
from typing import Any, Callable

from twisted.application.service import Service
from twisted.internet.interfaces import IReactorFDSet, IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from ganeti.confd.answers import Index
from ganeti.daemon import release_freed_memory
from ganeti.dirwatch import CREATED, WRITTEN, DirectoryWatcher
from ganeti.paths import Paths

CHECK_INTERVAL = 5.0
#: a config.data reload (its index built) that took C{d} seconds, more than L{SPACED_ABOVE}, is followed by
#: the next one C{RELOAD_SPACING * d} seconds later at the earliest: with 10,000 instances a reload takes half a
#: second, and WConfD may rewrite config.data several times a second while changes come
RELOAD_SPACING = 3.0
SPACED_ABOVE = 0.05
#: the clock a reload's cost is measured with (tests replace it)
_elapsed = time.monotonic


def read_key(path: str) -> bytes:
    """The HMAC key: the file's bytes as stored (Ganeti keeps the newline)."""
    with open(path, "rb") as handle:
        key = handle.read()
    if not key.strip():
        raise ValueError("HMAC key %s is empty" % path)
    return key


#: Confd keys accepted besides C{hmac.key} during C{gnt-cluster renew-crypto --new-confd-hmac-key}.
ACCEPT_FILE = "hmac.key.accept"


def accept_file(paths: Paths) -> str:
    return os.path.join(paths.data_dir, ACCEPT_FILE)


def read_accepted_keys(paths: Paths) -> tuple[bytes, ...]:
    """The keys of C{hmac.key.accept}, one per line, without their newlines (none without the file).

    @raise OSError: the file exists but cannot be read
    """
    try:
        with open(accept_file(paths), "rb") as handle:
            return tuple(line.strip() for line in handle if line.strip())
    except FileNotFoundError:
        return ()


def _signature(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)


class ConfdService(Service):
    log = Logger()

    def __init__(
        self,
        paths: Paths,
        clock: IReactorTime,
        *,
        check_interval: float = CHECK_INTERVAL,
        watch: Callable[[str, Callable[[str], None]], Any] | None = None,
        freeze_gc: bool = False,
    ) -> None:
        """
        @param watch: C{watch(directory, callback)} starts watching a
            directory and returns an object with C{stop()}; the
            callback gets the changed file's name.  C{None}: no inotify.
        @param freeze_gc: after each reload, collect the old index and move
            the new one out of the garbage collector's sight (C{gc.freeze}),
            so that full collections during queries stay short, and give
            the memory freed back to the system (the daemon sets this; it is
            process-wide, so tests leave it off).
        """
        self.paths = paths
        self.clock = clock
        self.check_interval = check_interval
        self._watch = watch
        self._freeze_gc = freeze_gc
        self._watcher: Any = None
        self._loop: LoopingCall | None = None
        self.key: bytes = b""
        #: keys accepted besides C{key} while renew-crypto changes it (C{hmac.key.accept}, one per line)
        self.accepted_keys: tuple[bytes, ...] = ()
        self._accept_sig: tuple[int, int, int, int] | None = None
        self.index: Index | None = None
        self._config_sig: tuple[int, int, int, int] | None = None
        self._key_sig: tuple[int, int, int, int] | None = None
        self.reloads = 0
        #: (clock time) no config reload before then (L{RELOAD_SPACING}); the check waiting for it
        self._next_config_at = 0.0
        self._spaced: Any = None

    def load_key(self) -> None:
        """(Re)read hmac.key if it changed; raises if it never could be read."""
        sig = _signature(self.paths.hmac_key)
        if sig == self._key_sig and self.key:
            return
        try:
            key = read_key(self.paths.hmac_key)
        except (OSError, ValueError) as e:
            if not self.key:
                raise
            self.log.error("cannot reload the HMAC key, keeping the old one: {why}", why=str(e))
            return
        self.key, self._key_sig = key, sig

    def load_accepted_keys(self) -> None:
        """(Re)read C{hmac.key.accept}: the keys accepted besides the current one (none without the file),
        each as C{hmac.key} holds it (newline included)."""
        path = accept_file(self.paths)
        sig = _signature(path)
        if sig == self._accept_sig:
            return
        try:
            keys = tuple(key + b"\n" for key in read_accepted_keys(self.paths))  # as hmac.key holds one
        except OSError as e:
            self.log.error("cannot read {path}: {why}", path=path, why=str(e))
            return
        self.accepted_keys, self._accept_sig = keys, sig

    def load_config(self, force: bool = False) -> bool:
        """Rebuild the index if config.data changed; True if it was swapped."""
        path = self.paths.config_data
        sig = _signature(path)
        if sig is None:
            if self._config_sig is not None or self.index is None:
                self.log.warn("no configuration at {path}", path=path)
            self._config_sig = None
            return False
        if sig == self._config_sig and not force:
            return False
        try:
            with open(path, "rb") as handle:
                data = handle.read()
            index = Index.build(data)
        except Exception as e:
            # a half-written or corrupt file: remember it so as not to log it again
            self._config_sig = sig
            self.log.error(
                "ignoring unusable {path} ({why}); still serving serial {serial}",
                path=path,
                why=str(e) or type(e).__name__,
                serial=self.index.serial if self.index else None,
            )
            return False
        self._config_sig = sig
        self.index = index  # the atomic swap
        self.reloads += 1
        if self._freeze_gc:
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            release_freed_memory()  # the old index and the file's bytes
        self.log.info(
            "loaded configuration serial {serial} (cluster serial {cluster_serial})",
            serial=index.serial,
            cluster_serial=index.cluster_serial,
        )
        return True

    def check(self) -> None:
        """The timer's and inotify's entry point: reload what changed (the
        config no sooner than L{RELOAD_SPACING} allows after a slow reload:
        a check before then comes back at that time)."""
        try:
            self.load_key()
        except (OSError, ValueError) as e:
            self.log.error("no usable HMAC key: {why}", why=str(e))
        self.load_accepted_keys()
        now = self.clock.seconds()
        if self.index is not None and now < self._next_config_at:
            if self._spaced is None or not self._spaced.active():
                self._spaced = self.clock.callLater(self._next_config_at - now, self.check)
            return
        started = _elapsed()
        self.load_config()
        took = _elapsed() - started
        self._next_config_at = self.clock.seconds() + RELOAD_SPACING * took if took > SPACED_ABOVE else 0.0

    def _changed(self, name: str) -> None:
        if name in ("config.data", "hmac.key", ACCEPT_FILE):
            self.check()

    def startService(self) -> None:
        super().startService()
        self.check()
        self._loop = LoopingCall(self.check)
        self._loop.clock = self.clock
        self._loop.start(self.check_interval, now=False)
        if self._watch is not None:
            try:
                self._watcher = self._watch(self.paths.data_dir, self._changed)
            except Exception as e:
                self.log.warn("no inotify on {dir} ({why}); polling only", dir=self.paths.data_dir, why=str(e))

    def stopService(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self._spaced is not None and self._spaced.active():
            self._spaced.cancel()
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        super().stopService()


def inotify_watch(reactor: IReactorFDSet) -> Callable[[str, Callable[[str], None]], Any]:
    """A C{watch} for L{ConfdService}: files written or created in the directory."""

    def watch(directory: str, callback: Callable[[str], None]) -> Any:
        watcher = DirectoryWatcher(reactor, callback, events=(WRITTEN, CREATED))
        watcher.watch(directory)
        return watcher

    return watch
