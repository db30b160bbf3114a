#!/usr/bin/env python3
"""The performance suite of issue 8, driven by scripts/bench (not a test; see docs/PERFORMANCE.md).

Usage: bench_suite.py BIN_DIR WORK_DIR quick|full REPEAT [ROWS]

BIN_DIR holds sdsfs, sds, make_bench_dataset and bench_zstd; WORK_DIR is an empty scratch
directory (the caller deletes it). ROWS: comma-separated workload numbers (default all: 1-9,
W1, W2, W3, S1, S2, S3, M1 and C1-C7).
Every time is the median of REPEAT runs; "cpu" is the CPU time of the processes doing the work
(the reading process plus the sdsfs daemon, or the Python interpreter, or sds), which the other
builds sharing the machine disturb less than wall time. Prints one markdown table, then the
details. Mounts are unmounted in `finally` blocks, also on failure.
"""
import ctypes
import json
import os
import resource
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = sys.executable
CACHE_MIB = 256  # --cache-size of the mounts of workloads 1, 3 and 7
WALK_CACHE_MIB = 128  # --cache-size of the mounts of the W, S and M rows
WALK_SAMPLES = 2048  # complex64 samples per record in the W, S and M rows: 16 KiB
WALK_ROWS = {"W1", "W2", "W3", "S1", "S2", "S3", "M1"}
COLUMN_ROWS = {"C1", "C2", "C3", "C4", "C5", "C6", "C7"}
COLUMN_CACHE_MIB = 128  # --cache-size of the mounts of the C rows
COLUMN_BIG_SAMPLES = 131072  # complex64 samples per record of C2: 1 MiB
# W3: records per shard at both sizes, so the two differ in their record count only (the
# first stat of a record reads its metadata shard's index, whose size is the shard's)
WALK_SCALE_PER_SHARD = 1000
SIZES = {
    # field MiB, scan records, scan samples, metadata records, scaling (small, large),
    # create records, create samples
    # walk: records of the W/S/M rows (one 16 KiB field each); walk_scale: W3's two sizes
    "quick": dict(large_mib=64, scan=1_000, scan_samples=16384, meta=10_000,
                  scale=(1_000, 100_000), create=1_000, create_samples=2048, lib=1_000,
                  walk=2_000, walk_scale=(1_000, 100_000),
                  columns=2_000, columns_big=200, columns_ls=100_000),
    "full": dict(large_mib=256, scan=10_000, scan_samples=16384, meta=100_000,
                 scale=(1_000, 1_000_000), create=10_000, create_samples=2048, lib=10_000,
                 walk=10_000, walk_scale=(1_000, 1_000_000),
                 columns=10_000, columns_big=1_000, columns_ls=1_000_000),
}
CLK = os.sysconf("SC_CLK_TCK")


def log(*args):
    print("bench:", *args, file=sys.stderr, flush=True)


def med(values):
    return statistics.median(values)


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd, capture=True):
    """Runs cmd; returns (wall seconds, CPU seconds of the process and its children, stdout).
    Without `capture` the output goes to /dev/null: a reader's bytes must not be timed through
    a pipe into this interpreter."""
    c0, t0 = children_cpu(), time.perf_counter()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE if capture else subprocess.DEVNULL).stdout
    return time.perf_counter() - t0, children_cpu() - c0, out


def pad(ordinal, count):
    return "%0*d" % (len(str(count - 1)), ordinal)


class Mount:
    """`sdsfs mount --foreground` in the background, ready when the mountpoint is mounted."""

    def __init__(self, bins, dataset, mnt, cache_mib=None, threads=None):
        self.cmd = [os.path.join(bins, "sdsfs"), "mount", "--foreground", dataset, mnt]
        if cache_mib:
            self.cmd[3:3] = ["--cache-size", f"{cache_mib}M"]
        if threads:
            self.cmd[3:3] = ["--threads", str(threads)]
        self.mnt = mnt
        self.proc = None

    def __enter__(self):
        self.proc = subprocess.Popen(self.cmd, stderr=open(os.path.join(os.path.dirname(self.mnt), "sdsfs.log"), "a"))
        deadline = time.monotonic() + 60
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None:
                raise RuntimeError(f"sdsfs exited with {self.proc.returncode} before mounting")
            if time.monotonic() > deadline:
                raise RuntimeError("mount not ready after 60 s")
            time.sleep(0.001)
        return self

    def cpu(self):
        fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK

    def hwm_bytes(self):
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmHWM")

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if os.path.ismount(self.mnt):
            subprocess.run(["umount", "-l", self.mnt], check=False)
        return False


def timed_in_mount(mount, cmd, capture=False):
    """(wall, cpu of cmd + the daemon's CPU meanwhile, stdout if captured)."""
    d0 = mount.cpu()
    wall, cpu, out = run(cmd, capture)
    return wall, cpu + mount.cpu() - d0, out


def library(root, mode, field=None):
    """One timed pass of the `signal-dataset` library over ROOT (tests/python/bench_library.py)."""
    args = [PY, f"{REPO}/tests/python/bench_library.py", "read", root, mode] + ([field] if field else [])
    return json.loads(run(args)[2])


def make(bins, *args):
    subprocess.run([os.path.join(bins, "make_bench_dataset"), *map(str, args)], check=True,
                   stdout=subprocess.DEVNULL)


def warm(paths):
    """Reads files once so the shards are in the page cache for both sides."""
    for p in paths:
        subprocess.run(["cat", p], stdout=subprocess.DEVNULL, check=True)


def shard_files(root):
    out = []
    for d, _, files in os.walk(os.path.join(root, "objects")):
        out += [os.path.join(d, f) for f in files]
    return out


# ---------------------------------------------------------------------------------------------
# 1, 2, 7: one large field
# ---------------------------------------------------------------------------------------------

