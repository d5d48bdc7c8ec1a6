"""KIP-1071 streams groups: the coordinator configures the topology and assigns tasks; members reconcile
through StreamsGroupHeartbeat."""
