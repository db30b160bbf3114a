#!/usr/bin/env python3
"""A Spark standalone cluster on loopback for tests/spark_example.rs: one master on 127.0.0.1
and WORKERS workers on 127.0.0.2, 127.0.0.3, ... (one core, 1 GiB each), from the pyspark
package's own launcher (`bin/spark-class`).

    spark_cluster.py DIR WORKERS

Prints `master spark://127.0.0.1:PORT` once every worker has registered, then runs until its
standard input closes (or SIGTERM), when it stops every process it started (each in its own
process group, with the executors the workers launched) and exits.

Why not local mode: Spark never speculates there (its speculation checker runs only on
non-local schedulers), and never starts a speculative copy on the host of the original, so
local-cluster mode (all executors on one host) does not speculate either. Workers bound to
distinct loopback addresses are distinct hosts to the scheduler.
"""

import os
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class():
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    return home, os.path.join(home, "bin", "spark-class")


def start(directory, name, args, host, log):
    home, launcher = spark_class()
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP=host,
               SPARK_LOG_DIR=directory, SPARK_WORKER_DIR=os.path.join(directory, name))
    out = open(os.path.join(directory, f"{name}.log"), "w", encoding="utf-8")
    log.append(out.name)
    return subprocess.Popen([launcher, *args], env=env, stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def wait_registered(master_log, workers, deadline):
    while time.time() < deadline:
        with open(master_log, encoding="utf-8", errors="replace") as f:
            if f.read().count("Registering worker") >= workers:
                return
        time.sleep(0.2)
    raise SystemExit(f"spark_cluster: {workers} workers did not register (see {master_log})")


def stop(processes):
    for process in processes:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.time() + 10
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def main(directory, workers):
    os.makedirs(directory, exist_ok=True)
    port = free_port()
    master = f"spark://127.0.0.1:{port}"
    logs, processes = [], []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        processes.append(start(directory, "master", [
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
            "--webui-port", "0"], "127.0.0.1", logs))
        for k in range(workers):
            host = f"127.0.0.{k + 2}"
            processes.append(start(directory, f"worker{k}", [
                "org.apache.spark.deploy.worker.Worker", "--host", host, "--cores", "1",
                "--memory", "1g", "--webui-port", "0",
                "--work-dir", os.path.join(directory, f"work{k}"), master], host, logs))
        wait_registered(logs[0], workers, time.time() + 60)
        print(f"master {master}", flush=True)
        sys.stdin.read()
    finally:
        stop(processes)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
