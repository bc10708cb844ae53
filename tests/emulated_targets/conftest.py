"""Emulation limits in these tests are safety nets against a hang, never measurements: an
emulated run on a machine busy with other work takes many times its quiet-machine time
(squeezenet on s390x: about 55 s quiet, over 120 s, the library's default limit, with eight
busy processes on two cores). Tests of the limits themselves set their own."""

import pytest

SAFETY_NET_S = 3600.0


@pytest.fixture(autouse=True)
def generous_emulation_limits(monkeypatch):
    from compilerkit.backends import emulated, emulator

    monkeypatch.setattr(emulated, "DEFAULT_TIMEOUT_S", SAFETY_NET_S)
    monkeypatch.setattr(emulator, "CALL_TIMEOUT_S", SAFETY_NET_S)
