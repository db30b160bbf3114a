#!/usr/bin/env python3
"""Distributed SDS publication on Apache Spark: one Spark task per shard, publish from the driver.

Two jobs, both "workers write create-only objects, one coordinator commits":

  publish   a dataset from a source dataset (--source, records split by range) or from SigMF
            recordings (--sigmf, files split into groups). One Spark task per shard (work id
            `w%06d` of its position); a task runs `sds write-shard` or the library's
            `write_shard` with attempt = TaskContext.attemptNumber() and writes its receipt to
            RECEIPTS/<work id>.<attempt>.json. The driver then publishes every receipt in
            RECEIPTS (all attempts, of this run and of any earlier one) with `sds publish` or the
            library's `publish`, which keep the highest attempt of each work id.
  annotate  an annotation set over a published dataset: one Spark task per logical shard
            (`shard-%08d`) runs `sds annotate write-shard` or the library's
            `write_annotation_shard`, which write the shard's object and its create-only worker
            pointer (the first pointer wins, a retry adopts it); the driver publishes the set
            with `sds annotate publish` or the library's `publish_annotation_shards`.

--worker sds|library|mixed picks who writes (mixed: even positions sds, odd the library; the
same position always gets the same kind, so a re-run writes the same bytes), --publisher
sds|library who commits. Library workers read a source dataset; SigMF files are read by `sds`.

Why re-running is safe: every object is create-only and named by its work id and attempt (data)
or its content (annotations), receipts are written only after their shard exists, and the
coordinator writes root.json (or the set root and catalog) last. A failed task, a speculative
copy and a whole re-run after the driver died all converge on one dataset.

Spark: --master (default $SPARK_MASTER, else local[2,4]). Plain local[N] never retries a task
(one attempt per task): local[N,F] allows F attempts. Spark does not speculate in local mode at
all, nor run a speculative copy on the host of the original; --speculation needs a cluster with
two hosts (a standalone master and workers on 127.0.0.2 and 127.0.0.3 do). After the job the
driver prints Spark's own record of every task attempt, read from its event log.

--inject-failure W and --inject-slow W=SECONDS exist to exercise that handling: the first attempt
of W writes its shard and receipt and then fails (or then sleeps).

    python3 publish_with_spark.py publish --sds target/release/sds \\
        --source /data/src --out /data/out --records-per-task 1000 \\
        --dataset-id my-ds --snapshot-id 2024-06-01

The output root must be a directory every executor can write (a shared filesystem: NFS, a
ReadWriteMany volume). `sds` and the library also write s3:// and gs:// roots; this example
takes local paths only.
"""

import argparse
import concurrent.futures
import dataclasses
import glob
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

# ---------------------------------------------------------------------------------------------
# Work units: plain dicts, so they pickle to executors unchanged.


def worker_kind(choice, position):
    if choice == "mixed":
        return "sds" if position % 2 == 0 else "library"
    return choice


def range_units(record_count, per_task, worker):
    """One unit per `per_task` records of the source, in order; the work ids sort like it."""
    units = []
    for position, start in enumerate(range(0, record_count, per_task)):
        units.append({"work_id": f"w{position:06d}", "position": position,
                      "worker": worker_kind(worker, position),
                      "range": [start, min(start + per_task, record_count)]})
    return units


def sigmf_units(files, per_task):
    """One unit per `per_task` SigMF recordings, in the order given (`sds` workers)."""
    units = []
    for position, start in enumerate(range(0, len(files), per_task)):
        units.append({"work_id": f"w{position:06d}", "position": position, "worker": "sds",
                      "sigmf": files[start:start + per_task]})
    return units


def annotation_units(record_count, per_shard, worker):
    count = (record_count + per_shard - 1) // per_shard
    return [{"work_id": f"shard-{k:08d}", "position": k, "worker": worker_kind(worker, k)}
            for k in range(count)]


# ---------------------------------------------------------------------------------------------
# What one task does (runs on an executor).


