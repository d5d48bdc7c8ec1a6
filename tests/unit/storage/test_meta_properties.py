"""meta.properties: written into every log dir once the cluster id is known; a log dir of another broker or of
another cluster is refused, in Kafka's words."""

import os

import pytest

from kbroker.storage import meta_properties
from kbroker.storage.meta_properties import InconsistentMetaProperties


def test_every_log_dir_gets_the_file_and_names_the_cluster(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    assert meta_properties.stored_cluster_id(dirs, 3) is None
    meta_properties.write(dirs, 3, "ZJ5sY8bmRwCaeZ9c8N-BXw")
    for d in dirs:
        with open(os.path.join(d, "meta.properties")) as f:
            assert f.read() == "version=0\nbroker.id=3\ncluster.id=ZJ5sY8bmRwCaeZ9c8N-BXw\n"
    assert meta_properties.stored_cluster_id(dirs, 3) == "ZJ5sY8bmRwCaeZ9c8N-BXw"
    meta_properties.verify_cluster(dirs + [str(tmp_path / "new")], 3, "ZJ5sY8bmRwCaeZ9c8N-BXw")   # (a new dir)


def test_a_log_dir_of_another_broker_or_cluster_is_refused(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    meta_properties.write([a], 1, "first")
    with pytest.raises(InconsistentMetaProperties, match=f"Stored node id 1 doesn't match previous node id 2 in {a}"):
        meta_properties.stored_cluster_id([a], 2)
    with pytest.raises(InconsistentMetaProperties, match=f"Invalid cluster.id in: {a}/meta.properties. Expected "
                                                         f"second, but read first"):
        meta_properties.verify_cluster([a], 1, "second")
    meta_properties.write([b], 1, "second")
    with pytest.raises(InconsistentMetaProperties, match=f"Invalid cluster.id in: {b}/meta.properties. Expected "
                                                         f"first, but read second"):
        meta_properties.stored_cluster_id([a, b], 1)


def test_a_failed_log_dir_is_skipped_for_the_log_manager_to_take_offline(tmp_path):
    good, failed = str(tmp_path / "good"), str(tmp_path / "failed")
    with open(failed, "w") as f:   # (the disk is gone: a file stands where the dir was)
        f.write("not a directory\n")
    meta_properties.write([good, failed], 1, "cluster")
    assert meta_properties.stored_cluster_id([good, failed], 1) == "cluster"
    assert open(failed).read() == "not a directory\n"
