"""Ctrl-C held while a step must finish (harness/interrupts.py), without processes."""

from __future__ import annotations

import os
import signal
import threading

from harness.interrupts import sigint_deferred


def test_a_ctrl_c_during_the_block_is_counted_and_the_handler_restored() -> None:
    before = signal.getsignal(signal.SIGINT)
    with sigint_deferred() as received:
        os.kill(os.getpid(), signal.SIGINT)       # delivered to the main thread, held
        os.kill(os.getpid(), signal.SIGINT)
    assert len(received) == 2
    assert signal.getsignal(signal.SIGINT) is before


def test_off_the_main_thread_the_block_just_runs() -> None:
    seen: list[list[int]] = []

    def body() -> None:
        with sigint_deferred() as received:
            seen.append(received)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join(5)
    assert seen == [[]]
