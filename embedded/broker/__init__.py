"""The embedded cluster's Pulsar-compatible broker (`python -m embedded.broker --config F.json`).

Layers, bottom up:

* `position`, `topic_name`, `entry`: the vocabulary (pure);
* `managed_ledger/`: topics as managed ledgers on the ledger store, cursors with
  persisted acknowledgements (ManagedLedgerImpl, ManagedCursorImpl);
* `ownership`, `brokers_registry`, `lookup_policy`: who serves which topic;
* `topic`, `subscription`, `dispatcher`, `consumer`, `producer`: PersistentTopic and
  its dispatchers;
* `server_cnx`, `wire_server`: the binary protocol (ServerCnx) on `harness.wire`;
  `txn_commands`: its transaction commands, as one table;
* `txn_api`, `txn_registry`: the extension points the transaction paths plug into
  (`embedded/broker/v4`, `embedded/broker/v5`);
* `peer`: broker-to-broker requests over the `peers` links;
* `admin`, `metrics`: admin REST and Prometheus names;
* `views`: what those parts may ask of the broker (`TopicView`, `ConnectionView`,
  `AdminView`; they never import `broker`);
* `broker`: the service that ties it together.

See embedded/README.md for what follows Pulsar and what is simplified.
"""
