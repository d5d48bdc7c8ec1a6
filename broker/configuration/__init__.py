"""Configuration and operations: broker configs with Kafka's names, the dynamic layers, per-logger levels and client quotas."""
