//! Shared helpers for integration tests.
#![allow(dead_code)]

pub mod datasets;
pub mod hostile;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Root of the repository (where Cargo.toml is).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python interpreter with the reference packages (`array-record`, `safetensors`, `numpy`).
///
/// Interop tests must not silently pass without the references, so a missing interpreter is a
/// test failure with instructions, not a skip.
pub fn python() -> PathBuf {
    let path = std::env::var_os("SDS_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv/bin/python"));
    assert!(
        path.exists(),
        "interop tests need the reference Python packages: run scripts/setup-test-env \
         (or set SDS_TEST_PYTHON); {} does not exist",
        path.display()
    );
    path
}

/// Runs `tests/python/<script>` with `args`, feeding `stdin`, and returns stdout; panics with
/// stderr on failure.
pub fn run_python(script: &str, args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let script_path = repo_root().join("tests/python").join(script);
    let mut child = Command::new(python())
        .arg(&script_path)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn python");
    let mut child_stdin = child.stdin.take().expect("stdin");
    let input = stdin.to_vec();
    let writer = std::thread::spawn(move || child_stdin.write_all(&input));
    let output = child.wait_with_output().expect("python output");
    writer.join().expect("stdin writer").expect("write stdin");
    assert!(
        output.status.success(),
        "{script} {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

pub mod annotate;
pub mod cli;
pub mod cloud;
pub mod library;
pub mod mount;
pub mod namespace;
pub mod npy;
