"""Building the Go servers a target runs (a real Oxia, the real Toxiproxy) on first use.

Theory of operation. Each tool is pinned here (`GoTool`: module, version, the package of
its server command). `ensure_binary(tool)` returns `<bin dir>/<name>-<version>` when it
exists; otherwise it downloads the module at that exact version with `go mod download
-json` (the Go module proxy, through Go's own module cache) and runs `go build` inside
the downloaded module, so the module's own `go.mod` and `go.sum` pin every dependency
(`-mod=readonly`: nothing is resolved anew). The binary is written under a temporary
name and renamed when complete: an interrupted build leaves nothing that looks built.
Progress goes to `say` every 15 s; the build's output to `<bin dir>/build-<name>.log`.

Why not `go install module/cmd@version`: it asks the proxy for the module's version
list to look for a deprecation notice, and the registry this project is built against
refuses that list for Oxia (`403 ... not available`) while serving the pinned version
itself; building in the downloaded module needs only the version asked for.

The bin dir is `.txnbench/bin/` under the current folder (git-ignored), or
`$TXNBENCH_BIN_DIR`. Go's module and build caches are Go's defaults (`go env
GOMODCACHE`, `GOCACHE`), so a second build of another version reuses the downloads.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import EnvironmentProblem, MissingTool

BIN_ENV = "TXNBENCH_BIN_DIR"
DEFAULT_BIN_DIR = Path(".txnbench/bin")
BUILD_TIMEOUT_S = 1800
PROGRESS_EVERY_S = 15.0


@dataclass(frozen=True)
class GoTool:
    """One pinned Go server: where its source is and what its binary is called here."""

    name: str            # the binary's name here: `oxia`, `toxiproxy-server`
    module: str          # the Go module, as the module proxy serves it
    version: str         # an exact tag
    package: str         # the command's package inside the module, relative (`./cmd`)
    min_go: tuple[int, int]   # the `go` line of the module's go.mod
    why: str             # why this version, for errors and docs

    @property
    def coordinate(self) -> str:
        return f"{self.module}@{self.version}"

    def binary_name(self) -> str:
        """Versioned, so a new pin builds a new binary instead of reusing the old one."""
        return f"{self.name}-{self.version}"


#: Oxia's server. v0.14.0: the newest tag the module proxy serves that Pulsar 5.0.1 can
#: talk to. Pulsar 5.0.1 ships the Java client oxia-client 0.9.5, which calls the gRPC
#: service `io.streamnative.oxia.proto.OxiaClient`; v0.14.x serves that one, v0.15.0 renamed
#: it `io.oxia.proto.v1.OxiaClient` (and its server module `oxiad` is not served on its own).
#: v0.14.1-v0.14.4 are refused by the registry ("not available").
OXIA = GoTool(name="oxia", module="github.com/oxia-db/oxia", version="v0.14.0", package="./cmd", min_go=(1, 24),
              why="the newest Oxia served that speaks io.streamnative.oxia.proto, Pulsar 5.0.1's client protocol")

#: Toxiproxy's server; v2.5.0 is the newest 2.x the module proxy lists (v2.3.0, v2.5.0).
TOXIPROXY = GoTool(name="toxiproxy-server", module="github.com/Shopify/toxiproxy/v2", version="v2.5.0",
                   package="./cmd/server", min_go=(1, 17), why="the newest Toxiproxy the module proxy lists")

TOOLS = {t.name: t for t in (OXIA, TOXIPROXY)}


def bin_dir() -> Path:
    return Path(os.environ.get(BIN_ENV, str(DEFAULT_BIN_DIR))).resolve()


def binary_path(tool: GoTool, root: Path | None = None) -> Path:
    return (root or bin_dir()) / tool.binary_name()


def go_version(text: str) -> tuple[int, int] | None:
    """`go version` output -> (major, minor): "go version go1.26.8 linux/amd64" -> (1, 26)."""
    m = re.search(r"\bgo(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def go_missing_message(tool: GoTool) -> str:
    return (f"the {tool.name} server ({tool.coordinate}) is built from source with Go on first use, and `go` is "
            f"not on PATH; install Go {tool.min_go[0]}.{tool.min_go[1]}+ (`apt-get install golang-go`, or the "
            f"tarball from go.dev/dl), or put an already built binary at {binary_path(tool)}")


def go_too_old_message(tool: GoTool, found: tuple[int, int] | None, go: str) -> str:
    have = f"{found[0]}.{found[1]}" if found else "of unknown version"
    return (f"building {tool.coordinate} needs Go {tool.min_go[0]}.{tool.min_go[1]}+; {go} is Go {have}; install "
            f"a newer Go (go.dev/dl) or put an already built binary at {binary_path(tool)}")


def download_dir(download_json: str) -> Path:
    """The module's folder from `go mod download -json` output; EnvironmentProblem with Go's error."""
    try:
        data = json.loads(download_json)
    except ValueError:
        raise EnvironmentProblem(f"`go mod download` printed no JSON: {download_json[:400]!r}") from None
    if data.get("Error"):
        raise EnvironmentProblem(f"the Go module proxy did not give {data.get('Path')}@{data.get('Version')}: "
                                 f"{data['Error']}")
    if not data.get("Dir"):
        raise EnvironmentProblem(f"`go mod download` named no folder for {data.get('Path')}: {download_json[:400]!r}")
    return Path(data["Dir"])


def build_argv(go: str, tool: GoTool, output: Path) -> list[str]:
    return [go, "build", "-mod=readonly", "-trimpath", "-buildvcs=false", "-o", str(output), tool.package]


def build_env(environ: dict[str, str]) -> dict[str, str]:
    """Go's environment for a build: modules on, no VCS stamping, Go's own caches and toolchain choice."""
    env = dict(environ)
    env["GO111MODULE"] = "on"
    env["GOFLAGS"] = " ".join(f for f in env.get("GOFLAGS", "").split() if not f.startswith("-mod="))
    env["GOWORK"] = "off"
    return env


def find_go(tool: GoTool) -> str:
    go = shutil.which("go")
    if go is None:
        raise MissingTool(go_missing_message(tool), "go")
    try:
        out = subprocess.run([go, "version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise EnvironmentProblem(f"`{go} version` failed: {err}") from None
    found = go_version(out.stdout + out.stderr)
    if found is None or found < tool.min_go:
        raise MissingTool(go_too_old_message(tool, found, go), f"go {tool.min_go[0]}.{tool.min_go[1]}+")
    return go


def _run(argv: Sequence[str], log: Path, what: str, say: Callable[[str], None], cwd: Path | None = None,
         env: dict[str, str] | None = None) -> str:
    """Run one Go command with its output in `log`; stdout is returned; progress every 15 s."""
    started = last = time.monotonic()
    out_path = log.with_suffix(".stdout")
    with log.open("ab") as err, out_path.open("wb") as out:
        err.write(f"\n==== {' '.join(argv)}\n".encode())
        err.flush()
        proc = subprocess.Popen(list(argv), stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
        try:
            while proc.poll() is None:
                time.sleep(0.5)
                now = time.monotonic()
                if now - started > BUILD_TIMEOUT_S:
                    proc.kill()
                    raise EnvironmentProblem(f"{what}: Go took more than {BUILD_TIMEOUT_S} s; see {log}")
                if now - last >= PROGRESS_EVERY_S:
                    last = now
                    say(f"  ... {what}: {now - started:.0f} s")
        except BaseException:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            raise
    stdout = out_path.read_text(errors="replace")
    out_path.unlink(missing_ok=True)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-12:])
        raise EnvironmentProblem(f"{what} failed (go exit {proc.returncode}); see {log}; last lines:\n{tail}")
    return stdout


def ensure_binary(tool: GoTool, say: Callable[[str], None] | None = None, root: Path | None = None) -> Path:
    """The tool's binary, built on first use and reused afterwards."""
    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    target = binary_path(tool, root)
    if target.is_file() and os.access(target, os.X_OK):
        return target
    go = find_go(tool)
    target.parent.mkdir(parents=True, exist_ok=True)
    log = target.parent / f"build-{tool.name}.log"
    env = build_env(dict(os.environ))
    say(f"building {tool.name} ({tool.coordinate}) with Go into {target} (first use: a few minutes; log {log})")
    started = time.monotonic()
    source = download_dir(_run([go, "mod", "download", "-json", tool.coordinate], log,
                               f"downloading {tool.coordinate}", say, cwd=target.parent, env=env))
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        _run(build_argv(go, tool, partial), log, f"building {tool.name} {tool.version}", say, cwd=source, env=env)
        partial.chmod(0o755)
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    say(f"{tool.name} {tool.version} built in {time.monotonic() - started:.0f} s")
    return target


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m targets.gobuild [oxia|toxiproxy-server ...]`: build (or find) the pinned servers."""
    names = list(argv if argv is not None else sys.argv[1:]) or list(TOOLS)
    for name in names:
        if name not in TOOLS:
            print(f"unknown tool {name!r}; choose from {', '.join(TOOLS)}", file=sys.stderr)
            return 2
        try:
            print(ensure_binary(TOOLS[name]))
        except EnvironmentProblem as err:
            print(f"txnbench: {err}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
