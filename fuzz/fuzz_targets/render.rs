//! libFuzzer target `render`: the properties of `run("render", _)` in `fuzz/common.rs` (see
//! `fuzz/render.rs`): the mount's computed files drawn from arbitrary metadata and boxes.
#![no_main]

#[path = "../common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(message) = common::run("render", data) {
        panic!("render: {message}");
    }
});
