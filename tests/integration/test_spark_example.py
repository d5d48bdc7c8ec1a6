"""The worked pipeline in examples/ runs for real: enriched orders out, and per-minute totals once final."""

from __future__ import annotations

import json

import pytest

from examples.orders_pipeline import as_records, await_sources, orders, start
from tests.integration.spark_job import read_all
from tests.integration.test_spark_source import produce
from tests.integration.workload import make_topic

MINUTE = 60_000
T0 = 1_790_000_040_000   # the start of a minute


def order(n: int, customer: str, quantity: int, price: float, ts: int) -> tuple:
    value = {"order_id": f"o-{n}", "customer": customer, "item": "widget", "quantity": quantity,
             "unit_price": price, "ts": ts}
    return customer.encode(), json.dumps(value).encode(), []


@pytest.mark.parametrize("reader", ["kbroker", "kafka"])   # kbroker's source, or Spark's own Kafka source
def test_orders_pipeline_enriches_and_totals_each_minute_once_final(spark, broker, topic_name, tmp_path, reader):
    source, enriched, totals = f"{topic_name}-orders", f"{topic_name}-enriched", f"{topic_name}-totals"
    for name in (source, enriched, totals):
        make_topic(broker.bootstrap, name, partitions=2)
    first = [order(0, "alice", 2, 2.5, T0 + 1_000), order(1, "bob", 1, 12.0, T0 + 2_000),
             order(2, "alice", 4, 1.1, T0 + 59_000), order(3, "zed", 3, 1.0, T0 + MINUTE + 5_000),
             (b"junk", b"not an order", [])]
    produce(broker.bootstrap, source, first)

    def run():
        for query in start(spark, broker.bootstrap, str(tmp_path / "cp"), available_now=True, source=source,
                           enriched_topic=enriched, totals_topic=totals, reader=reader):
            query.awaitTermination(180)
            assert query.exception() is None, query.exception()

    run()
    # An order ten minutes on moves the watermark past the first two minutes; one older than the watermark
    # (two minutes behind the newest) then arrives late and is dropped from the totals.
    produce(broker.bootstrap, source, [order(4, "carol", 1, 7.25, T0 + 10 * MINUTE)])
    run()
    produce(broker.bootstrap, source, [order(5, "alice", 9, 9.0, T0 + 30_000)])
    run()

    out = {json.loads(m.value())["order_id"]: (m.key(), json.loads(m.value())) for m in read_all(broker.bootstrap,
                                                                                                  enriched)}
    assert sorted(out) == [f"o-{i}" for i in range(6)]   # every order once, the junk record dropped
    assert out["o-0"] == (b"alice", {**out["o-0"][1], "region": "eu-west", "tier": "gold", "amount": 5.0})
    assert out["o-3"][1]["region"] == "unknown" and out["o-3"][1]["tier"] == "none"
    assert out["o-2"][1]["amount"] == 4.4

    rows = sorted((m.key(), json.loads(m.value())) for m in read_all(broker.bootstrap, totals))
    got = sorted((k.decode(), v["minute"][11:16], v["orders"], v["amount"]) for k, v in rows)
    # Minute 0 (alice 2 orders, bob 1) and minute 1 (zed) are final; minute 10 is not yet; the late order is not in.
    assert [(g[0], g[2], g[3]) for g in got] == [("alice", 2, 9.4), ("bob", 1, 12.0), ("zed", 1, 3.0)]
    assert got[0][1] == got[1][1] != got[2][1]   # alice and bob in the first minute, zed in the next


def test_a_query_starts_once_the_previous_one_has_opened_its_source(spark, broker, topic_name, tmp_path):
    """What the example's one-after-another start rests on: the environment map Spark shares between every
    query of the kbroker source gets its entries when the first streaming source opens (before
    ``await_sources`` returns), and a second source changes no key (only values), so tasks serialized
    meanwhile carry a whole map."""
    make_topic(broker.bootstrap, topic_name, partitions=1)
    env = spark._jsparkSession.sessionState().dataSourceManager().lookupDataSource("kbroker").dataSourceCls().envVars()
    queries = []
    try:
        for n in range(2):
            queries.append(as_records(orders(spark, broker.bootstrap, topic_name), "customer").writeStream
                           .format("kbroker").option("kafka.bootstrap.servers", broker.bootstrap)
                           .option("topic", f"{topic_name}-out").option("checkpointLocation", str(tmp_path / f"cp{n}"))
                           .trigger(processingTime="1 second").start())
            await_sources(queries[-1])
            assert queries[-1].isActive and not queries[-1].status["message"].startswith("Initializing")
            if n == 0:
                keys = set(env.keySet())
                assert {"SPARK_LOCAL_DIRS", "SPARK_AUTH_SOCKET_TIMEOUT", "SPARK_BUFFER_SIZE"} <= keys
        assert set(env.keySet()) == keys
    finally:
        for query in queries:
            query.stop()
