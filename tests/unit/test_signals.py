"""SIGTERM or Ctrl-C: the first asks the loop to finish and stop, a second stops at once."""

from __future__ import annotations

import os
import signal

import pytest

from ferry.signals import stop_on_signals


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_first_signal_asks_to_stop_second_interrupts_and_handlers_come_back(sig: int) -> None:
    before = signal.getsignal(sig)
    asked: list[str] = []
    with pytest.raises(KeyboardInterrupt), stop_on_signals(lambda: asked.append("stop")):
        os.kill(os.getpid(), sig)
        assert asked == ["stop"]
        os.kill(os.getpid(), sig)
        pytest.fail("a second signal must interrupt")
    assert asked == ["stop"]
    assert signal.getsignal(sig) is before