def log_event(job, unit, attempt, event, **extra):
    """One line per task event in JOB's attempts log (O_APPEND: lines never interleave)."""
    line = json.dumps({"event": event, "work_id": unit["work_id"], "attempt": attempt,
                       "worker": unit["worker"], "host": socket.gethostname(),
                       "pid": os.getpid(), "time": time.time(), **extra}, sort_keys=True)
    with open(os.path.join(job["state"], "attempts.log"), "a", encoding="utf-8") as log:
        log.write(line + "\n")


def write_atomically(path, text):
    directory = os.path.dirname(path)
    descriptor, temporary = tempfile.mkstemp(prefix=".receipt.", dir=directory)
    with os.fdopen(descriptor, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def run_sds(args):
    result = subprocess.run(args, check=False, capture_output=True, text=True)
    if result.returncode != 0:
        # Raising makes Spark retry the task; a retry converges on the same objects.
        raise RuntimeError(f"{' '.join(args[:3])} failed: {result.stderr.strip()}")
    return result.stdout


_OPENED = {}


def library_dataset(root):
    """The library's Dataset of ROOT, opened once per Python worker."""
    import signal_dataset as sds

    if root not in _OPENED:
        _OPENED[root] = sds.open(root)
    return _OPENED[root]


def write_data_shard(job, unit, attempt):
    """One shard pair for UNIT; returns its receipt as one line of JSON."""
    work_id = unit["work_id"]
    if unit["worker"] == "sds":
        args = [job["sds"], "write-shard", job["out"], "--work-id", work_id,
                "--attempt", str(attempt)]
        if "range" in unit:
            start, stop = unit["range"]
            args += ["--from-dataset", job["source"], "--range", f"{start}:{stop}"]
        else:
            args += ["--from-sigmf", *unit["sigmf"]]
            if job["segment_samples"]:
                args += ["--segment-samples", str(job["segment_samples"])]
        receipt = run_sds(args).strip()
        json.loads(receipt)  # a worker never hands the driver a torn receipt
        return receipt
    import signal_dataset as sds

    start, stop = unit["range"]
    records = library_dataset(job["source"])[start:stop]
    published = sds.write_shard(records, job["out"], work_id=work_id, attempt=attempt)
    return json.dumps(dataclasses.asdict(published), sort_keys=True)


def write_annotation_shard(job, unit, attempt):
    """One logical annotation shard and its worker pointer; returns the pointer (JSON)."""
    k = unit["position"]
    if unit["worker"] == "sds":
        out = run_sds([job["sds"], "annotate", "write-shard", job["dataset"], "--name",
                       job["name"], "--publication-id", job["publication_id"], "--rows",
                       job["rows"], "--shard", str(k), "--records-per-shard",
                       str(job["records_per_shard"])])
        pointer = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)["pointer"]
        with open(os.path.join(job["dataset"], pointer), encoding="utf-8") as f:
            return f.read()
    from signal_dataset.annotation.model import published_shard_to_dict
    from signal_dataset.annotation.publisher import write_annotation_shard as write_shard

    dataset = library_dataset(job["dataset"])
    per_shard = job["records_per_shard"]
    rows = load_rows(dataset, job["rows"], k * per_shard, per_shard)
    pointer = write_shard(dataset, job["name"], job["publication_id"], k * per_shard, rows,
                          logical_shard_id=unit["work_id"])
    return json.dumps(published_shard_to_dict(pointer), sort_keys=True)


def load_rows(dataset, path, first, count):
    """Rows FIRST..FIRST+COUNT of a `sds annotate` row file as library AnnotationRecords."""
    import numpy as np
    import signal_dataset as sds

    stop = min(first + count, len(dataset))
    by_id = {dataset.record_metadata[i].id: i for i in range(first, stop)}
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            index = row.get("source_index")
            if index is None:
                index = by_id.get(row["source_record_id"])
            if index is None or not first <= index < stop:
                continue
            fields = {}
            for name, spec in (row.get("fields") or {}).items():
                data = np.load(os.path.join(os.path.dirname(path), spec["npy"]))
                names = spec.get("axes") or [f"dim_{d}" for d in range(data.ndim)]
                axes = tuple(sds.Axis(axis, int(length)) for axis, length in zip(names, data.shape))
                fields[name] = sds.Field(data, axes, metadata=spec.get("metadata") or {})
            rows[index] = sds.AnnotationRecord(
                dataset.record_metadata[index].id, index, sds.AnnotationStatus(row["status"]),
                values=row.get("values") or {}, fields=fields,
                provenance=row.get("provenance") or {}, detail_status=row.get("detail_status"))
    missing = [i for i in range(first, stop) if i not in rows]
    if missing:
        raise ValueError(f"{path}: no rows for records {missing[:5]}")
    return [rows[i] for i in range(first, stop)]


