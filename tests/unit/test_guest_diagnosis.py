"""Reading the register samples of a guest that does not answer on its console (L{spins_in_place})."""

from __future__ import annotations

from ganeti.testing.guest_migration import spins_in_place

# what qmp_status wrote in a failed run: a guest in delay_tsc, its TSC (RAX) moving on
STUCK = """{"status": "running", "singlestep": false, "running": true}
RAX=000000360fd3be99 RDX=00000000000b2424 RIP=ffffffff819f77a3 RFL=00000203 HLT=0
RAX=000000369aa1803d RDX=000000000016c53a RIP=ffffffff819f77a3 RFL=00000203 HLT=0
RAX=0000003724339225 RDX=00000000000d07de RIP=ffffffff819f77a3 RFL=00000203 HLT=0"""


def test_one_instruction_in_every_sample_is_spinning() -> None:
    assert spins_in_place(STUCK)


def test_two_instructions_of_one_short_loop_are_spinning() -> None:
    # seen in a later run: the samples alternate between two instructions 25 bytes apart
    loop = STUCK.replace("RIP=ffffffff819f77a3 RFL=00000203 HLT=0\nRAX=0000003724339225",
                         "RIP=ffffffff819f77bc RFL=00000203 HLT=0\nRAX=0000003724339225")
    assert spins_in_place(loop)


def test_a_guest_that_moves_on_is_not() -> None:
    moving = STUCK.replace("RIP=ffffffff819f77a3 RFL=00000203 HLT=0\nRAX=0000003724339225",
                           "RIP=ffffffff81000010 RFL=00000203 HLT=0\nRAX=0000003724339225")
    assert not spins_in_place(moving)


def test_without_samples_nothing_is_said() -> None:
    assert not spins_in_place("no answer ([Errno 111] Connection refused)")
    assert not spins_in_place("RAX=1 RDX=2 RIP=ffffffff819f77a3 RFL=3 HLT=0")  # one sample: no comparison
