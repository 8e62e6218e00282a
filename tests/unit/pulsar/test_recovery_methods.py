"""The recovery list (targets/pulsar/recovery_methods.py): well formed, and every entry present in
each release's class files (checked with our class-file reader when the release's jars are cached,
as `javap -p` would; the list names methods by what the jars hold, not by the sources)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from targets.pulsar.coverage_report import class_methods, missing_methods
from targets.pulsar.jars import cache_root
from targets.pulsar.recovery_methods import (
    RECOVERY_METHODS,
    component,
    for_release,
    is_transaction_code,
)
from targets.pulsar.versions import RELEASES

#: `public class Tiny { long big = 1L << 40; double d = 2.5; static int f(int i) { Runnable r = () -> {};
#: return i + 1; } }`, compiled by javac 17 (--release 17): longs and doubles take two pool slots
TINY_CLASS = base64.b64decode("yv66vgAAAD0AMgoAAgADBwAEDAAFAAYBABBqYXZhL2xhbmcvT2JqZWN0AQAGPGluaXQ+AQADKClWBQAAAQAAAAAACQAKAAsHAAwMAA0ADgEABFRpbnkBAANiaWcBAAFKBkAEAAAAAAAACQAKABIMABMAFAEAAWQBAAFEEgAAABYMABcAGAEAA3J1bgEAFigpTGphdmEvbGFuZy9SdW5uYWJsZTsBAARDb2RlAQAPTGluZU51bWJlclRhYmxlAQABZgEABChJKUkBAApsYW1iZGEkZiQwAQAKU291cmNlRmlsZQEACVRpbnkuamF2YQEAEEJvb3RzdHJhcE1ldGhvZHMPBgAiCgAjACQHACUMACYAJwEAImphdmEvbGFuZy9pbnZva2UvTGFtYmRhTWV0YWZhY3RvcnkBAAttZXRhZmFjdG9yeQEAzChMamF2YS9sYW5nL2ludm9rZS9NZXRob2RIYW5kbGVzJExvb2t1cDtMamF2YS9sYW5nL1N0cmluZztMamF2YS9sYW5nL2ludm9rZS9NZXRob2RUeXBlO0xqYXZhL2xhbmcvaW52b2tlL01ldGhvZFR5cGU7TGphdmEvbGFuZy9pbnZva2UvTWV0aG9kSGFuZGxlO0xqYXZhL2xhbmcvaW52b2tlL01ldGhvZFR5cGU7KUxqYXZhL2xhbmcvaW52b2tlL0NhbGxTaXRlOxAABg8GACoKAAoAKwwAHQAGAQAMSW5uZXJDbGFzc2VzBwAuAQAlamF2YS9sYW5nL2ludm9rZS9NZXRob2RIYW5kbGVzJExvb2t1cAcAMAEAHmphdmEvbGFuZy9pbnZva2UvTWV0aG9kSGFuZGxlcwEABkxvb2t1cAAhAAoAAgAAAAIAAAANAA4AAAAAABMAFAAAAAMAAQAFAAYAAQAZAAAAKwADAAEAAAATKrcAASoUAAe1AAkqFAAPtQARsQAAAAEAGgAAAAYAAQAAAAEACAAbABwAAQAZAAAAIgACAAIAAAAKugAVAABMGgRgrAAAAAEAGgAAAAYAAQAAAAEQCgAdAAYAAQAZAAAAGQAAAAAAAAABsQAAAAEAGgAAAAYAAQAAAAEAAwAeAAAAAgAfACAAAAAMAAEAIQADACgAKQAoACwAAAAKAAEALQAvADEAGQ==")


def test_the_class_file_reader_lists_methods_and_lambdas() -> None:
    assert class_methods(TINY_CLASS) == ["<init>", "f", "lambda$f$0"]
    with pytest.raises(ValueError):
        class_methods(b"not a class")


def test_entries_are_unique_and_well_formed() -> None:
    keys = [m.key for m in RECOVERY_METHODS]
    assert len(keys) == len(set(keys))
    for m in RECOVERY_METHODS:
        assert m.cls.startswith("org.apache.pulsar.") and "/" not in m.cls, m
        assert m.method and "." not in m.method and "(" not in m.method, m
        assert set(m.paths) <= {"v4", "v4-batched", "v5"} and m.paths, m
        assert m.what, m
        assert is_transaction_code(m.internal_class), f"{m.key} is outside the reported transaction code"
        assert component(m.internal_class) != "other", m


def test_each_path_has_its_own_methods() -> None:
    assert {m.key for m in for_release("5.0.1", ("v5",))} - {m.key for m in for_release("5.0.1", ("v4",))}
    assert all("v5" not in m.paths for m in for_release("4.0.8"))
    assert any(m.paths == ("v4-batched",) for m in for_release("4.0.8"))
    assert len(for_release("5.0.1")) > len(for_release("4.0.8"))


def _jars(version: str) -> list[Path]:
    folder = cache_root() / version
    libs = sorted(p for p in folder.glob("lib-*") if p.is_dir()) if folder.is_dir() else []
    return [lib / f"{name}-{version}.jar" for lib in libs[-1:]
            for name in ("pulsar-broker", "pulsar-transaction-coordinator") if (lib / f"{name}-{version}.jar").is_file()]


@pytest.mark.parametrize("version", sorted(RELEASES))
def test_every_listed_method_is_in_the_release(version: str) -> None:
    jars = _jars(version)
    if len(jars) < 2:
        pytest.skip(f"Pulsar {version}'s jars are not cached here (any pulsar-target run resolves them)")
    assert missing_methods(for_release(version), jars) == []
