"""Run a real ZooKeeper (3.9.x, the one PySpark ships) as a child process.

Why PySpark's jars: `pyspark/jars/` holds `zookeeper-*.jar`, `zookeeper-jute-*.jar` and
the logging and netty jars a standalone server needs, so a real ZooKeeper is one `java`
command away with nothing more to install. The server binds 127.0.0.1 only, has no
admin HTTP server, syncs its transaction log (`forceSync=yes`), keeps its data and
transaction log under `base_dir` (a kill -9 and a restart keep the data), logs to
`base_dir/<name>.log`, and is stopped by its pid only. Readiness is ZooKeeper's own
four-letter `srvr` answer.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from harness.targets import zk_watchdog
from harness.targets.processes import HOST, free_port

#: ZooKeeper 3.9 runs on Java 8+; PySpark 4 itself needs 17, which is what we check for.
MIN_JAVA = 17
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"


class ZooKeeperUnavailable(RuntimeError):
    """No usable Java or no ZooKeeper jars: the one-line reason."""


def pyspark_jars() -> Path:
    """`<site-packages>/pyspark/jars`, found from the installed module (never a fixed path)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ZooKeeperUnavailable("ZooKeeper needs PySpark's jars, and pyspark is not installed (make setup)")
    jars = Path(spec.origin).parent / "jars"
    if not any(jars.glob("zookeeper-[0-9]*.jar")):
        raise ZooKeeperUnavailable(f"no zookeeper-*.jar in {jars}: this PySpark does not ship ZooKeeper")
    return jars


def zookeeper_version() -> str | None:
    """The version of PySpark's ZooKeeper jar (`zookeeper-3.9.5.jar` -> "3.9.5"); None without one."""
    try:
        jars = pyspark_jars()
    except ZooKeeperUnavailable:
        return None
    for jar in sorted(jars.glob("zookeeper-[0-9]*.jar")):
        m = re.fullmatch(r"zookeeper-(\d[\w.]*)\.jar", jar.name)
        if m:
            return m.group(1)
    return None


def java_binary() -> str:
    """The `java` to run (JAVA_HOME first), checked to be at least `MIN_JAVA`."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home and (Path(home) / "bin" / "java").exists() else shutil.which("java")
    if java is None:
        raise ZooKeeperUnavailable(f"ZooKeeper needs Java {MIN_JAVA}+ and no `java` is on PATH (nor JAVA_HOME)")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ZooKeeperUnavailable(f"`{java} -version` failed: {err}") from None
    major = java_major(out.stderr + out.stdout)
    if major is None or major < MIN_JAVA:
        raise ZooKeeperUnavailable(f"ZooKeeper needs Java {MIN_JAVA}+; {java} is "
                                   f"{'of unknown version' if major is None else f'Java {major}'}")
    return java


def java_major(version_text: str) -> int | None:
    """The major version in `java -version` output ("1.8.0_392" -> 8, "17.0.9" -> 17)."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if m is None:
        return None
    first = int(m.group(1))
    return int(m.group(2) or 0) if first == 1 else first


def zoo_cfg(port: int, data_dir: Path, log_dir: Path, tick_ms: int, max_session_ms: int) -> str:
    """A standalone server's zoo.cfg; maxSessionTimeout lets brokers ask for their own timeout."""
    return "\n".join([
        f"tickTime={tick_ms}",
        f"dataDir={data_dir}",
        f"dataLogDir={log_dir}",
        f"clientPort={port}",
        f"clientPortAddress={HOST}",
        "admin.enableServer=false",
        "forceSync=yes",
        "4lw.commands.whitelist=srvr,ruok,mntr",
        f"minSessionTimeout={2 * tick_ms}",
        f"maxSessionTimeout={max_session_ms}",
        "maxClientCnxns=0",
        "",
    ])


LOG4J2 = """status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{ISO8601} %-5p [%t] %c{1}: %m%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
"""


def write_config(folder: Path, port: int, data_dir: Path, log_dir: Path, tick_ms: int = 500,
                 max_session_ms: int = 60_000) -> Path:
    """zoo.cfg and the log4j2 setup (INFO to stdout, which the launcher sends to the log file)."""
    folder.mkdir(parents=True, exist_ok=True)
    for d in (data_dir, log_dir):
        d.mkdir(parents=True, exist_ok=True)
    (folder / "log4j2.properties").write_text(LOG4J2)
    config = folder / "zoo.cfg"
    config.write_text(zoo_cfg(port, data_dir, log_dir, tick_ms, max_session_ms))
    return config


def server_command(config: Path) -> list[str]:
    """The `java` command of a standalone server on PySpark's jars (checks Java and the jars)."""
    return [java_binary(), "-Xmx256m", "-XX:+UseSerialGC", "-cp", f"{pyspark_jars()}/*",
            f"-Dlog4j2.configurationFile={config.parent / 'log4j2.properties'}", MAIN_CLASS, str(config)]


def srvr_ok(host: str, port: int) -> bool:
    """ZooKeeper's own readiness: `srvr` answers with its mode once it serves."""
    try:
        with socket.create_connection((host, port), timeout=1) as s:
            s.sendall(b"srvr")
            s.settimeout(1)
            answer = s.recv(4096)
    except OSError:
        return False
    return b"Mode:" in answer


class ZooKeeperProcess:
    """One standalone ZooKeeper server, started and stopped by pid."""

    def __init__(self, base_dir: Path, *, name: str = "zookeeper", port: int | None = None,
                 tick_ms: int = 500, max_session_ms: int = 60_000) -> None:
        self.base_dir = base_dir
        self.name = name
        self.port = port or free_port()
        self.data_dir = base_dir / "data"
        self.txn_log_dir = base_dir / "txnlog"
        self.config_path = base_dir / "zoo.cfg"
        self.log_path = base_dir / f"{name}.log"
        self.tick_ms = tick_ms
        self.max_session_ms = max_session_ms
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        """Pulsar's `metadataStoreUrl` for this server."""
        return f"zk:{self.address}"

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self, timeout_s: float = 60.0) -> None:
        if self.running():
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        write_config(self.base_dir, self.port, self.data_dir, self.txn_log_dir, self.tick_ms, self.max_session_ms)
        command = server_command(self.config_path)
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True, close_fds=True)
        # a Java server outlives a killed owner (a test session stopped with -9): the watchdog does not
        zk_watchdog.spawn(os.getpid(), self.popen.pid)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:   # bounded by the deadline
            if not self.running():
                raise RuntimeError(f"{self.name} exited with {self.popen.returncode} while starting:\n{self.tail()}")
            if self.healthy():
                return
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"{self.name} did not answer `srvr` within {timeout_s}s:\n{self.tail()}")

    def healthy(self) -> bool:
        return srvr_ok(HOST, self.port)

    def kill(self) -> None:
        """kill -9 and reap."""
        if self.running() and self.popen is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL when it lingers."""
        if not self.running() or self.popen is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def __enter__(self) -> ZooKeeperProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["MIN_JAVA", "ZooKeeperProcess", "ZooKeeperUnavailable", "java_binary", "java_major", "pyspark_jars",
           "server_command", "srvr_ok", "write_config", "zoo_cfg", "zookeeper_version"]
