//! `sds verify DATASET [--deep]`: the report of [`crate::dataset::verify()`] as text.
//!
//! One line per problem, `OBJECT[ ordinal N]: RULE`, in the order found, then one summary
//! line. The exit status (1 when any problem was found) is the caller's.

use crate::dataset::VerifyReport;

/// Problem lines and the summary line.
pub fn to_text(report: &VerifyReport) -> String {
    let mut out = String::new();
    for problem in &report.problems {
        out.push_str(&crate::cli::location::one_line(&problem.to_string()));
        out.push('\n');
    }
    let mode = if report.deep { "deep" } else { "normal" };
    let verdict = match report.problems.len() {
        0 => "ok".to_string(),
        1 => "1 problem".to_string(),
        n => format!("{n} problems"),
    };
    out.push_str(&format!(
        "{verdict} ({mode} verification): {} of {} records checked, {} manifest pages, {} shard objects, {} annotation sets\n",
        report.records_checked,
        report.record_count,
        report.pages_checked,
        report.shards_checked,
        report.annotation_sets_checked
    ));
    out
}
