"""Per-user purchase totals in 1-minute event-time windows, written to a topic via `moldau`.

The watermark (event time minus 30 s) decides when a window is final: in append mode each
window is emitted once, after the watermark passes its end, and events later than that are
dropped. The sink writes every micro-batch exactly once, so restarts do not repeat windows.
"""

from __future__ import annotations

import argparse
import json

from confluent_kafka import Consumer, TopicPartition
from produce_events import ensure_topic, produce_events  # the script's own directory
from pyspark.sql import functions as F

from moldau.spark.session import local_session

EVENT = "user string, amount double, event_time timestamp"


def run(bootstrap: str, source: str, sink: str, checkpoint: str, follow: bool) -> None:
    spark = local_session("moldau-windows", shuffle_partitions=2)
    spark.sparkContext.setLogLevel("ERROR")
    events = (
        spark.readStream.format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select(F.from_json(F.col("value").cast("string"), EVENT).alias("e"))
        .select("e.*")
    )
    windows = (
        events.withWatermark("event_time", "30 seconds")
        .groupBy(F.window("event_time", "1 minute"), "user")
        .agg(F.count("*").alias("purchases"), F.round(F.sum("amount"), 2).alias("total"))
    )
    out = windows.select(
        F.col("user").cast("binary").alias("key"),
        F.to_json(
            F.struct(
                F.col("window.start").alias("start"),
                F.col("window.end").alias("end"),
                "user",
                "purchases",
                "total",
            )
        ).alias("value"),
    )
    writer = (
        out.writeStream.format("moldau")
        .outputMode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", checkpoint)
    )
    query = writer.start() if follow else writer.trigger(availableNow=True).start()
    query.awaitTermination()
    spark.stop()


def show(bootstrap: str, sink: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "windows-demo"})
    meta = consumer.list_topics(sink, timeout=30).topics[sink]
    rows = []
    for p in meta.partitions:
        low, high = consumer.get_watermark_offsets(TopicPartition(sink, p), timeout=30)
        consumer.assign([TopicPartition(sink, p, low)])
        position = low
        while position < high:
            batch = consumer.consume(500, timeout=5)
            if not batch:
                break
            rows += [json.loads(m.value()) for m in batch if m.error() is None]
            position = batch[-1].offset() + 1
    consumer.close()
    for window in sorted(rows, key=lambda w: (w["start"], w["user"])):
        print(
            f"{window['start']}  {window['user']:8} {window['purchases']:4} {window['total']:9.2f}"
        )
    print(f"{len(rows)} closed windows in {sink}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--source", default="purchases")
    parser.add_argument("--sink", default="purchase-windows")
    parser.add_argument("--checkpoint", default="/tmp/moldau-windows-checkpoint")
    parser.add_argument(
        "--events", type=int, default=5000, help="events to produce first (0: none)"
    )
    parser.add_argument("--follow", action="store_true", help="keep running on new events")
    args = parser.parse_args()
    if args.events:
        produce_events(args.bootstrap_server, args.source, args.events, minutes=10)
    ensure_topic(args.bootstrap_server, args.sink, 3)
    run(args.bootstrap_server, args.source, args.sink, args.checkpoint, args.follow)
    show(args.bootstrap_server, args.sink)


if __name__ == "__main__":
    main()
