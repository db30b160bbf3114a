//! libFuzzer target `json`: the property of `run("json", _)` in `fuzz/common.rs`.
#![no_main]

#[path = "../common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(message) = common::run("json", data) {
        panic!("json: {message}");
    }
});
