"""Cluster metadata the brokers share: cluster, tenants, namespaces, partitioned topics, schemas.

Keys follow Pulsar's ZooKeeper layout (`/admin/policies/<tenant>`,
`/admin/policies/<tenant>/<ns>`, `/admin/partitioned-topics/...`), values are JSON.
`initialize_cluster` is what `pulsar initialize-cluster-metadata` and
`initialize-transaction-coordinator-metadata` do, and is idempotent: every broker runs
it at start-up and creates what is missing with `expected_version=-1`, so
concurrent brokers never overwrite each other.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from embedded.broker.topic_name import TopicDomain, TopicName, decode_component, encode_component
from embedded.metadata.backend import MetadataBackend
from embedded.metadata.model import MUST_NOT_EXIST, BadVersion, KeyNotFound

log = logging.getLogger(__name__)

CLUSTERS = "/admin/clusters/"
POLICIES = "/admin/policies/"
PARTITIONED = "/admin/partitioned-topics/"
SCHEMAS = "/schemas/"
TC_ASSIGN_TOPIC = TopicName.parse("persistent://pulsar/system/transaction_coordinator_assign")


class AlreadyExists(Exception):
    pass


class NotFound(Exception):
    pass


def _dump(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


def partitioned_key(topic: TopicName) -> str:
    return f"{PARTITIONED}{topic.tenant}/{topic.namespace_part}/{topic.domain.value}/{topic.encoded_local_name}"


def schema_key(topic: TopicName) -> str:
    base = topic.partitioned_base
    return f"{SCHEMAS}{base.tenant}/{base.namespace_part}/{base.encoded_local_name}"


class ClusterResources:
    def __init__(self, metadata: MetadataBackend, cluster: str) -> None:
        self.metadata = metadata
        self.cluster = cluster

    async def _create(self, key: str, value: Any) -> bool:
        try:
            await self.metadata.put(key, _dump(value), expected_version=MUST_NOT_EXIST)
            return True
        except BadVersion:
            return False

    # ---- start-up -----------------------------------------------------------------------------

    async def initialize_cluster(self, *, service_url: str, web_url: str, coordinators: int) -> None:
        created = []
        if await self._create(CLUSTERS + self.cluster, {"serviceUrl": web_url, "brokerServiceUrl": service_url}):
            created.append(f"cluster {self.cluster}")
        for tenant in ("public", "pulsar"):
            if await self._create(POLICIES + tenant, {"adminRoles": [], "allowedClusters": [self.cluster]}):
                created.append(f"tenant {tenant}")
        for namespace in ("public/default", "pulsar/system"):
            if await self._create(POLICIES + namespace, {"replication_clusters": [self.cluster]}):
                created.append(f"namespace {namespace}")
        if coordinators > 0 and await self._create(partitioned_key(TC_ASSIGN_TOPIC), {"partitions": coordinators}):
            created.append(f"{TC_ASSIGN_TOPIC} with {coordinators} partitions")
        if created:
            log.info("initialized cluster metadata: %s", ", ".join(created))

    # ---- clusters -----------------------------------------------------------------------------

    async def clusters(self) -> list[str]:
        return [k[len(CLUSTERS):] for k in await self.metadata.list_prefix(CLUSTERS)]

    async def cluster_data(self, name: str) -> dict[str, Any]:
        try:
            return json.loads((await self.metadata.get(CLUSTERS + name)).value or "{}")
        except KeyNotFound:
            raise NotFound(f"cluster {name} does not exist") from None

    # ---- tenants and namespaces ---------------------------------------------------------------

    async def tenants(self) -> list[str]:
        return sorted(k[len(POLICIES):] for k in await self.metadata.list_prefix(POLICIES)
                      if "/" not in k[len(POLICIES):])

    async def tenant(self, tenant: str) -> dict[str, Any]:
        try:
            return json.loads((await self.metadata.get(POLICIES + tenant)).value or "{}")
        except KeyNotFound:
            raise NotFound(f"tenant {tenant} does not exist") from None

    async def create_tenant(self, tenant: str, info: dict[str, Any]) -> None:
        if "/" in tenant or not tenant:
            raise ValueError(f"invalid tenant name {tenant!r}")
        if not await self._create(POLICIES + tenant, info or {"adminRoles": [], "allowedClusters": [self.cluster]}):
            raise AlreadyExists(f"tenant {tenant} already exists")

    async def delete_tenant(self, tenant: str) -> None:
        if await self.namespaces(tenant):
            raise AlreadyExists(f"tenant {tenant} still has namespaces")
        try:
            await self.metadata.delete(POLICIES + tenant)
        except KeyNotFound:
            raise NotFound(f"tenant {tenant} does not exist") from None

    async def namespaces(self, tenant: str) -> list[str]:
        prefix = f"{POLICIES}{tenant}/"
        return sorted(f"{tenant}/{k[len(prefix):]}" for k in await self.metadata.list_prefix(prefix)
                      if "/" not in k[len(prefix):])

    async def namespace_exists(self, namespace: str) -> bool:
        return await self.metadata.get_or_none(POLICIES + namespace) is not None

    async def namespace_policies(self, namespace: str) -> dict[str, Any]:
        try:
            return json.loads((await self.metadata.get(POLICIES + namespace)).value or "{}")
        except KeyNotFound:
            raise NotFound(f"namespace {namespace} does not exist") from None

    async def create_namespace(self, namespace: str, policies: dict[str, Any] | None = None) -> None:
        tenant, _, local = namespace.partition("/")
        if not local or "/" in local:
            raise ValueError(f"invalid namespace {namespace!r}; use <tenant>/<namespace>")
        await self.tenant(tenant)
        if not await self._create(POLICIES + namespace, policies or {"replication_clusters": [self.cluster]}):
            raise AlreadyExists(f"namespace {namespace} already exists")

    async def delete_namespace(self, namespace: str) -> None:
        try:
            await self.metadata.delete(POLICIES + namespace)
        except KeyNotFound:
            raise NotFound(f"namespace {namespace} does not exist") from None

    # ---- partitioned topics -------------------------------------------------------------------

    async def partitions(self, topic: TopicName) -> int:
        """Partitions of a partitioned topic, 0 for anything else (as PARTITIONED_METADATA answers)."""
        if topic.is_partition:
            return 0
        found = await self.metadata.get_or_none(partitioned_key(topic))
        if found is None:
            return 0
        return int(json.loads(found.value or "{}").get("partitions", 0))

    async def create_partitioned(self, topic: TopicName, partitions: int) -> None:
        if partitions <= 0:
            raise ValueError("the number of partitions must be at least 1")
        if topic.is_partition:
            raise ValueError(f"{topic} is a partition name; create the partitioned topic by its base name")
        if not await self._create(partitioned_key(topic), {"partitions": partitions}):
            raise AlreadyExists(f"partitioned topic {topic} already exists")

    async def update_partitioned(self, topic: TopicName, partitions: int) -> None:
        found = await self.metadata.get_or_none(partitioned_key(topic))
        if found is None:
            raise NotFound(f"partitioned topic {topic} does not exist")
        current = int(json.loads(found.value or "{}").get("partitions", 0))
        if partitions <= current:
            raise ValueError(f"partitions can only grow: {topic} has {current}")
        await self.metadata.put(partitioned_key(topic), _dump({"partitions": partitions}),
                                expected_version=found.version.version_id)

    async def delete_partitioned(self, topic: TopicName) -> None:
        try:
            await self.metadata.delete(partitioned_key(topic))
        except KeyNotFound:
            raise NotFound(f"partitioned topic {topic} does not exist") from None

    async def partitioned_topics(self, namespace: str, domain: TopicDomain = TopicDomain.PERSISTENT) -> list[str]:
        tenant, _, local = namespace.partition("/")
        prefix = f"{PARTITIONED}{tenant}/{local}/{domain.value}/"
        return sorted(f"{domain.value}://{namespace}/{decode_component(k[len(prefix):])}"
                      for k in await self.metadata.list_prefix(prefix))

    # ---- schemas ------------------------------------------------------------------------------

    async def schema(self, topic: TopicName) -> dict[str, Any] | None:
        found = await self.metadata.get_or_none(schema_key(topic))
        return None if found is None else json.loads(found.value or "{}")

    async def put_schema(self, topic: TopicName, schema: dict[str, Any]) -> int:
        """Store `schema` as the topic's latest; returns its version (0, 1, ...). Same schema: same version."""
        key = schema_key(topic)
        for _ in range(5):   # bounded CAS retries
            found = await self.metadata.get_or_none(key)
            if found is None:
                record = {**schema, "version": 0}
                if await self._create(key, record):
                    return 0
                continue
            current = json.loads(found.value or "{}")
            if {k: current.get(k) for k in schema} == schema:
                return int(current.get("version", 0))
            record = {**schema, "version": int(current.get("version", 0)) + 1}
            try:
                await self.metadata.put(key, _dump(record), expected_version=found.version.version_id)
                return int(record["version"])
            except BadVersion:
                continue
        raise BadVersion(f"schema of {topic} kept changing")


__all__ = ["TC_ASSIGN_TOPIC", "AlreadyExists", "ClusterResources", "NotFound", "encode_component"]
