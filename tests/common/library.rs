//! Running a given release of the `signal-dataset` library (the format owner) from tests, through
//! `tests/python/library_tool.py`, and comparing what it and our tools wrote.
//!
//! 0.4.0 is the venv's own package; earlier releases sit beside it in
//! `.venv/sds-releases/<version>` (installed by `scripts/setup-test-env`, dependencies shared)
//! and run with that directory first on `PYTHONPATH`. The tool is always told which release to
//! expect (`--release`) and refuses to run under another, so a missing or shadowed install is
//! a failure, never a silent run of the wrong version.
//!
//! Only command-line and mount surfaces of our project are used here (`sds`, `sdsfs`), so the
//! harness does not depend on the library crate's internal API.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every release that wrote datasets 0.4.0 still reads, oldest first.
pub const RELEASES: [&str; 6] = ["0.2.0", "0.2.1", "0.2.2", "0.2.3", "0.3.0", "0.4.0"];

/// The current release.
pub const CURRENT: &str = "0.4.0";

/// The interpreter with the reference packages (`SDS_TEST_PYTHON` or the repository's venv).
fn interpreter() -> PathBuf {
    let path = std::env::var_os("SDS_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
    assert!(
        path.exists(),
        "interop tests need the signal-dataset releases: run scripts/setup-test-env \
         (or set SDS_TEST_PYTHON); {} does not exist",
        path.display()
    );
    path
}

/// Where an older release is installed: `<venv>/sds-releases/<version>`, the venv being the
/// interpreter's (not resolved through symlinks: a venv's `bin/python` links to the system one).
pub fn release_dir(release: &str) -> PathBuf {
    let python = interpreter();
    let venv = python
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    venv.join("sds-releases").join(release)
}

/// `library_tool.py ARGS` under `release`; panics with its stderr on failure.
pub fn tool(release: &str, args: &[&str]) -> Vec<u8> {
    let output = tool_output(release, args);
    assert!(
        output.status.success(),
        "library_tool.py (signal-dataset {release}) {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// Like [`tool`], returning the output whatever the status.
pub fn tool_output(release: &str, args: &[&str]) -> std::process::Output {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/library_tool.py");
    let mut command = Command::new(interpreter());
    command
        .arg(&script)
        .arg("--release")
        .arg(release)
        .args(args);
    if release != CURRENT {
        let dir = release_dir(release);
        assert!(
            dir.is_dir(),
            "signal-dataset {release} is not installed at {}: run scripts/setup-test-env",
            dir.display()
        );
        command.env("PYTHONPATH", dir);
    } else {
        command.env_remove("PYTHONPATH");
    }
    command.output().expect("run library_tool.py")
}

/// `library_tool.py ARGS` under `release`, stdout as text (trailing newline removed).
pub fn tool_text(release: &str, args: &[&str]) -> String {
    let out = tool(release, args);
    String::from_utf8(out)
        .expect("library_tool.py prints UTF-8")
        .trim_end_matches('\n')
        .to_string()
}

/// A randomized spec for `seed` written to `dir/spec-<seed>.json`; `extra` are `random-spec`
/// options (`--full`, `--writer-options X`), and so are the words of
/// `SDS_INTEROP_SPEC_OPTIONS` (e.g. `--small-ints`, to tell a failure on integers beyond 64
/// bits from any other when diagnosing).
pub fn spec(dir: &Path, seed: u64, extra: &[&str]) -> PathBuf {
    let seed_text = seed.to_string();
    let from_env = std::env::var("SDS_INTEROP_SPEC_OPTIONS").unwrap_or_default();
    let mut args = vec!["random-spec", seed_text.as_str()];
    args.extend_from_slice(extra);
    args.extend(from_env.split_whitespace());
    let text = tool(CURRENT, &args);
    let path = dir.join(format!("spec-{seed}.json"));
    std::fs::write(&path, text).expect("write spec");
    path
}

/// A piece of a spec (`dataset_id`, `annotations.0.metadata`, ...): strings as they are,
/// anything else as canonical JSON (`null` when absent).
///
/// Ids, counts and index lists are read here; objects (metadata, with integers beyond 64
/// bits that `serde_json` would round) are printed by the tool, digits intact.
pub fn part(spec: &Path, path: &str) -> String {
    let text = std::fs::read_to_string(spec).expect("read spec");
    let mut value: serde_json::Value = serde_json::from_str(&text).expect("spec is JSON");
    for key in path.split('.') {
        value = match key.parse::<usize>() {
            Ok(index) => value.get(index).cloned(),
            Err(_) => value.get(key).cloned(),
        }
        .unwrap_or(serde_json::Value::Null);
    }
    match value {
        serde_json::Value::String(s) => s,
        serde_json::Value::Object(_) => {
            tool_text(CURRENT, &["part", &spec.to_string_lossy(), path])
        }
        other => other.to_string(),
    }
}

/// The library's canonical reading of `root` (`part`: `all`, `records`, `annotations`, ...),
/// by `release`.
pub fn dump(release: &str, root: &Path, part: &str) -> String {
    tool_text(release, &["dump", &root.to_string_lossy(), "--part", part])
}

/// The library's reading of `root`, parsed (big integers become floats: use it for counts and
/// ids only, and compare [`dump`] texts for everything else).
pub fn dump_value(root: &Path) -> serde_json::Value {
    serde_json::from_str(&dump(CURRENT, root, "all")).expect("dump is JSON")
}

/// One shard written by a library worker: its work id, attempt and records in the published
/// dataset (`library_tool.py` writes `plan.json`).
#[derive(Debug, Clone)]
pub struct PlannedShard {
    pub work_id: String,
    pub attempt: u64,
    pub first: u64,
    pub count: u64,
}

/// `OUT/plan.json` of a `library_tool.py write`.
pub fn plan(out: &Path) -> Vec<PlannedShard> {
    let text = std::fs::read_to_string(out.join("plan.json")).expect("plan.json");
    let value: serde_json::Value = serde_json::from_str(&text).expect("plan.json is JSON");
    let items = value.as_array().expect("plan.json is an array");
    items
        .iter()
        .map(|item| PlannedShard {
            work_id: item["work_id"].as_str().expect("work_id").to_string(),
            attempt: item["attempt"].as_u64().expect("attempt"),
            first: item["first"].as_u64().expect("first"),
            count: item["count"].as_u64().expect("count"),
        })
        .collect()
}

/// Every file below `root`: relative path → bytes (symlinks are not followed; there are none in
/// a dataset).
pub fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .expect("below root")
                    .to_string_lossy()
                    .into_owned();
                files.insert(rel, std::fs::read(&path).expect("read file"));
            }
        }
    }
    files
}

