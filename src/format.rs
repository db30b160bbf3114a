//! The SDS layout 0.1 format: everything that is bytes and rules, nothing that does I/O.
//!
//! - [`json`]: the strict JSON reader and the deterministic writer (FORMAT.md section 1).
//! - [`path`]: validated dataset-relative paths (section 4, "References").
//! - [`limits`]: the configurable limits of section 9.
//! - [`dtype`]: the dtype table of section 2.
//! - [`npy`]: NumPy's `.npy` header, read and written (imports, annotation rows, the mount).
//! - [`names`]: field names and ids as path names (the mount's encoding, reversed by imports).
//! - [`png`]: pictures (a canvas, a tiny font) encoded as PNG of a size fixed by the dimensions.
//! - [`printable`]: strings from a dataset made safe for logs and terminals (controls escaped).
//! - [`sigmf`]: the SigMF document a field was imported from, kept in its metadata.

pub mod documents;
pub mod dtype;
pub mod json;
pub mod labels;
pub mod limits;
pub mod names;
pub mod npy;
pub mod path;
pub mod png;
pub mod printable;
pub mod record;
pub mod sigmf;
