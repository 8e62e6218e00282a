"""Ctrl-C held while a step must finish (harness/interrupts.py), without processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.interrupts import sigint_deferred, terminate_as_interrupt


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


def test_a_sigterm_during_the_block_is_held_like_a_ctrl_c() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with sigint_deferred() as received:
        os.kill(os.getpid(), signal.SIGTERM)
    assert received == [1]
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_sigterm_is_a_ctrl_c_once_taken_as_one() -> None:
    before = signal.getsignal(signal.SIGTERM)
    try:
        terminate_as_interrupt()
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)        # the handler runs between bytecodes, well before this ends
    finally:
        signal.signal(signal.SIGTERM, before)


def test_the_command_line_cleans_up_on_sigterm_as_on_ctrl_c() -> None:
    # the path a cancelled CI job takes: `txnbench` gets SIGTERM mid-command and exits as interrupted
    program = ("import argparse, sys, time\n"
               "from orchestrator import cli\n"
               "def slow(_args):\n"
               "    print('ready', flush=True)\n"
               "    time.sleep(30)\n"
               "    return 0\n"
               "class Parser:\n"
               "    def parse_args(self, _argv):\n"
               "        return argparse.Namespace(handler=slow)\n"
               "cli.build_parser = Parser\n"
               "sys.exit(cli.main([]))\n")
    child = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGTERM)
        _out, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130 and "txnbench: interrupted" in err
