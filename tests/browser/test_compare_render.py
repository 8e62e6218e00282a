"""compare.html renders in a real browser: headless Chromium decodes every chart and lays out the tables.

Chromium is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
JSON messages separated by NUL bytes on file descriptors 3 and 4), so the test
needs no port, no websocket library and no network. The page is loaded from
disk; the probe checks that each <img> decoded to a non-empty bitmap and is
drawn at a non-zero size, that the tables have rows and a size, and that the
page fetched nothing but itself. Where Chromium is not installed the test says
so and skips (CI installs Debian's `chromium` in .ci/run).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from analysis.compare import RunEntry, build_comparison
from analysis.report.compare_report import COMPARE_REPORT
from analysis.report.writer import write_report
from tests.unit.report.fakes import fake_perf, fake_results

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
         "--remote-debugging-pipe", "--window-size=1280,2000")
TIMEOUT_S = 30.0

PROBE = """
(async () => {
  const images = Array.from(document.images);
  const decoded = await Promise.all(images.map(i => i.decode().then(() => true, () => false)));
  const box = e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; };
  return JSON.stringify({
    href: location.href,
    title: document.title,
    images: images.map((img, k) => ({chart: img.dataset.chart, decoded: decoded[k], complete: img.complete,
                                     natural: [img.naturalWidth, img.naturalHeight], box: box(img)})),
    tables: Array.from(document.querySelectorAll('table')).map(t => ({rows: t.rows.length,
      cols: t.rows.length ? t.rows[0].cells.length : 0, box: box(t), text: t.innerText})),
    resources: performance.getEntriesByType('resource').map(e => e.name),
  });
})()
"""


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class DevTools:
    """A minimal DevTools-protocol client over Chromium's debugging pipe."""

    def __init__(self, binary: str, profile: Path) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire_pipes() -> None:  # in the child, before exec: Chromium reads fd 3 and writes fd 4
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=wire_pipes, pass_fds=(3, 4), start_new_session=True)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("Chromium did not answer over the DevTools pipe in time")
            ready, _, _ = select.select([self._from_chrome], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise ConnectionError(f"Chromium closed the DevTools pipe (exit code {self.proc.poll()})")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, session: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT_S
        for i, event in enumerate(self.events):
            if event.get("method") == method and event.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            event = self._read_message(deadline)
            if event.get("method") == method and event.get("sessionId") == session:
                return event
            self.events.append(event)

    def close(self) -> None:
        for fd in (self._to_chrome, self._from_chrome):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        # Helpers Chromium started in the session it leads (renderer, zygote, crashpad).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[DevTools]:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium); the rendering test needs it")
    tools = DevTools(binary, tmp_path / "chromium-profile")
    try:
        yield tools
    finally:
        tools.close()


def render(tools: DevTools, page: Path) -> dict[str, Any]:
    target = tools.call("Target.createTarget", url="about:blank")["targetId"]
    session = tools.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    tools.call("Page.enable", session)
    tools.call("Page.navigate", session, url=page.resolve().as_uri())
    tools.wait_event("Page.loadEventFired", session)
    result = tools.call("Runtime.evaluate", session, expression=PROBE, awaitPromise=True, returnByValue=True)
    if "exceptionDetails" in result:
        raise AssertionError(f"probe failed: {result['exceptionDetails']}")
    return json.loads(result["result"]["value"])


def test_compare_html_renders_charts_and_tables(browser: DevTools, tmp_path: Path) -> None:
    entries = []
    for path, scale in (("v4", 1.0), ("v4-batched", 1.4), ("v5", 2.0)):
        run_dir = tmp_path / "matrix" / "runs" / path
        entries.append(RunEntry(run_dir, fake_perf(run_dir, path=path, scale=scale), fake_results(True), {}))
    compare = build_comparison(entries, out_dir=tmp_path / "matrix", kind="bench", matrix_id="m")
    written = write_report(COMPARE_REPORT, compare, tmp_path / "matrix")

    page = render(browser, written.html)
    assert page["href"] == written.html.resolve().as_uri()
    assert page["title"] == "txnbench comparison: m"
    assert sorted(img["chart"] for img in page["images"]) == sorted(c.name for c in written.charts)
    for img in page["images"]:
        assert img["decoded"] and img["complete"], img["chart"]
        assert img["natural"][0] > 100 and img["natural"][1] > 100, img
        assert img["box"][0] > 100 and img["box"][1] > 50, img
    assert len(page["tables"]) >= 4
    for table in page["tables"]:
        assert table["rows"] >= 2 and table["cols"] >= 2 and table["box"][0] > 0 and table["box"][1] > 0
    throughput = next(t for t in page["tables"] if "committed txn/s" in t["text"])
    assert "200.0" in throughput["text"] and "2.00\u00d7" in throughput["text"]
    assert all(not url.startswith(("http:", "https:")) for url in page["resources"]), page["resources"]
