"""Reading metrics snapshots: names kept as written, labels unescaped, bad lines counted."""

from __future__ import annotations

from pathlib import Path

from analysis.perf.prom import parse_prometheus, read_snapshots, snapshot_name


def test_parses_names_labels_values_and_skips_comments() -> None:
    text = (
        "# HELP bookkeeper_server_ADD_ENTRY_count Entries\n"
        "# TYPE bookkeeper_server_ADD_ENTRY_count counter\n"
        "bookkeeper_server_ADD_ENTRY_count 42\n"
        'txnbench_metadata_ops_total{op="put",cas="true",result="ok"} 7 1700000000000\n'
        'weird{path="a\\"b\\\\c\\nd"} 1.5e3\n'
        "\n"
    )
    samples, skipped = parse_prometheus(text)
    assert skipped == 0
    assert [s.name for s in samples] == ["bookkeeper_server_ADD_ENTRY_count", "txnbench_metadata_ops_total",
                                         "weird"]
    assert samples[0].value == 42.0 and samples[0].labels == ()
    assert samples[1].label("cas") == "true" and samples[1].label("op") == "put" and samples[1].value == 7.0
    assert samples[2].label("path") == 'a"b\\c\nd' and samples[2].value == 1500.0


def test_unreadable_lines_are_counted_not_fatal() -> None:
    samples, skipped = parse_prometheus('ok_total 1\nbroken{x="1" 2\nnan_metric NaN\nnot a metric line\n')
    assert [s.name for s in samples] == ["ok_total"]
    assert skipped == 3


def test_file_names_split_at_the_first_dash(tmp_path: Path) -> None:
    assert snapshot_name(Path("steady-broker-0.prom")) == ("steady", "broker-0")
    assert snapshot_name(Path("steady.prom")) is None
    assert snapshot_name(Path("steady-ledger.txt")) is None
    (tmp_path / "warmup-ledger.prom").write_text("a_total 1\n")
    (tmp_path / "steady-broker-1.prom").write_text("b_total 2\n")
    (tmp_path / "notes.txt").write_text("ignored")
    snaps = read_snapshots(tmp_path)
    assert sorted(snaps) == ["steady", "warmup"]
    assert snaps["steady"]["broker-1"].named("b_total")[0].value == 2.0
    assert read_snapshots(tmp_path / "missing") == {}
