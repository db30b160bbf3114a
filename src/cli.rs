//! The `sdsfs` and `sds` command lines. The binaries in `src/bin/` only call into this module.

pub mod docs;
pub mod location;
pub mod mount;
pub mod sds;
pub mod size;
pub mod status;

/// What `--version` prints after the program's name: the crate version and the commit the
/// binary was built from (see `build.rs`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SDSFS_COMMIT"),
    ")"
);
