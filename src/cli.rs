//! The `sdsfs` and `sds` command lines. The binaries in `src/bin/` only call into this module.

pub mod docs;
pub mod location;
pub mod mount;
pub mod sds;
pub mod size;
pub mod status;
