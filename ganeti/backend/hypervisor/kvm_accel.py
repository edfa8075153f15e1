"""Whether KVM acceleration really works on this node, or qemu must use TCG.

A readable C{/dev/kvm} is not enough: on some hosts (nested or
paravirtualized ones) qemu opens it, starts, and the guest then hangs in
its firmware without a word.  So the node tries: L{probe_argv} runs qemu
with C{accel=kvm}, SeaBIOS and a one-sector boot floppy (L{BOOT_SECTOR})
that writes to an C{isa-debug-exit} port, which ends qemu with exit code
L{PROBE_EXIT_CODE}.  Anything else within L{PROBE_TIMEOUT} seconds (an
error, another exit, no exit at all) means TCG.  A KVM that needs more than
L{FAST_KVM} seconds for it is measured against TCG running the same probe
(L{slower_than_tcg}): on some nested hosts KVM passes the probe in seconds
where TCG takes a tenth of one, and a real guest then never boots under it;
KVM slower than emulation means TCG.  The answer is kept in
C{<run_dir>/kvm-hypervisor/accel.json} for the qemu binary and the node's
boot (C{/proc/sys/kernel/random/boot_id}): a reboot or another binary
probes again.

The hvparam C{kvm_flag} (Ganeti's) decides per instance: C{""} (the
default) takes the probe's answer, C{"enabled"} forces KVM and
C{"disabled"} forces TCG without probing.  L{decide} is the pure rule.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.internet.error import ProcessDone
from twisted.internet.protocol import ProcessProtocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti import serializer
from ganeti.backend.hypervisor import HypervisorError

ACCEL_KVM = "kvm"
ACCEL_TCG = "tcg"
#: Ganeti's hvparam and its values; "" = probe
KVM_FLAG = "kvm_flag"
KVM_FLAG_ENABLED = "enabled"
KVM_FLAG_DISABLED = "disabled"
KVM_FLAG_VALUES = ("", KVM_FLAG_ENABLED, KVM_FLAG_DISABLED)

#: seconds the probe guest has to end qemu (real KVM: well under one)
PROBE_TIMEOUT = 4.0
#: a KVM probe this fast is taken at its word; a slower one is compared with TCG's
FAST_KVM = 1.0
#: KVM is kept when its probe took at most this factor of TCG's time, plus L{SLACK} seconds
SLOWDOWN = 2.0
SLACK = 0.5

#: the I/O port of the isa-debug-exit device and the byte the guest writes;
#: qemu then exits with (byte << 1) | 1
PROBE_PORT = 0xF4
PROBE_BYTE = 0x2A
PROBE_EXIT_CODE = (PROBE_BYTE << 1) | 1

#: a boot sector: mov al, PROBE_BYTE; out PROBE_PORT, al; hlt; jmp $-1
BOOT_SECTOR = bytes([0xB0, PROBE_BYTE, 0xE6, PROBE_PORT, 0xF4, 0xEB, 0xFD]).ljust(510, b"\0") + b"\x55\xaa"

_BOOT_ID = "/proc/sys/kernel/random/boot_id"


def decide(kvm_flag: Any, probed: str | None) -> str:
    """The accelerator of an instance: C{kvm_flag} forces, else the probe's
    answer (C{None}: not known, which means TCG).

    @raise HypervisorError: C{kvm_flag} is none of L{KVM_FLAG_VALUES}.
    """
    if kvm_flag is None:
        kvm_flag = ""
    if kvm_flag not in KVM_FLAG_VALUES:
        raise HypervisorError("hvparam kvm_flag=%r is not supported; use %r, %r or '' (probe the node)"
                              % (kvm_flag, KVM_FLAG_ENABLED, KVM_FLAG_DISABLED))
    if kvm_flag == KVM_FLAG_ENABLED:
        return ACCEL_KVM
    if kvm_flag == KVM_FLAG_DISABLED:
        return ACCEL_TCG
    return ACCEL_KVM if probed == ACCEL_KVM else ACCEL_TCG


def needs_probe(kvm_flag: Any) -> bool:
    """Whether L{decide} needs the probe's answer for C{kvm_flag}."""
    return kvm_flag in ("", None)


def probe_argv(binary: str, floppy: str, accel: str = ACCEL_KVM) -> list[str]:
    """qemu with C{accel} (KVM unless told), SeaBIOS and the probe floppy; nothing else."""
    return [binary, "-machine", "pc,accel=" + accel, "-m", "16", "-nodefaults", "-no-user-config",
            "-display", "none", "-serial", "none", "-monitor", "none",
            "-drive", "file=%s,format=raw,if=floppy" % floppy.replace(",", ",,"),
            "-device", "isa-debug-exit,iobase=0x%x,iosize=0x04" % PROBE_PORT]


def verdict(exit_code: int | None, timed_out: bool, output: str) -> tuple[str, str]:
    """C{(accelerator, why)} from how the probe's qemu ended."""
    if exit_code == PROBE_EXIT_CODE and not timed_out:
        return ACCEL_KVM, "the probe guest ran under KVM"
    if timed_out:
        return ACCEL_TCG, "the probe guest did not finish within %s s under KVM" % PROBE_TIMEOUT
    tail = " ".join(output.split())[-300:]
    return ACCEL_TCG, "qemu with accel=kvm ended with code %s%s" % (exit_code, (": " + tail) if tail else "")


