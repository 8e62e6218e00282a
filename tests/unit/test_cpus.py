"""CPU sets for `txnbench peer --load-cpus`: the list syntax, the split, and real pinning of a child."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cpus import (
    CpuSetError,
    CpuSplit,
    format_cpu_list,
    parse_cpu_list,
    pin_process,
    preexec_pinning,
    split_off,
    usable_cpus,
)
from orchestrator.cli import main


@pytest.mark.parametrize(("text", "cpus"), [("1", {1}), ("0,2", {0, 2}), ("2-3,6", {2, 3, 6}), ("4-4", {4})])
def test_cpu_lists_parse_as_the_kernel_writes_them(text: str, cpus: set[int]) -> None:
    assert parse_cpu_list(text) == frozenset(cpus)


@pytest.mark.parametrize(("text", "says"), [("", "empty entry"), ("1,,2", "empty entry"), ("a", "not a CPU"),
                                            ("3-1", "backwards"), ("-1", "not a CPU"), ("1-", "not a CPU")])
def test_a_bad_cpu_list_names_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(CpuSetError, match=says):
        parse_cpu_list(text)


def test_cpu_lists_format_as_ranges() -> None:
    assert format_cpu_list({5, 0, 1, 2}) == "0-2,5"
    assert format_cpu_list({3}) == "3"


def test_the_cluster_gets_every_usable_cpu_the_load_does_not() -> None:
    split = split_off(frozenset({1}), frozenset({0, 1, 2, 3}))
    assert split == CpuSplit(cluster=frozenset({0, 2, 3}), load=frozenset({1}))
    assert split.to_json() == {"cluster": "0,2-3", "load": "1"}
    assert "CPU 1" in split.describe() and "CPU 0,2-3" in split.describe()


@pytest.mark.parametrize(("load", "says"), [({0, 1}, "the cluster would have none"), ({7}, "not usable here"),
                                            (set(), "no CPU")])
def test_a_split_that_cannot_work_is_refused(load: set[int], says: str) -> None:
    with pytest.raises(CpuSetError, match=says):
        split_off(frozenset(load), frozenset({0, 1}))


def test_a_child_started_pinned_runs_only_on_its_cpus_and_can_be_pinned_again() -> None:
    usable = usable_cpus()
    one = frozenset({min(usable)})
    probe = "import os, sys; print(sorted(os.sched_getaffinity(0))); sys.stdout.flush(); sys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", probe], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, preexec_fn=preexec_pinning(one))
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == str(sorted(one))
        assert pin_process(child.pid, usable) >= 1
        assert all(os.sched_getaffinity(int(t.name)) == usable for t in Path(f"/proc/{child.pid}/task").iterdir())
    finally:
        child.kill()
        child.wait(timeout=10)
    assert preexec_pinning(None) is None


def test_peer_refuses_load_cpus_that_leave_the_cluster_nothing_before_starting_anything(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    every = format_cpu_list(usable_cpus())
    assert main(["peer", "atomic-produce", "--path", "v4", "--load-cpus", every,
                 "--results", str(tmp_path / "results")]) != 0
    err = capsys.readouterr().err
    assert "--load-cpus" in err and "the cluster would have none" in err
    assert not (tmp_path / "results").exists()


def test_peer_load_cpus_is_a_usage_error_when_not_a_list() -> None:
    with pytest.raises(SystemExit) as info:
        main(["peer", "atomic-produce", "--load-cpus", "one"])
    assert info.value.code == 2
