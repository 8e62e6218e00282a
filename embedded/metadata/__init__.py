"""The embedded cluster's Oxia-like metadata store: state machine, durable log, server, clients.

Brokers use `MetadataClient` (asyncio) and `LeaderElection`; tools and tests use
`BlockingMetadataClient`. See README.md in this folder for what follows Oxia and what
is simplified.
"""

from embedded.metadata.model import (
    MUST_NOT_EXIST,
    BadVersion,
    Comparison,
    EventType,
    GetResult,
    InvalidOptions,
    KeyNotFound,
    MetadataError,
    MetadataUnavailable,
    Notification,
    PutResult,
    SessionExpired,
    Version,
)
from embedded.metadata.state import prefix_end

__all__ = [
    "MUST_NOT_EXIST", "BadVersion", "Comparison", "EventType", "GetResult", "InvalidOptions", "KeyNotFound",
    "MetadataError", "MetadataUnavailable", "Notification", "PutResult", "SessionExpired", "Version",
    "prefix_end",
]
