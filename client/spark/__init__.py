"""kbroker for Spark: ``spark.dataSource.register(KBrokerDataSource)``, then ``format("kbroker")``.

The options and row schema are those of Spark's Kafka source and sink, so a
job moves over by changing the format name; the sink is exactly-once by
default (``kafka.delivery=at-least-once`` to opt out). See docs/SPARK.md.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from kbroker.client.spark.options import SinkOptions, SourceOptions
from kbroker.client.spark.records import HEADERS, SCHEMA

__all__ = ["KBrokerDataSource"]


class KBrokerDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kbroker"

    def schema(self) -> str:
        headers = str(self.options.get("includeHeaders", "false")).lower() == "true"
        return SCHEMA + (HEADERS if headers else "")

    def reader(self, schema):
        from kbroker.client.spark.source import BatchReader

        return BatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema):
        from kbroker.client.spark.source import StreamReader

        return StreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema, overwrite: bool):
        from kbroker.client.spark.sink import BatchWriter

        return self._sink(BatchWriter, schema)

    def streamWriter(self, schema, overwrite: bool):
        from kbroker.client.spark.sink import StreamWriter

        return self._sink(StreamWriter, schema)

    def _sink(self, kind, schema):
        """Options and columns checked on the driver, the commit topic made, before any task runs."""
        from kbroker.client.spark.sink import check_schema, ensure_commit_topic, new_write_id

        opts = SinkOptions.parse(self.options)
        check_schema(schema, opts)
        if opts.exactly_once:
            ensure_commit_topic(opts)
        return kind(opts, new_write_id())
