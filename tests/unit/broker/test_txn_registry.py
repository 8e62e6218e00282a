"""The provider registry: choice by domain, coordinator routing, refusals."""

from __future__ import annotations

from typing import Any, cast

import pytest

from embedded.broker.config import Settings
from embedded.broker.topic_name import TopicDomain
from embedded.broker.txn_api import (
    CoordinatorKind,
    NoPendingAckProvider,
    NoTransactionBufferProvider,
    TopicServices,
    TxnError,
    UnavailableCoordinator,
)
from embedded.broker.txn_registry import RegistryError, TxnRegistry
from harness.wire import CommandType, ServerError


class Marker:
    def __init__(self, label: str) -> None:
        self.label = label

    def create(self, _: Any) -> Any:
        return self.label


# the providers under test never touch the topic they are created for
NO_TOPIC = cast(TopicServices, None)


def enabled(**extra: Any) -> Settings:
    return Settings({"transactionCoordinatorEnabled": True, **extra})


def test_segment_topics_fall_back_to_persistent_providers() -> None:
    registry = TxnRegistry(enabled(), "v5")
    registry.register_buffer_provider(TopicDomain.PERSISTENT, Marker("v4-tb"))
    assert registry.buffer_provider(TopicDomain.SEGMENT).create(NO_TOPIC) == "v4-tb"
    registry.register_buffer_provider(TopicDomain.SEGMENT, Marker("v5-tb"))
    assert registry.buffer_provider(TopicDomain.SEGMENT).create(NO_TOPIC) == "v5-tb"
    assert registry.buffer_provider(TopicDomain.PERSISTENT).create(NO_TOPIC) == "v4-tb"


def test_defaults_without_providers_or_with_transactions_disabled() -> None:
    assert isinstance(TxnRegistry(enabled(), "v4").pending_ack_provider(TopicDomain.PERSISTENT),
                      NoPendingAckProvider)
    disabled = TxnRegistry(Settings({"transactionCoordinatorEnabled": False}), "v4")
    disabled.register_buffer_provider(TopicDomain.PERSISTENT, Marker("v4-tb"))
    assert isinstance(disabled.buffer_provider(TopicDomain.PERSISTENT), NoTransactionBufferProvider)


async def _new_txn(coordinator: Any) -> None:
    await coordinator.new_txn(0, 1000)


def test_coordinator_routing_follows_the_scalable_flag_and_setting() -> None:
    legacy, scalable = object(), object()
    registry = TxnRegistry(enabled(transactionCoordinatorScalableTopicsEnabled=True), "v5")
    registry.register_coordinator(CoordinatorKind.LEGACY, legacy)  # type: ignore[arg-type]
    registry.register_coordinator(CoordinatorKind.SCALABLE, scalable)  # type: ignore[arg-type]
    assert registry.coordinator(scalable=False) is legacy
    assert registry.coordinator(scalable=True) is scalable
    off = TxnRegistry(enabled(transactionCoordinatorScalableTopicsEnabled=False), "v5")
    off.register_coordinator(CoordinatorKind.LEGACY, legacy)
    off.register_coordinator(CoordinatorKind.SCALABLE, scalable)
    assert off.coordinator(scalable=True) is legacy


def test_missing_coordinator_answers_not_found_and_disabled_answers_not_allowed() -> None:
    import asyncio

    missing = TxnRegistry(enabled(), "v4").coordinator(scalable=False)
    assert isinstance(missing, UnavailableCoordinator)
    with pytest.raises(TxnError) as err:
        asyncio.run(_new_txn(missing))
    assert err.value.error is ServerError.TransactionCoordinatorNotFound
    disabled = TxnRegistry(Settings({}), "v4").coordinator(scalable=False)
    with pytest.raises(TxnError) as err:
        asyncio.run(_new_txn(disabled))
    assert err.value.error is ServerError.NotAllowedError


def test_double_registration_and_core_commands_are_refused() -> None:
    registry = TxnRegistry(enabled(), "v4")
    registry.register_buffer_provider(TopicDomain.PERSISTENT, Marker("a"))
    with pytest.raises(RegistryError):
        registry.register_buffer_provider(TopicDomain.PERSISTENT, Marker("b"))
    with pytest.raises(RegistryError):
        registry.register_command_handler(CommandType.SEND, lambda c, m: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(RegistryError):
        registry.register_topic_domain_handler(TopicDomain.PERSISTENT, lambda c, m: None)  # type: ignore[arg-type,return-value]


def test_extensions_follow_the_path_or_the_setting() -> None:
    import embedded.broker.v4
    import embedded.broker.v5
    from embedded.broker.__main__ import TXN_PATHS

    assert TxnRegistry(enabled(), "v5", TXN_PATHS).extensions() == (embedded.broker.v4, embedded.broker.v5)
    assert TxnRegistry(enabled(), "v4-batched", TXN_PATHS).extensions() == (embedded.broker.v4,)
    assert TxnRegistry(enabled(), "v5").extensions() == ()          # no paths handed in: none installed
    assert TxnRegistry(enabled(txnbenchTxnExtensions=[]), "v5", TXN_PATHS).extensions() == ()
    assert TxnRegistry(enabled(txnbenchTxnExtensions=["embedded.broker.v5"]), "v4").extensions() == (
        embedded.broker.v5,)
    with pytest.raises(RegistryError):
        TxnRegistry(enabled(txnbenchTxnExtensions="v4"), "v4").extensions()


def test_absent_or_incomplete_extension_modules_stop_the_broker() -> None:
    import embedded.broker.topic_name

    with pytest.raises(ModuleNotFoundError):
        TxnRegistry(enabled(txnbenchTxnExtensions=["embedded.broker.no_such_path"]), "v4").extensions()
    registry = TxnRegistry(enabled(), "v4")
    with pytest.raises(RegistryError, match="no install"):
        registry.load_extensions(broker=None, modules=[embedded.broker.topic_name])  # type: ignore[arg-type]
    assert registry.installed == []
