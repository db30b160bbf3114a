//! Running the built `sds` binary from tests.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `sds ARGS` and returns its output, whatever the exit status.
pub fn sds(args: &[&str]) -> Output {
    sds_env(args, &[])
}

/// Runs `sds ARGS` with extra environment variables (e.g. an object store's credentials) and
/// returns its output, whatever the exit status.
pub fn sds_env(args: &[&str], env: &[(&str, String)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sds"))
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("run sds")
}

/// Asserts that `sds verify --deep URL` (with `env`) succeeds, showing its output if not.
pub fn assert_verify_deep(url: &str, env: &[(&str, String)]) {
    let verify = sds_env(&["verify", "--deep", url], env);
    assert!(
        verify.status.success(),
        "{url}: {}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
}

/// Runs `sds ARGS`, asserts success, and returns its stdout.
pub fn ok(args: &[&str]) -> String {
    let out = sds(args);
    assert!(
        out.status.success(),
        "sds {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `command` to completion and returns its stdout and stderr; panics with both when it
/// fails.
pub fn run(command: &mut Command) -> String {
    let output = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{command:?} failed: {text}");
    text
}
