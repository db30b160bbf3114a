//! libFuzzer target `claims`: the properties of `run("claims", _)` in `fuzz/common.rs` (see
//! `fuzz/claims.rs`): a real small dataset with some objects replaced, opened under a 16 MiB
//! memory budget and walked by the mount's core. The resident-set bound counts from each
//! input's start here (AddressSanitizer's own memory comes first).
#![no_main]

#[path = "../common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(
    init: {
        common::claims::rss_from_input_start();
    },
    |data: &[u8]| {
        if let Err(message) = common::run("claims", data) {
            panic!("claims: {message}");
        }
    }
);