def run_task(job, unit, attempt):
    """Everything one task attempt does, logged: write, keep the result, then any fault."""
    log_event(job, unit, attempt, "start")
    if job["kind"] == "publish":
        result = write_data_shard(job, unit, attempt)
        receipt_path = os.path.join(job["receipts"], f"{unit['work_id']}.{attempt}.json")
        write_atomically(receipt_path, result + "\n")
    else:
        result = write_annotation_shard(job, unit, attempt)
    first_attempt = attempt == 0
    if first_attempt and unit["work_id"] in job["inject_failure"]:
        log_event(job, unit, attempt, "injected-failure")
        raise RuntimeError(f"injected failure of {unit['work_id']} attempt {attempt}")
    if first_attempt and unit["work_id"] in job["inject_slow"]:
        log_event(job, unit, attempt, "injected-sleep")
        time.sleep(job["inject_slow"][unit["work_id"]])
    log_event(job, unit, attempt, "done")
    return result


# ---------------------------------------------------------------------------------------------
# Runners: Spark, or a thread pool (--no-spark) with the same task function.


def spark_conf(args, event_dir):
    from pyspark import SparkConf

    conf = (SparkConf().setMaster(args.master).setAppName(f"sds-{args.command}")
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.eventLog.enabled", "true")
            .set("spark.eventLog.dir", "file://" + event_dir)
            .set("spark.eventLog.compress", "false")
            .set("spark.eventLog.rolling.enabled", "false")
            .set("spark.executor.memory", "512m"))
    if args.speculation:
        # A copy once half the tasks are done and a straggler has run 1.5x their median and
        # at least 5 s (a Python worker's first start alone can take seconds: no copy for it).
        conf = (conf.set("spark.speculation", "true")
                .set("spark.speculation.interval", "100ms")
                .set("spark.speculation.quantile", "0.5")
                .set("spark.speculation.multiplier", "1.5")
                .set("spark.speculation.minTaskRuntime", "5s"))
    return conf


def run_on_spark(args, job, units):
    from pyspark import SparkContext, TaskContext

    # Executors run the tasks with $PYSPARK_PYTHON (python3 when unset): make it this
    # interpreter, the one with signal_dataset, unless the caller chose one.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    event_dir = os.path.join(job["state"], "spark-events")
    os.makedirs(event_dir, exist_ok=True)
    started = time.perf_counter()
    context = SparkContext(conf=spark_conf(args, event_dir))
    context.setLogLevel("ERROR")
    application = context.applicationId
    try:
        def task(unit):
            return run_task(job, unit, TaskContext.get().attemptNumber())

        # One partition per unit: one task per shard.
        rdd = context.parallelize(units, numSlices=max(1, len(units)))
        ready = time.perf_counter()
        results = rdd.map(task).collect()
        job["timing"].update(spark_start_s=ready - started, tasks_s=time.perf_counter() - ready)
    finally:
        context.stop()
    print_spark_attempts(event_dir, application, units)
    return results


def run_locally(args, job, units):
    """Two threads; a failed task is retried with the next attempt number, up to 4 attempts."""
    def task(unit):
        for attempt in range(4):
            try:
                return run_task(job, unit, attempt)
            except Exception:  # noqa: BLE001 -- the retry is the handling, as on Spark
                if attempt == 3:
                    raise
        raise AssertionError("unreachable")

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(task, units))


def event_lines(event_dir, application):
    """The lines of APPLICATION's event log (one file, or the files of a rolling log)."""
    paths = sorted(glob.glob(os.path.join(event_dir, application))
                   + glob.glob(os.path.join(event_dir, f"eventlog_v2_{application}", "events_*")))
    if not paths:
        raise FileNotFoundError(f"no Spark event log for {application} in {event_dir}")
    for path in paths:
        with open(path, encoding="utf-8") as f:
            yield from f