def large_field(bins, work, size, repeat, res):
    ds, raw, mnt = f"{work}/large", f"{work}/iq.raw", f"{work}/mnt"
    mib = size["large_mib"]
    log(f"workload 1/2: one {mib} MiB complex64 field of Gaussian noise")
    make(bins, "noise", ds, mib, raw)
    warm(shard_files(ds) + [raw])
    field = f"{mnt}/records/0/fields/iq.raw"
    first, first_cpu, second, local, second_cpu, local_cpu, hwm = [], [], [], [], [], [], []
    zstd_runs = []
    for i in range(repeat):
        # Baseline (a) right before each first read, so both see the host as it is then (its
        # speed drifts by up to 2x over minutes on this VM).
        zstd_runs.append(json.loads(run([f"{bins}/bench_zstd", ds, "0", "3"])[2]))
        with Mount(bins, ds, mnt, CACHE_MIB) as m:
            w, c, _ = timed_in_mount(m, ["cat", field])
            first.append(w)
            first_cpu.append(c)
            if i == 0 and subprocess.run(["cmp", "-s", field, raw]).returncode != 0:
                raise RuntimeError("the mount's iq.raw differs from the published bytes")
            for _ in range(3):  # interleaved: second reads and local reads see the same load
                w, c, _ = timed_in_mount(m, ["cat", field])
                second.append(w)
                second_cpu.append(c)
                w, c, _ = run(["cat", raw], capture=False)
                local.append(w)
                local_cpu.append(c)
            hwm.append(m.hwm_bytes())
    z = {key: med([r[key] for r in zstd_runs]) for key in zstd_runs[0]}
    py, py_cpu = [], []
    for _ in range(repeat):
        d = library(ds, "getitem", "iq")
        if d["bytes"] != mib << 20:
            raise RuntimeError(f"the library's dataset[0] returned {d['bytes']} bytes")
        py.append(d["seconds"])
    res["large"] = dict(mib=mib, first=med(first), first_cpu=med(first_cpu), second=med(second),
                        second_cpu=med(second_cpu), local=med(local), local_cpu=med(local_cpu),
                        zstd=z["zstd_seconds"], read_payload=z["read_payload_seconds"],
                        zstd_fresh=z["zstd_fresh_seconds"], copy=z["copy_seconds"],
                        frame_bytes=z["frame_bytes"], payload_bytes=z["payload_bytes"],
                        python=med(py), hwm=max(hwm), runs=dict(first=first, second=second, local=local))


# ---------------------------------------------------------------------------------------------
# 3, 7: sequential scan
# ---------------------------------------------------------------------------------------------

