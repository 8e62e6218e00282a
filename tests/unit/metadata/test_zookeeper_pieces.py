"""The pure pieces of the ZooKeeper backend and launcher: URLs, Java versions, zoo.cfg, key ranges."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedded.metadata.zk_client import _walk_root, parse_zk_url
from targets.zookeeper import java_major, zoo_cfg


@pytest.mark.parametrize(("url", "hosts"), [
    ("zk:127.0.0.1:2181", "127.0.0.1:2181"),
    ("zk://127.0.0.1:2181", "127.0.0.1:2181"),
    ("zk:a:1,b:2", "a:1,b:2"),
])
def test_pulsar_zk_urls_give_kazoo_hosts(url: str, hosts: str) -> None:
    assert parse_zk_url(url) == hosts


@pytest.mark.parametrize("url", ["zk:", "zk:127.0.0.1", "oxia://127.0.0.1:6648", "zk:host:port"])
def test_malformed_zk_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match="zk:HOST:PORT"):
        parse_zk_url(url)


@pytest.mark.parametrize(("text", "major"), [
    ('openjdk version "17.0.15" 2025-04-15', 17),
    ('java version "1.8.0_392"', 8),
    ('openjdk version "21" 2023-09-19', 21),
    ("no java here", None),
])
def test_java_major_versions(text: str, major: int | None) -> None:
    assert java_major(text) == major


def test_zoo_cfg_binds_loopback_syncs_and_has_no_admin_server(tmp_path: Path) -> None:
    lines = set(zoo_cfg(2999, tmp_path / "d", tmp_path / "l", 500, 60_000).splitlines())
    assert {"clientPort=2999", "clientPortAddress=127.0.0.1", "admin.enableServer=false", "forceSync=yes",
            f"dataDir={tmp_path / 'd'}", f"dataLogDir={tmp_path / 'l'}", "maxSessionTimeout=60000"} <= lines


@pytest.mark.parametrize(("low", "high", "root"), [
    ("/a/b/", "/a/b0", "/a"),
    ("/txn/op/7-", "/txn/op/7.", "/txn/op"),
    ("/x", "/y", "/"),
    ("", "~", "/"),
])
def test_a_range_is_walked_from_its_deepest_common_folder(low: str, high: str, root: str) -> None:
    assert _walk_root(low, high) == root
