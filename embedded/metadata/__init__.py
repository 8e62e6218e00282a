"""The embedded cluster's Oxia-like metadata store: state machine, durable log, server, clients.

Brokers use `MetadataClient` (asyncio) and `LeaderElection`; tools and tests use
`BlockingMetadataClient`. See README.md in this folder for what follows Oxia and what
is simplified.
"""
