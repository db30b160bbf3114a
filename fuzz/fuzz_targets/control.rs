//! libFuzzer target `control`: the property of `run("control", _)` in `fuzz/common.rs`.
#![no_main]

#[path = "../common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(message) = common::run("control", data) {
        panic!("control: {message}");
    }
});
