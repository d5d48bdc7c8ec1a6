"""Durable partition logs in Kafka's on-disk layout. Synchronous by contract: no asyncio here."""
