"""Admin operations: what CreateTopics, DeleteTopics, CreatePartitions and the config, credential, quota
and ACL requests change, persisted before they answer and applied to the running broker."""
