"""Topic and segment actions for the nemesis, over the cluster's admin REST.

Filled in on top of `harness.client.admin` (the admin REST client); until that
client is in the build, `make_topic_admin` says so and topic faults are rejected
when the nemesis is built.
"""

from __future__ import annotations

import importlib.util

from faults.model import TopicAdmin
from harness.targets.base import ClusterInfo, ProcessControl


def make_topic_admin(cluster: ClusterInfo, control: ProcessControl | None,
                     *, timeout_s: float = 10.0) -> tuple[TopicAdmin | None, str]:
    """The admin for this cluster, or None and the reason."""
    if importlib.util.find_spec("harness.client.admin") is None:
        return None, "the admin REST client (harness/client/admin.py) is not in this build yet"
    return None, "the admin REST adapter is not wired to harness.client.admin yet"