def copy_out(mnt, dest, names):
    """Copies files out of the mount into `dest` under the same names; returns `dest`."""
    for name in names:
        target = os.path.join(dest, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(os.path.join(mnt, name), "rb") as src, open(target, "wb") as out:
            out.write(src.read())
    return dest


def scan(bins, work, size, repeat, res):
    ds, mnt, n, samples = f"{work}/scan", f"{work}/mnt", size["scan"], size["scan_samples"]
    log(f"workload 3: {n:,} records of {samples} complex64 samples, every iq.raw in order")
    make(bins, "scan", ds, n, samples)
    warm(shard_files(ds))
    names = [f"records/{pad(o, n)}/fields/iq.raw" for o in range(n)]
    paths = [f"{mnt}/{name}" for name in names]
    ours, ours_cpu, hwm, again, again_cpu = [], [], [], [], []
    for i in range(repeat):
        with Mount(bins, ds, mnt, CACHE_MIB) as m:
            w, c, _ = timed_in_mount(m, ["cat", *paths])
            ours.append(w)
            ours_cpu.append(c)
            hwm.append(m.hwm_bytes())
            # Reference point: the same scan again, everything in the kernel's caches (only
            # an OPEN per file reaches the daemon): the kernel's share of the first scan.
            w, c, _ = timed_in_mount(m, ["cat", *paths])
            again.append(w)
            again_cpu.append(c)
            if i == 0:
                local = copy_out(mnt, f"{work}/scan-local", names)
    # Reference point: `cat` of the same bytes as local files (page cache warm).
    local_paths = [f"{local}/{name}" for name in names]
    run(["cat", *local_paths], capture=False)
    local_runs = [run(["cat", *local_paths], capture=False)[:2] for _ in range(repeat)]
    local_times, local_cpu = [w for w, _ in local_runs], [c for _, c in local_runs]
    subprocess.run(["rm", "-rf", local], check=True)
    # The bound: one record's chunk decompressed in process (one-shot zstd into a ready
    # buffer), times the records, is CPU any reader of this dataset must spend.
    z = json.loads(run([f"{bins}/bench_zstd", ds, "0", "200"])[2])
    py, py_cpu = [], []
    for _ in range(repeat):
        d = library(ds, "iter", "iq")
        if d["records"] != n or d["bytes"] != n * samples * 8:
            raise RuntimeError(f"the library's iter_records() read {d}")
        py.append(d["seconds"])
        py_cpu.append(d["cpu_seconds"])
    res["scan"] = dict(records=n, bytes=n * samples * 8, ours=med(ours), ours_cpu=med(ours_cpu),
                       python=med(py), python_cpu=med(py_cpu), hwm=max(hwm),
                       again=med(again), again_cpu=med(again_cpu), local=med(local_times),
                       local_cpu=med(local_cpu),
                       zstd_record=z["zstd_seconds"], cores=os.cpu_count())
    subprocess.run(["rm", "-rf", ds], check=True)


# ---------------------------------------------------------------------------------------------
# 4: metadata over many records, and data-shard bytes (inotify)
# ---------------------------------------------------------------------------------------------

class Inotify:
    """Counts IN_OPEN/IN_ACCESS events on directories: any open or read of a file in them."""

    def __init__(self, dirs):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        for d in dirs:
            if self.libc.inotify_add_watch(self.fd, d.encode(), 0x1 | 0x20) < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {d}")
        self.count = 0

    def drain(self):
        time.sleep(0.2)
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return self.count
            pos = 0
            while pos < len(buf):
                _, mask, _, length = struct.unpack_from("iIII", buf, pos)
                pos += 16 + length
                self.count += 1 if mask & 0x4000 == 0 else 1000000  # IN_Q_OVERFLOW: many


def metadata(bins, work, size, repeat, res):
    ds, mnt, n = f"{work}/meta", f"{work}/mnt", size["meta"]
    log(f"workload 4: ls -l, du -sb, find over {n:,} records")
    make(bins, "many", ds, n)
    data_dirs = [os.path.join(ds, "objects", "data", d) for d in os.listdir(os.path.join(ds, "objects", "data"))]
    watch = Inotify(data_dirs)
    rec = f"{mnt}/records/{pad(n // 2, n)}"
    t = {k: [] for k in ("ls_one", "ls_one_cpu", "ls_all", "find", "find_cpu", "du", "du_cpu")}
    events = []
    for _ in range(repeat):
        before = watch.drain()
        with Mount(bins, ds, mnt) as m:
            run(["ls", "-l", rec], capture=False)
            for _ in range(5):
                w, c, _ = timed_in_mount(m, ["ls", "-l", rec])
                t["ls_one"].append(w)
                t["ls_one_cpu"].append(c)
            t["ls_all"].append(timed_in_mount(m, ["ls", "-l", f"{mnt}/records"])[0])
            w, c, out = timed_in_mount(m, ["find", f"{mnt}/records", "-name", "*.npy"], capture=True)
            t["find"].append(w)
            t["find_cpu"].append(c)
            found = out.count(b"\n")
            if found != 2 * n:
                raise RuntimeError(f"find saw {found} .npy files, expected {2 * n}")
            w, c, out = timed_in_mount(m, ["du", "-sb", f"{mnt}/records"], capture=True)
            t["du"].append(w)
            t["du_cpu"].append(c)
        events.append(watch.drain() - before)
    before = watch.drain()
    with Mount(bins, ds, mnt):
        run(["cat", f"{rec}/fields/iq.raw"], capture=False)
    control = watch.drain() - before
    if control == 0:
        raise RuntimeError("the inotify watcher saw no data-shard read for a field read")
    res["meta"] = dict(records=n, events=events, control=control, **{k: med(v) for k, v in t.items()})


# ---------------------------------------------------------------------------------------------
# 5: mount + list + stat, small vs large
# ---------------------------------------------------------------------------------------------

def scaling(bins, work, size, repeat, res):
    small, large = size["scale"]
    mnt = f"{work}/mnt"
    out = {}
    for n in (small, large):
        ds = f"{work}/meta" if n == size["meta"] and os.path.isdir(f"{work}/meta") else f"{work}/scale{n}"
        if not os.path.isdir(ds):
            log(f"workload 5: generating {n:,} records")
            make(bins, "many", ds, n)
        first = f"{mnt}/records/{pad(0, n)}/record.json"
        full, head = [], []
        # Each run is milliseconds and the machine is noisy: three times the repetitions.
        for _ in range(3 * repeat):
            # (a) mount, `ls records/` (every name), stat record 0
            t0 = time.perf_counter()
            with Mount(bins, ds, mnt):
                subprocess.run(["ls", f"{mnt}/records"], check=True, stdout=subprocess.DEVNULL)
                os.stat(first)
                full.append(time.perf_counter() - t0)
            # (b) mount, the first batch of names (what a paging listing shows first), stat
            t0 = time.perf_counter()
            with Mount(bins, ds, mnt):
                with os.scandir(f"{mnt}/records") as it:
                    next(it)
                os.stat(first)
                head.append(time.perf_counter() - t0)
        out[n] = dict(full=med(full), head=med(head), local=local_listing(n, 3 * repeat))
        if ds.startswith(f"{work}/scale"):
            subprocess.run(["rm", "-rf", ds], check=True)
    res["scale"] = dict(small=small, large=large, **{str(k): v for k, v in out.items()})


def local_listing(n, runs):
    """Reference for 5a: `ls` of a local directory of n entries (tmpfs, the fastest there is)
    and a stat in it, the same work as 5a without FUSE: how listing every name scales."""
    base = tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        names = [pad(o, n) for o in range(n)]
        for name in names:
            os.close(os.open(os.path.join(base, name), os.O_CREAT | os.O_WRONLY, 0o444))
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run(["ls", base], check=True, stdout=subprocess.DEVNULL)
            os.stat(os.path.join(base, names[0]))
            times.append(time.perf_counter() - t0)
        return med(times)
    finally:
        subprocess.run(["rm", "-rf", base], check=True)


# ---------------------------------------------------------------------------------------------
# 6: sds create
# ---------------------------------------------------------------------------------------------

def create(bins, work, size, repeat, res):
    n, samples, per_shard = size["create"], size["create_samples"], 500
    src = f"{work}/create-in"
    log(f"workload 6: sds create of {n:,} records of {samples} samples")
    subprocess.run([PY, f"{REPO}/tests/python/create_bench.py", "gen", src, str(n), str(samples)], check=True)
    times = {k: [] for k in ("py", "py_cpu", "j1", "j1_cpu", "j2", "j2_cpu")}
    identical = True
    for _ in range(repeat):
        out = f"{work}/create-py"
        # sds fsyncs every object it creates (the library does not): start each run with
        # no dirty pages of earlier workloads, or those fsyncs wait for unrelated writeback.
        os.sync()
        w, c, _ = run([PY, f"{REPO}/tests/python/create_bench.py", "write", out, src, str(per_shard)])
        times["py"].append(w)
        times["py_cpu"].append(c)
        for jobs in (1, 2):
            dst = f"{work}/create-j{jobs}"
            os.sync()
            w, c, _ = run([f"{bins}/sds", "create", dst, "--from-dir", src, "--records-per-shard", str(per_shard),
                           "--jobs", str(jobs), "--dataset-id", "bench", "--snapshot-id", "bench-v1", "--quiet"])
            times[f"j{jobs}"].append(w)
            times[f"j{jobs}_cpu"].append(c)
        identical &= subprocess.run(["diff", "-rq", out, f"{work}/create-j1"], stdout=subprocess.DEVNULL).returncode == 0
        identical &= subprocess.run(["diff", "-rq", f"{work}/create-j1", f"{work}/create-j2"],
                                    stdout=subprocess.DEVNULL).returncode == 0
        subprocess.run(["rm", "-rf", out, f"{work}/create-j1", f"{work}/create-j2"], check=True)
    subprocess.run(["rm", "-rf", src], check=True)
    res["create"] = dict(records=n, identical=identical, **{k: med(v) for k, v in times.items()})


# ---------------------------------------------------------------------------------------------
# 9: the library's readers and writer against the mount and sds, on the same dataset
# ---------------------------------------------------------------------------------------------

def against_library(bins, work, size, repeat, res):
    ds, mnt, n, samples = f"{work}/lib", f"{work}/mnt", size["lib"], size["scan_samples"]
    log(f"workload 9: the library's readers on {n:,} records of {samples} samples, and write_shard")
    make(bins, "scan", ds, n, samples)
    warm(shard_files(ds))
    paths = [f"{mnt}/records/{pad(o, n)}/fields/iq.raw" for o in range(n)]
    t = {k: [] for k in ("cat", "du", "find", "ls", "getitem", "iter", "getitems", "metadata",
                         "write_lib", "write_sds")}
    for _ in range(repeat):
        with Mount(bins, ds, mnt, CACHE_MIB) as m:
            t["du"].append(timed_in_mount(m, ["du", "-sb", f"{mnt}/records"])[0])
            t["find"].append(timed_in_mount(m, ["find", f"{mnt}/records"])[0])
        with Mount(bins, ds, mnt, CACHE_MIB) as m:
            t["cat"].append(timed_in_mount(m, ["cat", *paths])[0])
        t["ls"].append(run([f"{bins}/sds", "ls", ds])[0])
        for mode in ("getitem", "iter", "getitems", "metadata"):
            d = library(ds, mode, None if mode == "metadata" else "iq")
            if d["records"] != n:
                raise RuntimeError(f"the library's {mode} read {d}")
            t[mode].append(d["seconds"])
        per = min(n, 1000)
        for side in ("lib", "sds"):
            out = f"{work}/lib-write-{side}"
            os.sync()
            if side == "lib":
                d = json.loads(run([PY, f"{REPO}/tests/python/bench_library.py", "write-shard", ds, out,
                                    "0", str(per), "w"])[2])
                t["write_lib"].append(d["seconds"])
            else:
                w, _, _ = run([f"{bins}/sds", "write-shard", out, "--work-id", "w", "--from-dataset", ds,
                               "--range", f"0:{per}", "--receipt-out", f"{work}/receipt.json"])
                t["write_sds"].append(w)
        identical = subprocess.run(["diff", "-rq", f"{work}/lib-write-lib", f"{work}/lib-write-sds"],
                                   stdout=subprocess.DEVNULL).returncode == 0
        subprocess.run(["rm", "-rf", f"{work}/lib-write-lib", f"{work}/lib-write-sds"], check=True)
    res["library"] = dict(records=n, written=min(n, 1000), identical=identical,
                          **{k: med(v) for k, v in t.items()})
    subprocess.run(["rm", "-rf", ds], check=True)



# ---------------------------------------------------------------------------------------------
# W1-W3, S1-S3, M1: walk and scan at local-filesystem speed (issue 18)
# ---------------------------------------------------------------------------------------------

def status_requests(mnt):
    """The mount's FUSE requests by operation (`.sdsfs-status`)."""
    with open(f"{mnt}/.sdsfs-status") as f:
        return json.load(f)["requests"]["by_op"]


class RequestMeter:
    """FUSE requests by operation during a command (the mount does not count the status
    file's own)."""

    def __init__(self, mnt):
        self.mnt = mnt

    def __enter__(self):
        self.before = status_requests(self.mnt)
        return self

    def __exit__(self, *exc):
        after = status_requests(self.mnt)
        diff = {k: after[k] - self.before.get(k, 0) for k in after}
        self.counts = {k: v for k, v in diff.items() if v}
        return False


def drop_dentries():
    """Drops the kernel's reclaimable dentries and inodes (not the page cache)."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")


def walk_cmd(root):
    """`find ROOT/records` and `du -sb ROOT/records`, in one shell (outputs discarded)."""
    return ["sh", "-c", f"find '{root}/records' >/dev/null && du -sb '{root}/records' >/dev/null"]


def build_twin(mnt, twin):
    """The tmpfs twin of the mount's records/: same names, sparse files of the same sizes.
    Returns (entries below records/, apparent bytes)."""
    entries = total = 0
    for d, dirs, files in os.walk(f"{mnt}/records"):
        rel = os.path.relpath(d, mnt)
        os.makedirs(os.path.join(twin, rel), exist_ok=True)
        entries += len(dirs) + len(files)
        for name in files:
            size = os.stat(os.path.join(d, name)).st_size
            with open(os.path.join(twin, rel, name), "wb") as f:
                f.truncate(size)
            total += size
    return entries, total


def fill_twin(mnt, twin, names):
    """Writes the real bytes of `names` (relative paths) from the mount into the twin."""
    for name in names:
        with open(f"{mnt}/{name}", "rb") as src, open(f"{twin}/{name}", "wb") as out:
            out.write(src.read())


def walk_and_scan(bins, work, size, repeat, wanted, res):
    n = size["walk"]
    ds, mnt = f"{work}/walk", f"{work}/mnt"
    twin = tempfile.mkdtemp(prefix="sdsfs-twin-", dir="/dev/shm")
    try:
        log(f"W/S rows: {n:,} records of one {WALK_SAMPLES}-sample complex64 field, written by the library")
        subprocess.run([PY, f"{REPO}/tests/python/create_bench.py", "iq", ds, str(n), str(WALK_SAMPLES), "1000"],
                       check=True)
        warm(shard_files(ds))
        with Mount(bins, ds, mnt, WALK_CACHE_MIB):
            entries, apparent = build_twin(mnt, twin)
        out = dict(records=n, entries=entries, bytes=apparent, hwm=[])
        if wanted & {"W1", "W2"}:
            out.update(walks(bins, ds, mnt, twin, repeat, out))
        names = [f"records/{pad(o, n)}/fields/iq.raw" for o in range(n)]
        if wanted & {"S1", "S2", "S3", "M1"}:
            out.update(scans(bins, ds, mnt, twin, names, repeat, out))
        res["walk"] = out
    finally:
        subprocess.run(["rm", "-rf", twin, ds], check=True)
    if "W3" in wanted:
        res["walk_scale"] = walk_scale(bins, work, size, repeat)


def walks(bins, ds, mnt, twin, repeat, out):
    t = {k: [] for k in ("first", "first_cpu", "first_one_cpu", "warm", "warm_cpu", "twin_cold",
                         "twin_warm")}
    requests = []
    for _ in range(repeat):
        drop_dentries()
        with Mount(bins, ds, mnt, WALK_CACHE_MIB) as m:
            meter = RequestMeter(mnt)
            with meter:
                w, c, _ = timed_in_mount(m, walk_cmd(mnt))
            t["first"].append(w)
            t["first_cpu"].append(c)
            first_requests = meter.counts
            for _ in range(3):  # interleaved with the twin's warm walks: the same load
                with meter:
                    w, c, _ = timed_in_mount(m, walk_cmd(mnt))
                t["warm"].append(w)
                t["warm_cpu"].append(c)
                requests.append(meter.counts)
                t["twin_warm"].append(run(walk_cmd(twin), capture=False)[0])
            out["hwm"].append(m.hwm_bytes())
        drop_dentries()
        t["twin_cold"].append(run(walk_cmd(twin), capture=False)[0])
        # W2'': the first walk with the walker and every daemon thread on CPU 0, so no request
        # or reply wakes a thread on another CPU.
        drop_dentries()
        with Mount(bins, ds, mnt, WALK_CACHE_MIB) as m:
            subprocess.run(["taskset", "-a", "-p", "-c", "0", str(m.proc.pid)], check=True,
                           stdout=subprocess.DEVNULL)
            t["first_one_cpu"].append(run(["taskset", "-c", "0", *walk_cmd(mnt)], capture=False)[0])
    worst = max(requests, key=lambda c: sum(c.values()))
    return dict(walk={k: med(v) for k, v in t.items()}, warm_requests=worst,
                first_requests=first_requests)


def scans(bins, ds, mnt, twin, names, repeat, out):
    n = len(names)
    t = {k: [] for k in ("cat", "cat_cpu", "again", "again_cpu", "twin_cat", "npy", "twin_npy",
                         "lib_iter", "lib_getitems")}
    npys = [name.replace("/iq.raw", "/iq.npy") for name in names]
    for i in range(repeat):
        with Mount(bins, ds, mnt, WALK_CACHE_MIB) as m:
            paths = [f"{mnt}/{name}" for name in names]
            w, c, _ = timed_in_mount(m, ["cat", *paths])
            t["cat"].append(w)
            t["cat_cpu"].append(c)
            if i == 0:
                fill_twin(mnt, twin, names + npys)
            twin_paths = [f"{twin}/{name}" for name in names]
            for _ in range(3):  # interleaved: the mount's second scans and the twin's
                w, c, _ = timed_in_mount(m, ["cat", *paths])
                t["again"].append(w)
                t["again_cpu"].append(c)
                t["twin_cat"].append(run(["cat", *twin_paths], capture=False)[0])
            out["hwm"].append(m.hwm_bytes())
        with Mount(bins, ds, mnt, WALK_CACHE_MIB) as m:
            d = json.loads(run([PY, f"{REPO}/tests/python/bench_npy.py", f"{mnt}/records", str(n)])[2])
            if d["records"] != n:
                raise RuntimeError(f"bench_npy.py read {d}")
            t["npy"].append(d["seconds"])
            out["hwm"].append(m.hwm_bytes())
        d = json.loads(run([PY, f"{REPO}/tests/python/bench_npy.py", f"{twin}/records", str(n)])[2])
        if d["records"] != n:
            raise RuntimeError(f"bench_npy.py read {d} from the twin")
        t["twin_npy"].append(d["seconds"])
        for mode in ("iter", "getitems"):
            d = library(ds, mode, "iq")
            if d["records"] != n or d["bytes"] != n * WALK_SAMPLES * 8:
                raise RuntimeError(f"the library's {mode} read {d}")
            t[f"lib_{mode}"].append(d["seconds"])
    return dict(scan={k: med(v) for k, v in t.items()})


def walk_scale(bins, work, size, repeat):
    """W3: the first `ls -l records/` and `ls -l records/<middle>` of a fresh mount, at two
    sizes; the same `ls -l` of a tmpfs directory of as many empty directories for reference."""
    out = {}
    mnt = f"{work}/mnt"
    for n in size["walk_scale"]:
        ds = f"{work}/walk-scale{n}"
        log(f"W3: generating {n:,} records")
        make(bins, "many", ds, n, WALK_SCALE_PER_SHARD)
        warm(shard_files(ds))
        rec = f"records/{pad(n // 2, n)}"
        t = {"records": [], "one": [], "tmpfs": []}
        requests = []
        for _ in range(3 * repeat):  # milliseconds each, on a noisy machine
            with Mount(bins, ds, mnt):
                t["records"].append(run(["ls", "-l", f"{mnt}/records"], capture=False)[0])
            with Mount(bins, ds, mnt):
                meter = RequestMeter(mnt)
                with meter:
                    t["one"].append(run(["ls", "-l", f"{mnt}/{rec}"], capture=False)[0])
                requests.append(meter.counts)
        subprocess.run(["rm", "-rf", ds], check=True)
        base = tempfile.mkdtemp(dir="/dev/shm")
        try:
            os.makedirs(f"{base}/records")
            for o in range(n):
                os.mkdir(f"{base}/records/{pad(o, n)}")
            for _ in range(3 * repeat):
                t["tmpfs"].append(run(["ls", "-l", f"{base}/records"], capture=False)[0])
        finally:
            subprocess.run(["rm", "-rf", base], check=True)
        out[str(n)] = dict({k: med(v) for k, v in t.items()}, one_requests=max(requests, key=lambda c: sum(c.values())))
    return dict(small=size["walk_scale"][0], large=size["walk_scale"][1], **out)

# ---------------------------------------------------------------------------------------------
# C1-C7: columns/ against the library (issue 29)
# ---------------------------------------------------------------------------------------------

def column_tool(*args):
    """One timed pass of tests/python/bench_columns.py (its JSON object)."""
    return json.loads(run([PY, f"{REPO}/tests/python/bench_columns.py", *map(str, args)])[2])


def same_values(ours, theirs, what):
    """Both sides of a row read the same records and summed the same values."""
    close = all(abs(a - b) <= 1e-6 * max(1.0, abs(b)) for a, b in zip(ours["sum"], theirs["sum"]))
    if ours["records"] != theirs["records"] or not close:
        raise RuntimeError(f"{what}: columns/ read {ours}, the library {theirs}")


def column_pass(bins, ds, mnt, mode, args, hwm, threads=None):
    """`bench_columns.py MODE <file of columns/> ARGS` in a fresh mount (nothing of an earlier
    pass in the kernel's page cache), the index built on the way; records the daemon's peak."""
    with Mount(bins, ds, mnt, COLUMN_CACHE_MIB, threads) as m:
        d = column_tool(mode, f"{mnt}/columns/{args[0]}", *args[1:])
        hwm.append(m.hwm_bytes())
    return d


def column_scans(bins, work, name, count, samples, per_shard, repeat, hwm, more=False, threads=()):
    """The scan (with `more`, also random batches and lines; and the scan again with each of
    `threads` as --threads) of a library dataset of `count` records of one complex64 field `iq`
    of `samples` samples, against the library on the same dataset."""
    ds, mnt = f"{work}/{name}", f"{work}/mnt"
    log(f"C rows: {count:,} records of one {samples}-sample complex64 field, written by the library")
    subprocess.run([PY, f"{REPO}/tests/python/create_bench.py", "iq", ds, str(count), str(samples),
                    str(per_shard)], check=True)
    warm(shard_files(ds))
    modes = [("scan", "lib-scan", ("iq.npy",), ("iq",))]
    if more:
        modes += [("random", "lib-random", ("iq.npy", 29), ("iq", 29)),
                  ("lines", "lib-lines", ("records.jsonl",), ())]
    t = {}
    try:
        for _ in range(repeat):
            for mode, lib_mode, args, lib_args in modes:
                ours = column_pass(bins, ds, mnt, mode, args, hwm)
                theirs = column_tool(lib_mode, ds, *lib_args)
                same_values(ours, theirs, mode)
                t.setdefault(mode, []).append(ours["seconds"])
                t.setdefault(lib_mode, []).append(theirs["seconds"])
            for n in threads:
                t.setdefault(f"threads{n}", []).append(
                    column_pass(bins, ds, mnt, "scan", ("iq.npy",), hwm, n)["seconds"])
    finally:
        subprocess.run(["rm", "-rf", ds], check=True)
    return dict(records=count, bytes=count * samples * 8, **{k: med(v) for k, v in t.items()})


def column_listing(bins, work, count, repeat):
    """C7: the first `ls -l columns/` of a fresh mount (the index built from every row)
    against `sds ls` of the same dataset (every row printed)."""
    ds, mnt = f"{work}/columns-ls", f"{work}/mnt"
    log(f"C7: generating {count:,} records")
    make(bins, "many", ds, count)
    warm(shard_files(ds))
    t = {"ls": [], "sds_ls": []}
    try:
        for _ in range(repeat):
            with Mount(bins, ds, mnt, COLUMN_CACHE_MIB):
                t["ls"].append(run(["ls", "-l", f"{mnt}/columns"], capture=False)[0])
            t["sds_ls"].append(run([f"{bins}/sds", "ls", ds], capture=False)[0])
    finally:
        subprocess.run(["rm", "-rf", ds], check=True)
    return dict(records=count, **{k: med(v) for k, v in t.items()})


def columns_rows(bins, work, size, repeat, wanted, res):
    hwm = []
    out = dict(hwm=hwm)
    if wanted & {"C1", "C3", "C4", "C5", "C6"}:
        threads = sorted({1, 2, os.cpu_count() or 1}) if "C6" in wanted else ()
        out["small"] = column_scans(bins, work, "columns-16k", size["columns"], WALK_SAMPLES, 1000,
                                    repeat, hwm, more=True, threads=threads)
    if wanted & {"C2", "C5"}:
        out["big"] = column_scans(bins, work, "columns-1m", size["columns_big"], COLUMN_BIG_SAMPLES, 100,
                                  repeat, hwm)
    if "C7" in wanted:
        out["listing"] = column_listing(bins, work, size["columns_ls"], repeat)
    res["columns"] = out

# ---------------------------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------------------------

def secs(s, cpu=None):
    text = f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"
    return text + (f" (cpu {cpu:.2f} s)" if cpu is not None else "")


def rows(res):
    out = []

    def row(num, what, ours, base, ratio, target, ok):
        out.append((num, what, ours, base, ratio, target, "pass" if ok else "MISS"))

    def info(num, what, ours, base, ratio):
        # A reference point for the analysis of a row, not a target.
        out.append((num, what, ours, base, ratio, "-", "(reference)"))

    def scaling_row(num, what, r, key):
        # The large size's time of `key` against the small size's: at most 1.2x.
        small, large = r[str(r["small"])], r[str(r["large"])]
        x = large[key] / small[key]
        row(num, what, secs(large[key]), f"{r['small']:,} records {secs(small[key])}", f"{x:.2f}x",
            "<= 1.2x", x <= 1.2)

    if "large" in res:
        r = res["large"]
        mib = r["mib"]
        a = r["zstd"] / r["first"]
        b = r["python"] / r["first"]
        row("1a", f"cat {mib} MiB .raw, first read", secs(r["first"], r["first_cpu"]),
            f"zstd in-process {secs(r['zstd'])}", f"{a:.2f}x", ">= 0.8x", a >= 0.8)
        ceiling = r["zstd"] / (r["zstd"] + r["copy"])
        info("1a'", "zstd in-process + one copy of the output", secs(r["zstd"] + r["copy"]),
             f"zstd in-process {secs(r['zstd'])}", f"{ceiling:.2f}x")
        fresh = r["zstd_fresh"] / r["first"]
        info("1a''", f"cat {mib} MiB .raw, first read", secs(r["first"]),
             f"zstd into fresh memory {secs(r['zstd_fresh'])}", f"{fresh:.2f}x")
        row("1b", f"cat {mib} MiB .raw, first read", secs(r["first"]),
            f"library dataset[0] {secs(r['python'])}", f"{b:.2f}x", ">= 2x", b >= 2)
        c = r["local"] / r["second"]
        row("2", "same file again (page cache)", secs(r["second"], r["second_cpu"]),
            f"local cat {secs(r['local'], r['local_cpu'])}", f"{c:.2f}x", ">= 0.9x", c >= 0.9)
    if "scan" in res:
        r = res["scan"]
        x = r["python"] / r["ours"]
        xc = r["python_cpu"] / r["ours_cpu"]
        row("3", f"every iq.raw of {r['records']:,} records in order", secs(r["ours"], r["ours_cpu"]),
            f"library iter_records() {secs(r['python'], r['python_cpu'])}", f"{x:.2f}x (cpu {xc:.2f}x)", ">= 2x", x >= 2)
        info("3'", "the same scan again, same mount (kernel caches)", secs(r["again"]),
             f"library iter_records() {secs(r['python'])}", f"{r['python'] / r['again']:.2f}x")
        info("3''", f"cat of the same {r['records']:,} files on local disk", secs(r["local"]),
             f"library iter_records() {secs(r['python'])}", f"{r['python'] / r['local']:.2f}x")
        # The least CPU any mount can serve this scan with: every chunk decompressed (zstd
        # alone) plus what `cat` itself spends on the same files when they are local; spread
        # perfectly over every core, with no FUSE cost at all, it is the fastest possible scan.
        floor_cpu = r["zstd_record"] * r["records"] + r["local_cpu"]
        best = floor_cpu / r["cores"]
        info("3 bound", f"fastest possible: (zstd of every chunk {secs(r['zstd_record'] * r['records'])}"
             f" + local cat cpu {secs(r['local_cpu'])}) / {r['cores']} cores", secs(best),
             f"library iter_records() {secs(r['python'])}", f"{r['python'] / best:.2f}x")
        # The same with what the kernel's FUSE path costs per file at the least: the CPU of the
        # scan again (3', cat + daemon: an OPEN per file, everything else cached) instead of
        # local cat's.
        fuse_best = (r["zstd_record"] * r["records"] + r["again_cpu"]) / r["cores"]
        info("3 bound'", f"fastest through FUSE: (zstd {secs(r['zstd_record'] * r['records'])}"
             f" + cpu of 3' {secs(r['again_cpu'])}) / {r['cores']} cores", secs(fuse_best),
             f"library iter_records() {secs(r['python'])}", f"{r['python'] / fuse_best:.2f}x")
    if "meta" in res:
        r = res["meta"]
        zero = sum(r["events"]) == 0
        row("4", f"ls -l/du -sb/find over {r['records']:,} records",
            f"ls -l one dir {r['ls_one'] * 1000:.2f} ms; data-shard reads {sum(r['events'])}",
            "-", "-", "0 shard bytes; ls -l < 10 ms", zero and r["ls_one"] < 0.010)
    if "scale" in res:
        r = res["scale"]
        s, l = r[str(r["small"])], r[str(r["large"])]
        scaling_row("5a", f"mount + ls records/ + stat, {r['large']:,} records", r, "full")
        if "local" in l and "local" in s:
            info("5a'", f"ls + stat of a local tmpfs directory of {r['large']:,} entries",
                 secs(l["local"]), f"{r['small']:,} entries {secs(s['local'])}",
                 f"{l['local'] / s['local']:.2f}x")
        scaling_row("5b", f"mount + first readdir batch + stat, {r['large']:,}", r, "head")
    if "create" in res:
        r = res["create"]
        x = r["py"] / r["j1"]
        y = r["j1"] / r["j2"]
        row("6a", f"sds create {r['records']:,} records --jobs 1", secs(r["j1"], r["j1_cpu"]),
            f"library write_shard + publish {secs(r['py'], r['py_cpu'])}", f"{x:.2f}x", ">= 1.5x", x >= 1.5)
        out.append(("6c", "sds create and the library: same files", "identical" if r["identical"] else "DIFFERENT",
                    "-", "-", "byte-identical", "pass" if r["identical"] else "MISS"))
        row("6b", f"sds create {r['records']:,} records --jobs 2", secs(r["j2"], r["j2_cpu"]),
            f"--jobs 1 {secs(r['j1'])}", f"{y:.2f}x", ">= 1.7x", y >= 1.7)
    if "library" in res:
        r = res["library"]
        n = r["records"]
        for mode, what in (("getitem", "dataset[i] for every i"), ("iter", "iter_records()"),
                           ("getitems", "__getitems__, batches of 256")):
            info("9", f"cat every iq.raw of {n:,} records", secs(r["cat"]), f"library {what} {secs(r[mode])}",
                 f"{r[mode] / r['cat']:.2f}x")
        info("9", f"du -sb records/ ({n:,} records)", secs(r["du"]),
             f"library iter_record_metadata() {secs(r['metadata'])}", f"{r['metadata'] / r['du']:.2f}x")
        info("9", f"find records/ ({n:,} records)", secs(r["find"]),
             f"library iter_record_metadata() {secs(r['metadata'])}", f"{r['metadata'] / r['find']:.2f}x")
        info("9", f"sds ls (Rust rows, {n:,} records)", secs(r["ls"]),
             f"library iter_record_metadata() {secs(r['metadata'])}", f"{r['metadata'] / r['ls']:.2f}x")
        info("9", f"sds write-shard of {r['written']:,} records", secs(r["write_sds"]),
             f"library write_shard {secs(r['write_lib'])}", f"{r['write_lib'] / r['write_sds']:.2f}x")
        out.append(("9", "sds write-shard and the library: same files",
                    "identical" if r["identical"] else "DIFFERENT", "-", "-", "byte-identical",
                    "pass" if r["identical"] else "MISS"))
    if "walk" in res:
        r = res["walk"]
        n, entries = r["records"], r["entries"]
        if "walk" in r:
            w = r["walk"]
            sent = sum(r["warm_requests"].values())
            x = w["warm"] / w["twin_warm"]
            row("W1", f"warm find + du -sb records/, {n:,} records ({entries:,} entries)",
                secs(w["warm"], w["warm_cpu"]), f"tmpfs twin {secs(w['twin_warm'])}", f"{x:.2f}x",
                "<= 1.5x", x <= 1.5)
            share = sent / entries
            ops = ", ".join(f"{k} {v}" for k, v in sorted(r["warm_requests"].items())) or "none"
            row("W1'", "FUSE requests during the warm walk", f"{sent:,} ({ops})", f"{entries:,} entries",
                f"{100 * share:.3f}%", "<= 1%", share <= 0.01)
            y = w["first"] / w["twin_cold"]
            cold_twin = f"tmpfs twin, dentries dropped {secs(w['twin_cold'])}"
            row("W2", "first find + du -sb after mounting", secs(w["first"], w["first_cpu"]),
                cold_twin, f"{y:.2f}x", "<= 3x", y <= 3)
            first = r["first_requests"]
            ops = ", ".join(f"{k} {v}" for k, v in sorted(first.items()))
            info("W2'", "FUSE requests during the first walk", f"{sum(first.values()):,} ({ops})",
                 f"{entries:,} entries", f"{sum(first.values()) / entries:.2f} per entry")
            z = w["first_one_cpu"] / w["twin_cold"]
            info("W2''", "the same first walk, walker and daemon on CPU 0", secs(w["first_one_cpu"]),
                 cold_twin, f"{z:.2f}x")
        if "scan" in r:
            c = r["scan"]
            a = c["lib_iter"] / c["cat"]
            row("S1", f"cat every iq.raw of {n:,} records in order", secs(c["cat"], c["cat_cpu"]),
                f"library iter_records() {secs(c['lib_iter'])}", f"{a:.2f}x", ">= 1.0x", a >= 1.0)
            b = c["twin_cat"] / c["again"]
            row("S2", "the same cat again", secs(c["again"], c["again_cpu"]),
                f"cat of the tmpfs twin {secs(c['twin_cat'])}", f"{b:.2f}x", ">= 0.8x", b >= 0.8)
            d = c["lib_getitems"] / c["npy"]
            getitems = f"library __getitems__, batches of 256, {secs(c['lib_getitems'])}"
            row("S3", f"np.load(mmap_mode='r') of every iq.npy, one sample summed", secs(c["npy"]),
                getitems, f"{d:.2f}x", ">= 1.0x", d >= 1.0)
            e = c["lib_getitems"] / c["twin_npy"]
            info("S3'", "the same np.load of the tmpfs twin filled with the real bytes",
                 secs(c["twin_npy"]), getitems, f"{e:.2f}x")
        if r["hwm"]:
            h = max(r["hwm"])
            row("M1", "daemon peak RSS over W1-S3", f"{h / 2**20:.0f} MiB", f"--cache-size {WALK_CACHE_MIB} MiB",
                f"{h / (WALK_CACHE_MIB << 20):.2f}x", "<= cache + 64 MiB", h <= (WALK_CACHE_MIB + 64) << 20)
    if "walk_scale" in res:
        r = res["walk_scale"]
        s, l = r[str(r["small"])], r[str(r["large"])]
        # `ls -l records/` prints a line per record, so its total grows with the count on any
        # filesystem (W3a''); what must not grow is the cost of each line: time per listed
        # record at the large size against the small.
        def each(key):
            return s[key] / r["small"], l[key] / r["large"]

        small_each, large_each = each("records")
        x = large_each / small_each
        row("W3a", f"first ls -l records/, {r['large']:,} records, per record listed",
            f"{large_each * 1e6:.2f} us ({secs(l['records'])})",
            f"{r['small']:,} records {small_each * 1e6:.2f} us ({secs(s['records'])})", f"{x:.2f}x",
            "<= 1.2x", x <= 1.2)
        small_each, large_each = each("tmpfs")
        info("W3a'", f"ls -l of a tmpfs directory of {r['large']:,} directories, per entry",
             f"{large_each * 1e6:.2f} us", f"{r['small']:,} {small_each * 1e6:.2f} us",
             f"{large_each / small_each:.2f}x")
        info("W3a''", f"first ls -l records/, {r['large']:,} records, whole listing", secs(l["records"]),
             f"{r['small']:,} records {secs(s['records'])}", f"{l['records'] / s['records']:.2f}x")
        sent = ", ".join(f"{k} {v}" for k, v in sorted(l["one_requests"].items()))
        scaling_row("W3b", f"first ls -l of one record directory, {r['large']:,} records ({sent})", r, "one")
    if "columns" in res:
        column_table(res["columns"], row, info)
    for key, label in (("large", "1"), ("scan", "3")):
        if key in res:
            h = res[key]["hwm"]
            limit = (CACHE_MIB + 64) << 20
            row("7", f"daemon peak RSS during {label}", f"{h / 2**20:.0f} MiB",
                f"--cache-size {CACHE_MIB} MiB", f"{h / (CACHE_MIB << 20):.2f}x", "<= cache + 64 MiB", h <= limit)
    return out


def column_table(r, row, info):
    """Rows C1-C7 (issue 29): `columns/` against the library, each in one run."""
    def against(num, what, part, ours, theirs, baseline, target):
        x = part[theirs] / part[ours]
        row(num, what, secs(part[ours]), f"{baseline} {secs(part[theirs])}", f"{x:.2f}x",
            f">= {target:g}x", x >= target)

    if "small" in r:
        c = r["small"]
        n = f"{c['records']:,} records of 16 KiB"
        against("C1", f"np.load(columns/iq.npy, mmap) summed in slices of 256, {n}", c, "scan",
                "lib-scan", "library iter_records() summing iq", 3)
        if "lines" in c:
            against("C3", f"columns/records.jsonl read whole, json per line, {c['records']:,} records",
                    c, "lines", "lib-lines", "library iter_record_metadata()", 3)
            against("C4", f"random batches of 256 ordinals through the memmap, {n}", c, "random",
                    "lib-random", "library __getitems__", 1)
        for key in sorted((k for k in c if k.startswith("threads")), key=lambda k: int(k[7:])):
            rate = c["bytes"] / c[key] / 2**20
            info("C6", f"C1's scan with --threads {key[7:]}: {rate:.0f} MiB/s", secs(c[key]),
                 f"--threads 1 {secs(c['threads1'])}", f"{c['threads1'] / c[key]:.2f}x")
    if "big" in r:
        c = r["big"]
        against("C2", f"the same scan, {c['records']:,} records of 1 MiB", c, "scan", "lib-scan",
                "library iter_records() summing iq", 1)
    if r["hwm"]:
        h = max(r["hwm"])
        row("C5", "daemon peak RSS over C1-C4, C6", f"{h / 2**20:.0f} MiB", f"--cache-size {COLUMN_CACHE_MIB} MiB",
            f"{h / (COLUMN_CACHE_MIB << 20):.2f}x", "<= cache + 64 MiB", h <= (COLUMN_CACHE_MIB + 64) << 20)
    if "listing" in r:
        c = r["listing"]
        x = c["sds_ls"] / c["ls"]
        row("C7", f"first ls -l columns/, {c['records']:,} records", secs(c["ls"]),
            f"sds ls {secs(c['sds_ls'])}", f"{x:.2f}x", ">= 1x", x >= 1)


def print_table(res, extra_rows):
    header = ("#", "workload", "ours", "baseline", "ratio", "target", "result")
    lines = [header, ("---",) * 7, *rows(res), *extra_rows]
    for line in lines:
        print("| " + " | ".join(line) + " |")


def s3_rows(mode):
    """Row 8 from scripts/bench-s3 (another part of the suite), when it exists: its lines
    that are markdown table rows of row 8 ("| 8 ...") are taken as they are."""
    script = os.path.join(REPO, "scripts", "bench-s3")
    if not os.access(script, os.X_OK):
        return [("8", "random record reads on S3 (loopback)", "-", "-", "-", "bytes <= 1.2x chunk",
                 "not run (no scripts/bench-s3)")], ""
    log("workload 8: scripts/bench-s3")
    p = subprocess.run([script, f"--{mode}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    found = []
    for line in p.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.lstrip().startswith("|") and cells and cells[0].startswith("8"):
            found.append(tuple(cells))
    if not found:
        found = [("8", "random record reads on S3 (loopback)", "-", "-", "-", "bytes <= 1.2x chunk",
                  f"see scripts/bench-s3 output (exit {p.returncode})")]
    return found, p.stdout


def main(argv):
    bins, work, mode, repeat = argv[1], argv[2], argv[3], int(argv[4])
    wanted = set((argv[5] if len(argv) > 5 else "1,2,3,4,5,6,7,8,9,W1,W2,W3,S1,S2,S3,M1,"
                                                     "C1,C2,C3,C4,C5,C6,C7").split(","))
    size = SIZES[mode]
    res = {}
    started = time.time()
    if wanted & {"1", "2", "7"}:
        large_field(bins, work, size, repeat, res)
    if wanted & {"3", "7"}:
        scan(bins, work, size, repeat, res)
    if "4" in wanted:
        metadata(bins, work, size, repeat, res)
    if "5" in wanted:
        scaling(bins, work, size, repeat, res)
    subprocess.run(["rm", "-rf", f"{work}/meta", f"{work}/large", f"{work}/iq.raw"], check=True)
    if "6" in wanted:
        create(bins, work, size, repeat, res)
    if "9" in wanted:
        against_library(bins, work, size, repeat, res)
    if wanted & WALK_ROWS:
        walk_and_scan(bins, work, size, repeat, wanted, res)
    if wanted & COLUMN_ROWS:
        columns_rows(bins, work, size, repeat, wanted, res)
    extra, s3_output = s3_rows(mode) if "8" in wanted else ([], "")
    uname = os.uname()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"sdsfs benchmark ({mode}, median of {repeat} runs, {time.time() - started:.0f} s); "
          f"{os.cpu_count()} CPUs ({cpu}), Linux {uname.release}, load average "
          f"{os.getloadavg()[0]:.1f} at the end")
    print()
    print_table(res, extra)
    print()
    print("details:", json.dumps(res, sort_keys=True))
    if s3_output:
        print()
        print("scripts/bench-s3 output:")
        print(s3_output.rstrip())


if __name__ == "__main__":
    main(sys.argv)
