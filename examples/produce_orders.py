"""Orders for the pipeline: JSON records keyed by customer, at a steady rate, with event times of now.

    python examples/produce_orders.py --bootstrap 127.0.0.1:9092 --count 1000 --rate 50
"""

from __future__ import annotations

import argparse
import json
import random
import time

CUSTOMERS = ["alice", "bob", "carol", "dave", "erin", "frank"]
ITEMS = {"widget": 2.5, "gadget": 12.0, "gizmo": 7.25, "doohickey": 1.1}


def order(rng: random.Random, n: int, ts_ms: int) -> dict:
    item = rng.choice(sorted(ITEMS))
    return {"order_id": f"o-{n}", "customer": rng.choice(CUSTOMERS), "item": item,
            "quantity": rng.randint(1, 5), "unit_price": ITEMS[item], "ts": ts_ms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=50.0, help="orders per second")
    args = parser.parse_args()
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": args.bootstrap, "enable.idempotence": True})
    rng = random.Random()
    for n in range(args.count):
        o = order(rng, n, int(time.time() * 1000))
        producer.produce(args.topic, json.dumps(o).encode(), key=o["customer"].encode())
        producer.poll(0)
        time.sleep(1 / args.rate)
    producer.flush(30)
    print(f"produced {args.count} orders to {args.topic}")


if __name__ == "__main__":
    main()
