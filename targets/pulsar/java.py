"""Finding a Java that can run a given Pulsar release.

Why a search: Pulsar 4.0 runs on Java 17, Pulsar 5.0's servers need 21+, and machines
often have several JDKs with only one on PATH (here: OpenJDK 17 as `java`, a Temurin 25
beside it). The search takes, in order, `TXNBENCH_JAVA_HOME`, `JAVA_HOME`, `java` on PATH,
then every JDK under the usual install folders, and returns the first new enough; the
error names what it found and how to get one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

from harness.errors import MissingTool
from targets.zookeeper import java_major

#: Where Debian, Red Hat and macOS-style installs and SDKMAN put JDKs (searched, never assumed).
JDK_FOLDERS = ("/usr/lib/jvm", "/usr/java", "/opt/java", "/Library/Java/JavaVirtualMachines",
               "~/.sdkman/candidates/java", "~/.jdks")
HOME_ENVS = ("TXNBENCH_JAVA_HOME", "JAVA_HOME")


def java_candidates() -> Iterator[Path]:
    """Every `java` the search looks at, in its order (may repeat one through links)."""
    for env in HOME_ENVS:
        home = os.environ.get(env)
        if home:
            yield Path(home) / "bin" / "java"
    on_path = shutil.which("java")
    if on_path:
        yield Path(on_path)
    for folder in JDK_FOLDERS:
        root = Path(folder).expanduser()
        if root.is_dir():
            for jdk in sorted(root.iterdir(), reverse=True):   # newest names first
                for java in (jdk / "bin" / "java", jdk / "Contents" / "Home" / "bin" / "java"):
                    if java.is_file():
                        yield java


def probe(java: Path) -> int | None:
    """The major version of this `java` (None when it does not run)."""
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return java_major(out.stderr + out.stdout)


def find_java(min_major: int, candidates: Iterable[Path] | None = None) -> tuple[Path, int]:
    """The first Java of at least `min_major` (path, major); MissingTool (an EnvironmentProblem) naming the fix."""
    seen: dict[Path, int | None] = {}
    for java in candidates if candidates is not None else java_candidates():
        resolved = java.resolve() if java.exists() else java
        if resolved in seen:
            continue
        seen[resolved] = major = probe(java)
        if major is not None and major >= min_major:
            return java, major
    found = ", ".join(f"{p} (Java {m})" if m else f"{p} (does not run)" for p, m in seen.items()) or "none"
    raise MissingTool(
        f"this Pulsar release needs Java {min_major}+; found {found}. Install a JDK {min_major}+ (e.g. "
        f"`apt-get install openjdk-{max(min_major, 21)}-jdk-headless`, or Temurin from adoptium.net) and "
        f"set TXNBENCH_JAVA_HOME to it", f"Java {min_major}+")
