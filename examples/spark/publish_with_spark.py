#!/usr/bin/env python3
"""Distributed SDS publication on Apache Spark: one Spark task per shard, publish from the driver.

The driver splits the source's records into work units (one per shard), each Spark task runs
`sds write-shard` for its unit in a subprocess and returns the receipt line it printed, and the
driver writes the receipts to a file and runs `sds publish` with the full list of expected work
ids. Everything `sds` writes is create-only and content addressed, so Spark's task retries,
speculative execution and a re-run of the whole job after a driver crash all converge: a repeated
task writes the same bytes to the same paths, and `publish` keeps one receipt per work id (the
lowest attempt) and writes root.json last.

Requirements: the `sds` binary (cargo build --release), Python 3.9+, and for the Spark path
`pyspark` with Java 17. `--no-spark` runs the very same task function on a local thread pool
instead (for machines without Spark; it is also what the repository's test always exercises).

    python3 publish_with_spark.py --sds target/release/sds \
        --source /data/src --out /data/out --records-per-task 1000 \
        --dataset-id my-ds --snapshot-id 2024-06-01

The output root must be storage every executor can write (a shared filesystem here; with an
object-store backend the same code writes to a bucket).
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys


def work_units(record_count, per_task):
    """(work_id, start, stop) for every shard, in order; the ids sort like the order."""
    units = []
    for index, start in enumerate(range(0, record_count, per_task)):
        units.append((f"w{index:06d}", start, min(start + per_task, record_count)))
    return units


def write_shard_task(sds, source, out, unit, attempt):
    """One task: write one shard pair and return its receipt (one JSON line)."""
    work_id, start, stop = unit
    result = subprocess.run(
        [sds, "write-shard", out, "--work-id", work_id, "--attempt", str(attempt),
         "--from-dataset", source, "--range", f"{start}:{stop}"],
        check=False, capture_output=True, text=True)
    if result.returncode != 0:
        # Raising makes Spark retry the task; a retry converges on the same objects.
        raise RuntimeError(f"{work_id}: sds write-shard failed: {result.stderr.strip()}")
    receipt = result.stdout.strip()
    json.loads(receipt)  # a worker never hands the driver a torn receipt
    return receipt


def run_on_spark(units, sds, source, out):
    from pyspark import TaskContext
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
             .appName("sds-publish").config("spark.ui.enabled", "false").getOrCreate())
    try:
        def task(unit):
            context = TaskContext.get()
            attempt = context.attemptNumber() if context is not None else 0
            return write_shard_task(sds, source, out, unit, attempt)

        # One partition per unit: one task per shard.
        rdd = spark.sparkContext.parallelize(units, numSlices=max(1, len(units)))
        return rdd.map(task).collect()
    finally:
        spark.stop()


def run_locally(units, sds, source, out):
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda u: write_shard_task(sds, source, out, u, 0), units))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sds", default="sds", help="path of the sds binary")
    parser.add_argument("--source", required=True, help="dataset whose records are published")
    parser.add_argument("--out", required=True, help="output dataset root")
    parser.add_argument("--records-per-task", type=int, default=10000)
    parser.add_argument("--dataset-id", required=True)
    parser.add_argument("--snapshot-id", required=True)
    parser.add_argument("--no-spark", action="store_true",
                        help="run the tasks on a local thread pool instead of Spark")
    args = parser.parse_args(argv)

    info = json.loads(subprocess.run([args.sds, "info", "--json", args.source], check=True,
                                     capture_output=True, text=True).stdout)
    units = work_units(info["record_count"], args.records_per_task)
    runner = run_locally if args.no_spark else run_on_spark
    receipts = runner(units, args.sds, args.source, args.out)

    os.makedirs(args.out, exist_ok=True)
    receipts_file = os.path.join(args.out + ".receipts.jsonl")
    with open(receipts_file, "w", encoding="utf-8") as f:
        f.write("".join(r + "\n" for r in receipts))
    subprocess.run(
        [args.sds, "publish", args.out, "--dataset-id", args.dataset_id,
         "--snapshot-id", args.snapshot_id, "--receipts", receipts_file,
         "--expected-work-ids", ",".join(u[0] for u in units)],
        check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
