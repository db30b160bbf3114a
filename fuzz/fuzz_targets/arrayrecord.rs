//! libFuzzer target `arrayrecord`: the property of `run("arrayrecord", _)` in `fuzz/common.rs`.
#![no_main]

#[path = "../common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(message) = common::run("arrayrecord", data) {
        panic!("arrayrecord: {message}");
    }
});