/// Asserts two dataset trees hold the same files with the same bytes (paths for which `skip`
/// is true left out), naming the first differences.
///
/// One document kind names its own dataset's absolute location: the worker pointers of a
/// distributed annotation publication (`uri`). Two trees written side by side cannot share a
/// location, so in our files the text of our root is read as the library's root: what is
/// compared is what we would have written where the library wrote.
pub fn assert_same_tree(what: &str, ours: &Path, theirs: &Path, skip: impl Fn(&str) -> bool) {
    let our_root = ours.to_string_lossy().into_owned();
    let their_root = theirs.to_string_lossy().into_owned();
    let keep = |t: BTreeMap<String, Vec<u8>>| -> BTreeMap<String, Vec<u8>> {
        t.into_iter().filter(|(p, _)| !skip(p)).collect()
    };
    let ours: BTreeMap<String, Vec<u8>> = keep(tree(ours))
        .into_iter()
        .map(|(path, bytes)| {
            (
                path,
                replace(&bytes, our_root.as_bytes(), their_root.as_bytes()),
            )
        })
        .collect();
    let theirs = keep(tree(theirs));
    let mut problems = Vec::new();
    for (path, bytes) in &theirs {
        match ours.get(path) {
            None => problems.push(format!("missing from ours: {path}")),
            Some(mine) if mine != bytes => problems.push(format!(
                "differs: {path} ({} vs library {} bytes){}",
                mine.len(),
                bytes.len(),
                text_diff(mine, bytes)
            )),
            Some(_) => {}
        }
    }
    for path in ours.keys().filter(|p| !theirs.contains_key(*p)) {
        problems.push(format!("only in ours: {path}"));
    }
    assert!(
        problems.is_empty(),
        "{what}: trees differ from the library's ({} problems):\n{}",
        problems.len(),
        problems
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// `bytes` with every occurrence of `from` replaced by `to`.
fn replace(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    if from.is_empty() {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = rest.windows(from.len()).position(|w| w == from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// For JSON documents, both texts (short), so a failing byte comparison shows the cause.
fn text_diff(ours: &[u8], theirs: &[u8]) -> String {
    match (std::str::from_utf8(ours), std::str::from_utf8(theirs)) {
        (Ok(a), Ok(b)) if a.len() < 4000 && b.len() < 4000 => {
            format!("\n  ours:    {a:?}\n  library: {b:?}")
        }
        _ => String::new(),
    }
}

/// The seed of this run: `SDS_INTEROP_SEED` when set (to reproduce a failure), else the clock,
/// so each CI run covers new cases. Printed by the callers with every case.
pub fn run_seed() -> u64 {
    if let Some(seed) = std::env::var("SDS_INTEROP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return seed;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() % 1_000_000)
        .unwrap_or(0)
}

/// Records `ordinals` under `mount` (a mount of `root`, or of a damaged copy of it whose other
/// records must still read as `root`'s) against the current library's reading of `root`:
/// `record.json`, every field's files (the exact listing, `.raw`, `.json`, `.npy`, the SigMF
/// pair) and `record.sigmf-collection`. Panics with every difference found.
pub fn assert_records_read_as_library(root: &Path, mount: &Path, ordinals: &[u64]) {
    let ordinals: Vec<String> = ordinals.iter().map(u64::to_string).collect();
    let mut args = vec![
        "check-records".to_string(),
        root.to_string_lossy().into_owned(),
        mount.to_string_lossy().into_owned(),
    ];
    args.extend(ordinals);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = tool_output(CURRENT, &args);
    assert!(
        output.status.success(),
        "records {:?} of {} differ from the library's reading of {}:\n{}",
        &args[3..],
        mount.display(),
        root.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}