def spark_attempts(event_dir, application, units):
    """Every task attempt in Spark's event log: work id, attempt, executor, host, speculative,
    and how it ended ("running" when the job finished first: a losing speculative original is
    killed after the result is in)."""
    by_index = {u["position"]: u["work_id"] for u in units}
    attempts = {}
    for line in event_lines(event_dir, application):
        event = json.loads(line)
        kind = event.get("Event")
        if kind not in ("SparkListenerTaskStart", "SparkListenerTaskEnd"):
            continue
        info = event["Task Info"]
        attempt = attempts.setdefault(info["Task ID"], {
            "work_id": by_index.get(info["Index"]), "attempt": info["Attempt"],
            "executor": info["Executor ID"], "host": info["Host"],
            "speculative": info["Speculative"], "end": "running"})
        if kind == "SparkListenerTaskEnd":
            attempt["end"] = event["Task End Reason"]["Reason"]
    return sorted(attempts.values(), key=lambda a: (a["work_id"] or "", a["attempt"]))


def print_spark_attempts(event_dir, application, units):
    for attempt in spark_attempts(event_dir, application, units):
        print("spark task attempt " + json.dumps(attempt, sort_keys=True), flush=True)


# ---------------------------------------------------------------------------------------------
# The coordinators.


def read_receipts(directory):
    """Every receipt line in DIRECTORY (all attempts): (work id, attempt, file, line)."""
    found = []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path, encoding="utf-8") as f:
            line = f.read().strip()
        receipt = json.loads(line)
        found.append((receipt["work_id"], receipt["attempt"], path, line))
    return found


def publish_dataset(args, job, units):
    receipts = read_receipts(job["receipts"])
    kept = {}
    for work_id, attempt, _, _ in receipts:
        kept[work_id] = max(attempt, kept.get(work_id, attempt))
    for work_id in sorted(kept):
        seen = sorted(a for w, a, _, _ in receipts if w == work_id)
        print(f"receipts {work_id}: attempts {seen}, kept {kept[work_id]}", flush=True)
    expected = [u["work_id"] for u in units]
    if args.publisher == "sds":
        subprocess.run([job["sds"], "publish", job["out"], "--dataset-id", args.dataset_id,
                        "--snapshot-id", args.snapshot_id, "--expected-work-ids",
                        ",".join(expected), "--receipts", *[r[2] for r in receipts]],
                       check=True, stdout=subprocess.DEVNULL)
        return
    import signal_dataset as sds

    shards = [sds.PublishedShard(**json.loads(r[3])) for r in receipts]
    sds.publish(job["out"], shards, dataset_id=args.dataset_id, snapshot_id=args.snapshot_id,
                expected_work_ids=expected)


def publish_annotation_set(args, job, pointers):
    if args.publisher == "sds":
        subprocess.run([job["sds"], "annotate", "publish", job["dataset"], "--name", args.name,
                        "--publication-id", job["publication_id"], "--records-per-shard",
                        str(args.records_per_shard)], check=True, stdout=subprocess.DEVNULL)
        return
    from signal_dataset.annotation.model import published_shard_from_dict
    from signal_dataset.annotation.publisher import publish_annotation_shards

    dataset = library_dataset(job["dataset"])
    shards = [published_shard_from_dict(json.loads(p)) for p in pointers]
    publish_annotation_shards(dataset, args.name, job["publication_id"], shards)


# ---------------------------------------------------------------------------------------------


def parse_slow(items):
    slow = {}
    for item in items:
        work_id, _, seconds = item.partition("=")
        slow[work_id] = float(seconds or 10)
    return slow


