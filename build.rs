//! Build script: records the commit the binaries are built from, for `--version`.
//!
//! `SDSFS_COMMIT` is the 12-digit abbreviated hash of `HEAD`, with `-dirty` when the work tree
//! has changes to tracked files; `unknown` when the sources are not a git checkout (a source
//! tarball) or git is missing. Cargo reruns this when `HEAD` or the ref it names moves.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|changes| !changes.is_empty());
    let suffix = if dirty && commit != "unknown" {
        "-dirty"
    } else {
        ""
    };
    println!("cargo:rustc-env=SDSFS_COMMIT={commit}{suffix}");
    if let Some(git_dir) = git(&["rev-parse", "--git-dir"]) {
        let head = Path::new(&git_dir).join("HEAD");
        println!("cargo:rerun-if-changed={}", head.display());
        if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!(
                "cargo:rerun-if-changed={}",
                Path::new(&git_dir).join(reference).display()
            );
        }
        println!(
            "cargo:rerun-if-changed={}",
            Path::new(&git_dir).join("index").display()
        );
    }
}
