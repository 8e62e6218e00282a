"""A new Oxia client when the library's discovery race killed one (embedded/metadata/oxia_client.py)."""

from __future__ import annotations

from typing import Any

import pytest

from embedded.metadata import oxia_client


class FlakyClient:
    """Stands in for `oxia.Client`: fails with `errors` in turn, then is made."""

    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, address: str, **options: Any) -> object:
        self.calls.append((address, options))
        if self.errors:
            raise self.errors.pop(0)
        return self


RACE = RuntimeError("Timed out after 30s waiting for initial shard assignments from 127.0.0.1:1")


def test_a_client_killed_by_the_discovery_race_is_made_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FlakyClient([RACE])
    monkeypatch.setattr(oxia_client.oxia, "Client", fake)
    assert oxia_client.new_oxia_client("127.0.0.1:1", namespace="n") is fake
    assert fake.calls == [("127.0.0.1:1", {"namespace": "n"})] * 2


def test_other_errors_and_a_race_every_time_are_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    other = FlakyClient([RuntimeError("Invalid ShardKeyRouter")])
    monkeypatch.setattr(oxia_client.oxia, "Client", other)
    with pytest.raises(RuntimeError, match="ShardKeyRouter"):
        oxia_client.new_oxia_client("127.0.0.1:1")
    assert len(other.calls) == 1
    always = FlakyClient([RACE] * oxia_client.CLIENT_ATTEMPTS)
    monkeypatch.setattr(oxia_client.oxia, "Client", always)
    with pytest.raises(RuntimeError, match="initial shard assignments"):
        oxia_client.new_oxia_client("127.0.0.1:1")
    assert len(always.calls) == oxia_client.CLIENT_ATTEMPTS
