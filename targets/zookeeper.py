"""Run a real ZooKeeper (3.9.x, the one PySpark ships) as a child process.

Why here: ZooKeeper is a foreign Java server that the embedded target launches as the
cluster's `metadata` service (`metadataStoreUrl=zk`), not part of our store; the tools
start one the same way (`tools/launch.py`).

Why PySpark's jars: `pyspark/jars/` holds `zookeeper-*.jar`, `zookeeper-jute-*.jar` and
the logging and netty jars a standalone server needs, so a real ZooKeeper is one `java`
command away with nothing more to install. The server binds 127.0.0.1 only, has no
admin HTTP server, syncs its transaction log (`forceSync=yes`), keeps its data and
transaction log where its zoo.cfg says (a kill -9 and a restart keep the data), and is
stopped by its pid only. Readiness is ZooKeeper's own four-letter `srvr` answer.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import requests

from targets import zk_watchdog
from targets.processes import HOST, ServiceProcess

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


@dataclass
class ZooKeeperServer(ServiceProcess):
    """A standalone ZooKeeper server as one of the cluster's services.

    Ready when `srvr` answers (it has no admin HTTP server). Java cannot watch its parent
    as our services do (`parent_pid`), so once it runs a watchdog (`zk_watchdog`) kills it
    when `owner_pid` dies: a run or a test session killed with -9 leaves no ZooKeeper.
    """

    port: int = 0
    owner_pid: int | None = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        """Pulsar's `metadataStoreUrl` for this server."""
        return f"zk:{self.address}"

    def spawn(self, env: dict[str, str] | None = None) -> None:
        super().spawn(env)
        if self.owner_pid and self.pid and self.start_time is not None:
            zk_watchdog.spawn(self.owner_pid, self.pid, self.start_time)

    def answers(self, session: requests.Session | None = None) -> bool:
        return srvr_ok(HOST, self.port)


__all__ = ["MIN_JAVA", "ZooKeeperServer", "ZooKeeperUnavailable", "java_binary", "java_major", "pyspark_jars",
           "server_command", "srvr_ok", "write_config", "zoo_cfg", "zookeeper_version"]