def slower_than_tcg(kvm_seconds: float, tcg: tuple[int | None, bool, str] | None,
                    tcg_seconds: float) -> str | None:
    """Why a KVM whose probe took C{kvm_seconds} is of no use, given how the same probe ran under
    TCG (C{tcg}: exit code, timed out, output; C{None}: it could not run); C{None} when KVM stays."""
    if kvm_seconds <= FAST_KVM or tcg is None or tcg[0] != PROBE_EXIT_CODE or tcg[1]:
        return None
    if kvm_seconds <= SLOWDOWN * tcg_seconds + SLACK:
        return None  # a loaded host: both were slow
    return ("the probe guest took %.2f s under KVM and %.2f s under TCG: KVM is slower than emulation here"
            % (kvm_seconds, tcg_seconds))


class ProbeProtocol(ProcessProtocol):
    """One probe run: kills qemu after C{timeout}; C{ended} fires with
    C{(exit code or None, timed out, output)}."""

    def __init__(self, clock: Any, timeout: float = PROBE_TIMEOUT) -> None:
        self._clock, self._timeout = clock, timeout
        self._out: list[bytes] = []
        self.timed_out = False
        self.ended: Deferred[tuple[int | None, bool, str]] = Deferred()
        self._timer: Any = None

    def connectionMade(self) -> None:
        self._timer = self._clock.callLater(self._timeout, self._kill)

    def _kill(self) -> None:
        self.timed_out = True
        try:
            self.transport.signalProcess("KILL")  # type: ignore[union-attr]
        except Exception:  # already gone
            pass

    def outReceived(self, data: bytes) -> None:
        self._out.append(data)

    errReceived = outReceived

    def processEnded(self, reason: Failure) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        code = 0 if reason.check(ProcessDone) else getattr(reason.value, "exitCode", None)
        self.ended.callback((code, self.timed_out, b"".join(self._out).decode("utf-8", "replace")))


def boot_id(path: str = _BOOT_ID) -> str:
    """This boot of the node ("" when the kernel does not say)."""
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return ""


class AccelProbe:
    """The probe's answer for this node, cached per boot and qemu binary.

    @param state_dir: where C{accel.json} lives.
    @param reactor: spawns the probe and times it out.
    @param run: C{run(argv)} -> Deferred of C{(exit code, timed out,
        output)}; the default spawns qemu (tests give a fake).
    @param boot: C{boot()} -> this boot's id.
    """

    log = Logger()

    def __init__(self, state_dir: str, reactor: Any, run: Callable[[list[str]], Deferred[Any]] | None = None,
                 boot: Callable[[], str] = boot_id) -> None:
        self.path = os.path.join(state_dir, "accel.json")
        self._state_dir = state_dir
        self._reactor = reactor
        self._run = run if run is not None else self._spawn
        self._boot = boot
        self._running: dict[str, list[Deferred[str]]] = {}

    def cached(self, binary: str | None = None) -> dict[str, Any] | None:
        """The cached answer of this boot (for C{binary} when given)."""
        try:
            record = serializer.read_json(self.path)
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("boot_id") != self._boot():
            return None
        if record.get("accel") not in (ACCEL_KVM, ACCEL_TCG):
            return None
        if binary is not None and record.get("binary") != binary:
            return None
        return record

    def accel(self, binary: str) -> Deferred[str]:
        """C{"kvm"} or C{"tcg"} for C{binary}; probes at most once at a time."""
        record = self.cached(binary)
        if record is not None:
            return succeed(str(record["accel"]))
        d: Deferred[str] = Deferred()
        waiting = self._running.get(binary)
        if waiting is not None:
            waiting.append(d)
            return d
        self._running[binary] = [d]
        ensureDeferred(self._probe(binary)).addBoth(self._done, binary)
        return d

    def _done(self, result: Any, binary: str) -> None:
        for d in self._running.pop(binary, []):
            if isinstance(result, Failure):
                d.errback(result)
            else:
                d.callback(result)

    async def _probe(self, binary: str) -> str:
        os.makedirs(self._state_dir, mode=0o755, exist_ok=True)
        with tempfile.NamedTemporaryFile(prefix=".accel-probe", dir=self._state_dir) as floppy:
            floppy.write(BOOT_SECTOR)
            floppy.flush()
            started = self._reactor.seconds()
            try:
                code, timed_out, output = await self._run(probe_argv(binary, floppy.name))
            except Exception as e:  # qemu could not even be run
                code, timed_out, output = None, False, str(e)
            seconds = self._reactor.seconds() - started
            accel, why = verdict(code, timed_out, output)
            if accel == ACCEL_KVM and seconds > FAST_KVM:
                tcg_started = self._reactor.seconds()
                try:
                    tcg = await self._run(probe_argv(binary, floppy.name, ACCEL_TCG))
                except Exception:
                    tcg = None
                slow = slower_than_tcg(seconds, tcg, self._reactor.seconds() - tcg_started)
                if slow is not None:
                    accel, why = ACCEL_TCG, slow
        seconds = self._reactor.seconds() - started
        self.log.info("KVM acceleration probe with {binary}: {accel} ({why}; {seconds:.2f} s)",
                      binary=binary, accel=accel, why=why, seconds=seconds)
        record = {"boot_id": self._boot(), "binary": binary, "accel": accel, "reason": why,
                  "probe_seconds": round(seconds, 3), "probed_at": self._reactor.seconds()}
        serializer.write_json(self.path, record, mode=0o644, durable=False)
        return accel

    def _spawn(self, argv: list[str]) -> Deferred[Any]:
        protocol = ProbeProtocol(self._reactor)
        try:
            self._reactor.spawnProcess(protocol, argv[0], argv, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                                                     "LC_ALL": "C"})
        except OSError as e:
            raise HypervisorError("Cannot run %s: %s" % (argv[0], e)) from None
        return protocol.ended
