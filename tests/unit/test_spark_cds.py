"""The driver JVMs' class-data-sharing archives: which options, where, when off."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from analysis import spark


@pytest.fixture
def tmp_archives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv(spark.CDS_ENV, raising=False)
    return tmp_path


def test_without_an_archive_the_jvm_writes_one_under_a_name_of_its_own(tmp_archives: Path) -> None:
    options, writing = spark._cds_options(("-XX:+UseSerialGC",))
    assert writing is not None
    partial, archive = writing
    assert partial.parent == archive.parent == tmp_archives
    assert partial != archive and archive.suffix == ".jsa"
    assert f"-XX:ArchiveClassesAtExit={partial}" in options
    assert not any(o.startswith("-XX:SharedArchiveFile") for o in options)


def test_an_existing_archive_is_mapped_and_not_rewritten(tmp_archives: Path) -> None:
    archive = spark._class_archive(("-XX:+UseSerialGC",))
    archive.write_bytes(b"x")
    options, writing = spark._cds_options(("-XX:+UseSerialGC",))
    assert writing is None
    assert f"-XX:SharedArchiveFile={archive}" in options and "-Xshare:auto" in options


def test_a_session_that_must_not_write_one_maps_an_archive_that_exists_and_writes_none(tmp_archives: Path) -> None:
    assert spark._cds_options(("-XX:+UseSerialGC",), write=False) == ((), None)
    assert not list(tmp_archives.iterdir())          # no owner file, no partial copy named
    archive = spark._class_archive(("-XX:+UseSerialGC",))
    archive.write_bytes(b"x")
    options, writing = spark._cds_options(("-XX:+UseSerialGC",), write=False)
    assert writing is None and f"-XX:SharedArchiveFile={archive}" in options


def test_an_empty_archive_is_not_used(tmp_archives: Path) -> None:
    spark._class_archive(()).write_bytes(b"")
    _, writing = spark._cds_options(())
    assert writing is not None


def test_the_archive_belongs_to_its_jvm_options(tmp_archives: Path) -> None:
    assert spark._class_archive(("-XX:+UseSerialGC",)) != spark._class_archive(("-XX:+UseParallelGC",))


@pytest.mark.parametrize("value", ["0", "off", "false"])
def test_the_environment_turns_it_off(tmp_archives: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(spark.CDS_ENV, value)
    assert spark._cds_options(("-XX:+UseSerialGC",)) == ((), None)


def test_the_environment_can_allow_mapping_only(tmp_archives: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `make test` sets it (tests/conftest.py): no test process writes an archive, each maps one that exists.
    monkeypatch.setenv(spark.CDS_ENV, "map")
    assert spark._cds_options(("-XX:+UseSerialGC",)) == ((), None)
    assert not list(tmp_archives.iterdir())          # no owner file, no partial copy named
    archive = spark._class_archive(("-XX:+UseSerialGC",))
    archive.write_bytes(b"x")
    options, writing = spark._cds_options(("-XX:+UseSerialGC",))
    assert writing is None and f"-XX:SharedArchiveFile={archive}" in options


@pytest.mark.parametrize("published", [False, True])
def test_a_partial_archive_of_a_dead_process_is_removed_once_old(tmp_archives: Path, published: bool) -> None:
    # Published: three checks began writing the archive together, one published it, the other
    # two were killed; their partial copies stayed behind the published archive.
    import os
    import subprocess
    import sys

    archive = spark._class_archive(())
    if published:
        archive.write_bytes(b"archive")
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead = archive.with_name(f"{archive.stem}.{int(done.stdout)}.partial")
    mine = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    for path in (dead, mine):
        path.write_bytes(b"x")
        os.utime(path, (0, 0))
    fresh = archive.with_name(f"{archive.stem}.{int(done.stdout) + 1_000_000_000}.partial")
    fresh.write_bytes(b"x")   # no such process, but just written: maybe still being published
    options, writing = spark._cds_options(())
    assert not dead.exists() and mine.exists() and fresh.exists()
    assert (writing is None) == published
    assert any(option.startswith("-XX:SharedArchiveFile=") for option in options) == published


@pytest.mark.parametrize("small_input", [True, False])
def test_either_kind_of_session_has_an_archive_of_its_own_options(tmp_archives: Path, small_input: bool) -> None:
    # A large check's session mapped no archive, and started in 11.4 s where one with it takes 6.2 s.
    options, writing = spark._driver_jvm_options(small_input)
    kind = spark._SMALL_INPUT_JVM if small_input else spark._DRIVER_JVM
    assert writing is not None
    assert options[:len(kind)] == kind
    assert writing[1] == spark._class_archive(kind)
    assert f"-XX:ArchiveClassesAtExit={writing[0]}" in options
    writing[1].write_bytes(b"x")
    mapped, again = spark._driver_jvm_options(small_input)
    assert again is None and f"-XX:SharedArchiveFile={writing[1]}" in mapped


def test_the_two_kinds_of_session_never_share_an_archive(tmp_archives: Path) -> None:
    small, _ = spark._driver_jvm_options(True)
    large, _ = spark._driver_jvm_options(False)
    written = {o for o in (*small, *large) if o.startswith("-XX:ArchiveClassesAtExit=")}
    assert len(written) == 2


def test_archives_of_a_pyspark_installation_that_is_gone_are_removed_when_one_is_written(
        tmp_archives: Path) -> None:
    # Every clean clone's environment left two archives of about 170 MB in the temporary folder,
    # mapped by nothing once the clone was deleted (23 there on 2026-11-30).
    gone, kept, unowned = (tmp_archives / f"txnbench-spark-cds-{name}.jsa" for name in ("gone", "kept", "unowned"))
    for archive in (gone, kept, unowned):
        archive.write_bytes(b"archive")
    gone.with_suffix(".owner").write_text(str(tmp_archives / "deleted-venv" / "pyspark"))
    left = gone.with_name(f"{gone.stem}.{2**22 + 12345}.partial")   # a killed writer's, long ago
    left.write_bytes(b"x")
    os.utime(left, (0, 0))
    (tmp_archives / "live-venv").mkdir()
    kept.with_suffix(".owner").write_text(str(tmp_archives / "live-venv"))
    _, writing = spark._cds_options(("-XX:+UseSerialGC",))
    assert writing is not None
    assert not gone.exists() and not gone.with_suffix(".owner").exists() and not left.exists()
    assert kept.exists() and unowned.exists()
    owner = writing[1].with_suffix(".owner")
    assert Path(owner.read_text()) == spark._pyspark_dir()     # the new archive's own installation


def test_an_archive_in_use_sweeps_nothing(tmp_archives: Path) -> None:
    gone = tmp_archives / "txnbench-spark-cds-gone.jsa"
    gone.write_bytes(b"archive")
    gone.with_suffix(".owner").write_text(str(tmp_archives / "deleted-venv"))
    spark._class_archive(()).write_bytes(b"archive")
    _, writing = spark._cds_options(())
    assert writing is None and gone.exists()     # only a session that writes an archive sweeps
