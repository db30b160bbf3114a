#!/usr/bin/env python3
"""Row 10 of scripts/bench (run by scripts/bench-spark): records/s of a Spark publication
(examples/spark/publish_with_spark.py, `sds write-shard --from-sigmf` workers, `sds publish`)
with 1 and 2 executor cores (`local[1]`, `local[2]`) against `sds create --jobs 1` of the same
SigMF recordings, in the same run. Not a test.

    spark_bench.py BIN_DIR WORK_DIR quick|full REPEAT

The input: RECORDINGS cf32 recordings of SAMPLES samples, segmented into records of SEGMENT
samples; Spark runs one task per FILES_PER_TASK recordings and `sds create` cuts shards of the
same size, so both write the same records in the same number of shards. Every time is the
whole command, process start to exit, median of REPEAT runs, each into a fresh output after
`sync`; Spark's is start-up (JVM, Python workers) included, and the start-up and stop of an
empty Spark job is measured on its own as a reference row.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time

SIZES = {"quick": (96, 65536, 1024), "full": (192, 262144, 2048)}
FILES_PER_TASK = 4
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOB = os.path.join(REPO, "examples", "spark", "publish_with_spark.py")


def log(text):
    print(f"bench-spark: {text}", file=sys.stderr, flush=True)


def write_recordings(directory, count, samples):
    import numpy as np

    os.makedirs(directory, exist_ok=True)
    generator = np.random.default_rng(10)
    files = []
    for i in range(count):
        iq = (generator.standard_normal(2 * samples, dtype=np.float32)).tobytes()
        base = os.path.join(directory, f"rec{i:04d}")
        with open(base + ".sigmf-data", "wb") as f:
            f.write(iq)
        meta = {"global": {"core:datatype": "cf32_le", "core:sample_rate": 1e6,
                           "core:version": "1.2.0"},
                "captures": [{"core:sample_start": 0, "core:frequency": 9.15e8 + i}],
                "annotations": []}
        with open(base + ".sigmf-meta", "w", encoding="utf-8") as f:
            json.dump(meta, f)
        files.append(base + ".sigmf-meta")
    return files


def timed(args, env=None):
    """(seconds from start to exit, the job's own `timing` line or {})."""
    subprocess.run(["sync"], check=True)
    start = time.perf_counter()
    result = subprocess.run(args, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"bench-spark: {args[:4]} failed: {result.stderr[-2000:]}")
    timing = [json.loads(line.split(" ", 1)[1]) for line in result.stdout.splitlines()
              if line.startswith("timing ")]
    return elapsed, (timing[0] if timing else {})


def record_count(sds, root):
    info = subprocess.run([sds, "info", "--json", root], check=True, capture_output=True,
                          text=True).stdout
    return json.loads(info)["record_count"]


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    for extra in (path + ".receipts", path + ".state"):
        shutil.rmtree(extra, ignore_errors=True)
    return path


def spark_env():
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    env.pop("SPARK_HOME", None)
    return env


EMPTY_JOB = """
from pyspark import SparkConf, SparkContext
conf = (SparkConf().setMaster("local[2]").setAppName("empty")
        .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false"))
context = SparkContext(conf=conf)
context.parallelize(range(2), 2).map(lambda i: i).collect()
context.stop()
"""


def main(bin_dir, work, mode, repeat):
    recordings, samples, segment = SIZES[mode]
    sds = os.path.join(bin_dir, "sds")
    files = write_recordings(os.path.join(work, "sigmf"), recordings, samples)
    records = recordings * (samples // segment)
    per_shard = FILES_PER_TASK * (samples // segment)
    log(f"{recordings} recordings, {records} records, {len(files) // FILES_PER_TASK} shards")
    out = os.path.join(work, "out")
    create = [sds, "create", "--quiet", "--jobs", "1", "--segment-samples", str(segment),
              "--records-per-shard", str(per_shard), "--dataset-id", "b", "--snapshot-id", "s",
              out, "--from-sigmf", *files]
    times = {"create": [], "local[1]": [], "local[2]": [], "empty": []}
    engine = {"local[1]": [], "local[2]": []}
    for _ in range(repeat):
        fresh(out)
        times["create"].append(timed(create)[0])
        assert record_count(sds, out) == records
        for master in engine:
            spark = [sys.executable, JOB, "publish", "--sds", sds, "--master", master,
                     "--files-per-task", str(FILES_PER_TASK), "--segment-samples",
                     str(segment), "--dataset-id", "b", "--snapshot-id", "s",
                     "--out", fresh(out), "--sigmf", *files]
            elapsed, timing = timed(spark, spark_env())
            times[master].append(elapsed)
            engine[master].append(timing["tasks_s"] + timing["publish_s"])
            assert record_count(sds, out) == records
        times["empty"].append(timed([sys.executable, "-c", EMPTY_JOB], spark_env())[0])
    print_rows(records, {k: statistics.median(v) for k, v in times.items()},
               {k: statistics.median(v) for k, v in engine.items()})


def print_rows(records, median, engine):
    create = records / median["create"]
    base = f"`sds create --jobs 1` {create:,.0f} records/s ({median['create']:.2f} s)"
    print("| # | workload | ours | baseline | ratio | target | result |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row, master in (("10a", "local[1]"), ("10b", "local[2]")):
        cores = master[6]
        whole = records / median[master]
        running = records / engine[master]
        print(f"| {row} | Spark publication, {records:,} records, {cores} executor core(s)"
              f" (`{master}`), whole command | {whole:,.0f} records/s ({median[master]:.2f} s)"
              f" | {base} | {whole / create:.2f}x | - | (reference) |")
        print(f"| {row}' | the same, tasks and publication only (Spark started) |"
              f" {running:,.0f} records/s ({engine[master]:.2f} s) | {base} |"
              f" {running / create:.2f}x | - | (reference) |")
    print(f"| 10c | an empty Spark job: start-up and stop (`local[2]`) | {median['empty']:.2f} s |"
          f" - | - | - | (reference) |")

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
