//! The mounted tree. `names` and `views` are FUSE-free and unit-tested on their own.

pub mod names;
pub mod views;
