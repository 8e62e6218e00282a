"""`python -m tests.cluster.fork_target --config F`: a stand-in service for the fork server's tests.

It writes what a started process can see of how it was started (arguments, directory, environment,
session, a random draw, its stdin) as JSON to its stdout, then does what F asks: exit with a code,
raise, be interrupted, or sleep until killed."""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path


def main() -> None:
    config = json.loads(Path(sys.argv[sys.argv.index("--config") + 1]).read_text())
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ), "pid": os.getpid(),
                      "session": os.getsid(0), "random": random.random(), "stdin": sys.stdin.read(),
                      "name": __name__}))
    if config.get("raise"):
        raise RuntimeError(config["raise"])
    if config.get("interrupt"):
        raise KeyboardInterrupt
    if config.get("sleep_s"):
        time.sleep(float(config["sleep_s"]))
    sys.exit(config.get("exit", 0))


if __name__ == "__main__":
    main()
