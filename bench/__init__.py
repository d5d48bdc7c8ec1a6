"""`make bench`: kbroker against the Kafka-compatible brokers that install from PyPI, in one run."""
