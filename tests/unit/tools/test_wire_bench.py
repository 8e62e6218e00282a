"""The micro-benchmark runs end to end (tiny sizes; the numbers themselves are not checked)."""

from __future__ import annotations

import pytest

from tools.bench.wire import main


def test_bench_prints_every_case(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--frames", "40", "--repeat", "1", "--batch-size", "3", "--payload-size", "64"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith(("SEND", "MESSAGE"))]
    assert [row.split(",")[0] + "," + row.split(",")[1].split()[0] for row in rows] == [
        "SEND encode,single", "SEND decode,single", "MESSAGE encode,single", "MESSAGE decode,single",
        "SEND encode,batch", "SEND decode,batch", "MESSAGE encode,batch", "MESSAGE decode,batch",
    ]
    assert all(float(row.split()[-1]) > 0 for row in rows)


def test_bench_rejects_bad_arguments() -> None:
    with pytest.raises(SystemExit):
        main(["--batch-size", "1"])