def arguments(argv):
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--sds", default="sds", help="path of the sds binary")
    common.add_argument("--worker", choices=["sds", "library", "mixed"], default="sds")
    common.add_argument("--publisher", choices=["sds", "library"], default="sds")
    common.add_argument("--master", default=os.environ.get("SPARK_MASTER", "local[2,4]"))
    common.add_argument("--speculation", action="store_true")
    common.add_argument("--no-spark", action="store_true",
                        help="run the tasks on a local thread pool instead of Spark")
    common.add_argument("--state", help="job state: attempts log, Spark event logs")
    common.add_argument("--inject-failure", action="append", default=[], metavar="WORK_ID")
    common.add_argument("--inject-slow", action="append", default=[], metavar="WORK_ID=SECONDS")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    publish = commands.add_parser("publish", parents=[common])
    inputs = publish.add_mutually_exclusive_group(required=True)
    inputs.add_argument("--source", help="dataset whose records are published")
    inputs.add_argument("--sigmf", nargs="+", help="SigMF recordings (.sigmf-meta)")
    publish.add_argument("--out", required=True, help="output dataset root")
    publish.add_argument("--records-per-task", type=int, default=10000)
    publish.add_argument("--files-per-task", type=int, default=1)
    publish.add_argument("--segment-samples", type=int,
                         help="split SigMF recordings into records of this many samples")
    publish.add_argument("--receipts", help="receipt directory (default OUT.receipts)")
    publish.add_argument("--dataset-id", required=True)
    publish.add_argument("--snapshot-id", required=True)
    annotate = commands.add_parser("annotate", parents=[common])
    annotate.add_argument("--dataset", required=True)
    annotate.add_argument("--name", required=True)
    annotate.add_argument("--rows", required=True, help="JSON Lines rows (`sds annotate`)")
    annotate.add_argument("--records-per-shard", type=int, default=10000)
    return parser.parse_args(argv)


def dataset_info(sds_binary, root):
    return json.loads(subprocess.run([sds_binary, "info", "--json", root], check=True,
                                     capture_output=True, text=True).stdout)


def plan_publish(args, job):
    if args.sigmf and args.worker != "sds":
        raise SystemExit("SigMF recordings are read by sds workers (--worker sds)")
    out = args.out.rstrip("/")
    job.update(out=os.path.abspath(out), segment_samples=args.segment_samples,
               receipts=os.path.abspath(args.receipts or out + ".receipts"),
               state=os.path.abspath(args.state or out + ".state"))
    os.makedirs(job["receipts"], exist_ok=True)
    if args.sigmf:
        return sigmf_units([os.path.abspath(f) for f in args.sigmf], args.files_per_task)
    job["source"] = os.path.abspath(args.source)
    count = dataset_info(args.sds, job["source"])["record_count"]
    return range_units(count, args.records_per_task, args.worker)


def plan_annotate(args, job):
    info = dataset_info(args.sds, args.dataset)
    # The library's and sds's default id: stable across re-runs of the same set.
    publication_id = hashlib.sha256(f"{info['snapshot_id']}:{args.name}".encode()).hexdigest()
    job.update(dataset=os.path.abspath(args.dataset), name=args.name,
               rows=os.path.abspath(args.rows), records_per_shard=args.records_per_shard,
               publication_id=publication_id[:32],
               state=os.path.abspath(args.state or args.dataset.rstrip("/") + ".state"))
    return annotation_units(info["record_count"], args.records_per_shard, args.worker)


def plan(args):
    """The job description every task receives, and its units."""
    job = {"kind": args.command, "sds": os.path.abspath(args.sds) if os.sep in args.sds
           else args.sds, "inject_failure": set(args.inject_failure),
           "inject_slow": parse_slow(args.inject_slow)}
    units = (plan_publish if args.command == "publish" else plan_annotate)(args, job)
    os.makedirs(job["state"], exist_ok=True)
    return job, units


def main(argv=None):
    args = arguments(argv)
    job, units = plan(args)
    runner = run_locally if args.no_spark else run_on_spark
    job["timing"] = {}
    results = runner(args, job, units)
    started = time.perf_counter()
    if args.command == "publish":
        publish_dataset(args, job, units)
    else:
        publish_annotation_set(args, job, results)
    job["timing"]["publish_s"] = time.perf_counter() - started
    print(f"published {args.command}: {len(units)} tasks", flush=True)
    print("timing " + json.dumps(job["timing"], sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
