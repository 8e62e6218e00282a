"""The compose target: real Apache Pulsar in Docker Compose, Toxiproxy in front of every link.

`ComposeCluster` is the `ClusterTarget` and `ProcessControl` the orchestrator gets
from `ComposeCluster.from_config(config, run_dir)`; the compose files live in
compose/ at the top of the repository (see its README.md). Modules:

    layout.py    read a compose file into txnbench roles (labels, ports, variables)
    validate.py  static rules every compose file must follow
    links.py     the Toxiproxy proxies a file implies, named as harness.target says
    engine.py    the docker CLI: checks with clear errors, `docker compose` commands
    admin.py     Pulsar admin REST through published ports (redirects followed)
    cluster.py   ComposeCluster
    txn_files.py where the compose files live, and each transaction path's default file
"""

from targets.compose.cluster import (
           ComposeCluster,
           ComposeSpec,
           project_name,
           resolve_compose_file,
)
from targets.compose.layout import ComposeFileError
from targets.compose.txn_files import COMPOSE_DIR, DEFAULT_FILES, default_compose_file

__all__ = ["COMPOSE_DIR", "DEFAULT_FILES", "ComposeCluster", "ComposeFileError", "ComposeSpec",
           "default_compose_file", "project_name", "resolve_compose_file"]
