//! libFuzzer target `names`: the property of `run("names", _)` in `fuzz/common.rs`.
#![no_main]

#[path = "../common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(message) = common::run("names", data) {
        panic!("names: {message}");
    }
});
