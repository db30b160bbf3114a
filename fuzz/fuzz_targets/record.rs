//! libFuzzer target `record`: the property of `run("record", _)` in `fuzz/common.rs`.
#![no_main]

#[path = "../common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(message) = common::run("record", data) {
        panic!("record: {message}");
    }
});
