"""workloads.concurrent's tasks: threads in tests, bare greenlets once gevent patched `threading`.

The load process runs the greenlet form (workloads.runner patches), so it is checked here
in a child process that patches as the runner does: `Background` joins its finishers and
frees their slots.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from workloads.concurrent import Background, start_task

CHILD = textwrap.dedent("""
    from gevent import monkey
    monkey.patch_all()
    import threading, time
    import gevent
    from workloads.concurrent import Background, _Greenlet, start_task

    task = start_task(lambda: None, "t")
    assert isinstance(task, _Greenlet), type(task)
    task.join(1.0)
    assert not task.is_alive()

    errors = []
    done = []
    bg = Background(2, errors.append)
    for i in range(4):
        assert bg.acquire(threading.Event(), 5.0)
        bg.spawn(lambda i=i: (time.sleep(0.01), done.append(i)))
    assert bg.join(5.0)
    assert sorted(done) == [0, 1, 2, 3] and not errors and bg.most_in_flight == 2
    print("OK")
""")


def test_greenlet_tasks_in_a_patched_process() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "OK"


def test_threads_without_gevent() -> None:
    seen: list[int] = []
    task = start_task(lambda: seen.append(1), "t")
    task.join(5.0)
    assert not task.is_alive() and seen == [1]
    bg = Background(1, lambda exc: None)
    assert bg.acquire(__import__("threading").Event(), 5.0)
    bg.spawn(lambda: seen.append(2))
    assert bg.join(5.0) and seen == [1, 2]
