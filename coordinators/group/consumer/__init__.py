"""KIP-848 consumer groups: the coordinator assigns, members reconcile through ConsumerGroupHeartbeat."""
