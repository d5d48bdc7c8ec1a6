"""kbroker's own small asyncio Kafka client: connections, requests, metadata; and the CLI."""
