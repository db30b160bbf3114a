//! The `render` fuzz target (`fuzz/render.rs`) checked on its committed seeds: each renders every
//! computed file of its record without a finding, the extreme values of
//! `tests/hostile_views.rs` among them (centres of 1e100, rates of 1e300 and 5e-324, a time step
//! of 1e-300 s, NaN and infinite metadata and boxes, an empty table, 4,096 boxes of a
//! 100,000-character class name).

#[path = "../fuzz/common.rs"]
mod common;

#[test]
fn every_render_seed_runs_without_a_finding() {
    let names = common::seed_names("render");
    assert!(names.len() >= 12, "{names:?}");
    for name in names {
        let path = format!("{}/fuzz/seeds/render/{name}", env!("CARGO_MANIFEST_DIR"));
        let input = std::fs::read(&path).unwrap();
        assert_eq!(common::run("render", &input), Ok(true), "{name}");
    }
}
