"""Thread dumps of a finding's brokers: which threads hold a sign, and their CPU time growing."""

from __future__ import annotations

import stat
from pathlib import Path

from targets.pulsar.thread_dumps import describe, dump_brokers, jstack_beside, threads_holding

SPINNING = "org.apache.pulsar.broker.transaction.pendingack.impl.MLPendingAckStore$PendingAckReplay.run"


def _dump(cpu_spinning: float) -> str:
    """A jstack dump in its real shape (3.0.0's broker, 2026-12-03): a spinning replay and a parked peer."""
    return f'''2026-12-03 12:31:02
Full thread dump OpenJDK 64-Bit Server VM (17.0.15+6-Debian-1deb12u1 mixed mode, sharing):

"pulsar-transaction-executor-4-1" #81 prio=5 os_prio=0 cpu={cpu_spinning}ms elapsed=358.39s tid=0x1 nid=0x2faf sleeping [0x1]
   java.lang.Thread.State: TIMED_WAITING (sleeping)
	at java.lang.Thread.sleep(java.base@17.0.15/Native Method)
	at {SPINNING}(MLPendingAckStore.java:428)
	at java.util.concurrent.ThreadPoolExecutor.runWorker(java.base@17.0.15/ThreadPoolExecutor.java:1136)

"pulsar-transaction-executor-5-1" #82 prio=5 os_prio=0 cpu=633.76ms elapsed=357.64s tid=0x2 nid=0x2fb0 waiting on condition  [0x2]
   java.lang.Thread.State: WAITING (parking)
	at jdk.internal.misc.Unsafe.park(java.base@17.0.15/Native Method)
	at java.util.concurrent.ThreadPoolExecutor.getTask(java.base@17.0.15/ThreadPoolExecutor.java:1062)
'''


def test_only_the_threads_holding_a_sign_are_named_with_their_cpu_time() -> None:
    assert threads_holding(_dump(2709.44), ["MLPendingAckStore$PendingAckReplay.run"]) == {
        "pulsar-transaction-executor-4-1": 2709.44}
    assert threads_holding(_dump(2709.44), ["NoSuchFrame.run"]) == {}


def test_the_cpu_time_between_the_two_dumps_shows_a_thread_spinning() -> None:
    lines = describe({"pulsar-transaction-executor-4-1": 2709.44}, {"pulsar-transaction-executor-4-1": 2904.68},
                     ["PendingAckReplay.run"])
    assert lines == ["1 thread(s) in PendingAckReplay.run",
                     "pulsar-transaction-executor-4-1: cpu 2905 ms (cpu 2709 ms, 3 s earlier +195 ms)"]
    assert describe({}, {}, ["PendingAckReplay.run"]) == []


def _fake_jdk(tmp_path: Path, dumps: list[str]) -> Path:
    """A `java` with a `jstack` beside it that prints the next of `dumps` at each call."""
    bin_dir = tmp_path / "jdk" / "bin"
    bin_dir.mkdir(parents=True)
    for k, text in enumerate(dumps, start=1):
        (tmp_path / f"dump-{k}.txt").write_text(text)
    jstack = bin_dir / "jstack"
    jstack.write_text(f'#!/bin/sh\nn=$(cat {tmp_path}/calls 2>/dev/null || echo 0); n=$((n+1)); '
                      f'echo $n > {tmp_path}/calls; cat {tmp_path}/dump-$n.txt\n')
    jstack.chmod(jstack.stat().st_mode | stat.S_IEXEC)
    java = bin_dir / "java"
    java.write_text("#!/bin/sh\n")
    return java


def test_each_broker_is_dumped_twice_into_the_folder_and_quoted(tmp_path: Path) -> None:
    java = _fake_jdk(tmp_path, [_dump(2709.44), _dump(2904.68)])
    assert jstack_beside(str(java)) == str(java.parent / "jstack")
    quoted = dump_brokers([("broker-0", 4242)], str(java), tmp_path, ["PendingAckReplay.run"], sleep=0)
    assert quoted == {"threads-broker-0": [
        "1 thread(s) in PendingAckReplay.run",
        "pulsar-transaction-executor-4-1: cpu 2905 ms (cpu 2709 ms, 3 s earlier +195 ms)"]}
    assert "cpu=2709.44ms" in (tmp_path / "threads-broker-0-1.txt").read_text()
    assert "cpu=2904.68ms" in (tmp_path / "threads-broker-0-2.txt").read_text()


def test_a_failed_dump_is_kept_as_its_error_and_quotes_nothing(tmp_path: Path) -> None:
    java = _fake_jdk(tmp_path, [])          # cat of a missing file: jstack exits 1
    assert dump_brokers([("broker-0", 4242)], str(java), tmp_path, ["PendingAckReplay.run"], sleep=0) == {}
    assert (tmp_path / "threads-broker-0-1.txt").read_text().startswith("jstack failed")


def test_without_a_jstack_the_quote_says_why_and_nothing_is_dumped(tmp_path: Path, monkeypatch: object) -> None:
    java = tmp_path / "jre" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    import targets.pulsar.thread_dumps as dumps

    monkeypatch.setattr(dumps.shutil, "which", lambda _name: None)  # type: ignore[attr-defined]
    quoted = dump_brokers([("broker-0", 4242)], str(java), tmp_path, ["PendingAckReplay.run"], sleep=0)
    assert quoted == {"threads": [f"no thread dump: no jstack beside {java} nor on PATH (install the JDK, not only "
                                  "a JRE)"]}
    assert not list(tmp_path.glob("threads-*"))


class _Service:
    def __init__(self, name: str, pid: int | None) -> None:
        self.name, self.pid = name, pid


class _Cluster:
    java = "/nowhere/bin/java"

    def info(self) -> object:
        services = [_Service("metadata", 11), _Service("broker-0", 12), _Service("broker-1", None),
                    _Service("broker-2", 14)]
        return type("Info", (), {"services": services})()


def test_a_finding_dumps_only_its_running_brokers_and_only_when_it_names_a_sign(monkeypatch: object,
                                                                                tmp_path: Path) -> None:
    import targets.pulsar.finding as fx
    import targets.pulsar.thread_dumps as dumps

    asked: list[object] = []

    def record(brokers: object, java: str, folder: Path, signs: object) -> dict[str, list[str]]:
        asked.append((brokers, java, folder, signs))
        return {}

    monkeypatch.setattr(dumps, "dump_brokers", record)  # type: ignore[attr-defined]
    assert fx._dump_threads(_Cluster(), tmp_path, ()) == {}
    assert asked == []
    fx._dump_threads(_Cluster(), tmp_path, ("PendingAckReplay.run",))
    assert asked == [([("broker-0", 12), ("broker-2", 14)], "/nowhere/bin/java", tmp_path, ("PendingAckReplay.run",))]
