"""``meta.properties``: which broker and which cluster a log directory belongs to, as Kafka keeps it in every
log dir (version 0, the ZooKeeper-era layout: ``version``, ``broker.id``, ``cluster.id``).

Invariants, as Kafka's broker checks them before it serves a log:
* every log dir that has the file names the configured broker id; one that names another is refused (the data
  was moved from another broker);
* every log dir that has a cluster id names the same one, and a broker of a ZooKeeper cluster refuses to start
  when it is not the cluster's (``/cluster/id``): its logs belong to another cluster, and the controller of this
  one would treat them as strays;
* the file is written only once the cluster id is known, then into every log dir.
"""

from __future__ import annotations

import os

from kbroker.storage.checkpoint import write_atomically

FILE_NAME = "meta.properties"


class InconsistentMetaProperties(RuntimeError):
    """A log dir belongs to another broker or another cluster: the broker must not start on it."""


def read(log_dir: str) -> dict[str, str] | None:
    """The file's properties, or None if the log dir has none or cannot be read (a failed disk: the log
    manager takes that dir offline)."""
    path = os.path.join(log_dir, FILE_NAME)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    properties = {}
    for line in lines:
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, value = line.split("=", 1)
            properties[key.strip()] = value.strip()
    return properties


def stored_cluster_id(log_dirs: list[str], broker_id: int) -> str | None:
    """The cluster id the log dirs name (None if none names one), once each names ``broker_id`` and all the
    same cluster; InconsistentMetaProperties, in Kafka's words, otherwise."""
    return _stored(log_dirs, broker_id)[0]


def verify_cluster(log_dirs: list[str], broker_id: int, cluster_id: str) -> None:
    """The log dirs belong to ``broker_id`` of cluster ``cluster_id`` (or name no cluster yet)."""
    stored, path = _stored(log_dirs, broker_id)
    if stored is not None and stored != cluster_id:
        raise InconsistentMetaProperties(f"Invalid cluster.id in: {path}. Expected {cluster_id}, but read {stored}")


def _stored(log_dirs: list[str], broker_id: int) -> tuple[str | None, str | None]:
    """(the cluster id the log dirs name, the file that first names it), after the checks above."""
    found: tuple[str | None, str | None] = (None, None)
    for log_dir in log_dirs:
        properties = read(log_dir)
        if properties is None:
            continue
        path = os.path.join(log_dir, FILE_NAME)
        stored_broker = properties.get("broker.id", properties.get("node.id"))
        if stored_broker is not None and stored_broker != str(broker_id):
            raise InconsistentMetaProperties(
                f"Stored node id {stored_broker} doesn't match previous node id {broker_id} in {path}. If you moved "
                f"your data, make sure your configured node id matches. If you intend to create a new node, you "
                f"should remove all data in your data directories.")
        cluster_id = properties.get("cluster.id")
        if cluster_id and found[0] is not None and cluster_id != found[0]:
            raise InconsistentMetaProperties(
                f"Invalid cluster.id in: {path}. Expected {found[0]}, but read {cluster_id}")
        if cluster_id and found[0] is None:
            found = (cluster_id, path)
    return found


def write(log_dirs: list[str], broker_id: int, cluster_id: str) -> None:
    """The file in every log dir that can take it (atomically, each), naming ``broker_id`` and ``cluster_id``;
    a dir that cannot is left to the log manager, which takes it offline."""
    body = f"version=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n".encode()
    for log_dir in log_dirs:
        try:
            os.makedirs(log_dir, exist_ok=True)
            write_atomically(os.path.join(log_dir, FILE_NAME), body)
        except OSError:
            continue
