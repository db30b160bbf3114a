//! libFuzzer target `row`: the property of `run("row", _)` in `fuzz/common.rs`.
#![no_main]

#[path = "../common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(message) = common::run("row", data) {
        panic!("row: {message}");
    }
});
