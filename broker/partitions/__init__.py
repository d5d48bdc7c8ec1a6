"""Partitions on this broker: the replica manager's append and fetch paths, each partition's state, the purgatories where requests wait, fetch sessions, topic ids and failed log dirs."""
