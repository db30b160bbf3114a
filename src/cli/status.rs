//! `sdsfs status MOUNTPOINT`: reads the mount's hidden `.sdsfs-status` report (JSON, see
//! [`crate::fs::stats`]) and prints it for people, or raw with `--json`.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::cli::CliError;
use crate::format::printable::{escaped, json_printable};
use crate::fs::stats::STATUS_FILE;

pub fn status(mountpoint: &Path, json: bool) -> Result<(), CliError> {
    let path = mountpoint.join(STATUS_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{}: not an sdsfs mount", mountpoint.display()),
        std::io::ErrorKind::PermissionDenied => format!(
            "{}: {e}: only the user who mounted it (and root) may read it",
            path.display()
        ),
        _ => format!("{}: {e}", path.display()),
    })?;
    if json {
        print!("{}", json_printable(&text));
        return Ok(());
    }
    let report: Value = serde_json::from_str(&text).map_err(CliError::failed(format!(
        "{}: not a status report",
        path.display()
    )))?;
    print!("{}", render(&report));
    Ok(())
}

fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// The report as aligned lines.
pub fn render(r: &Value) -> String {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let s = |v: &Value| escaped(v.as_str().unwrap_or("?")).into_owned();
    let mut out = String::new();
    let _ = writeln!(out, "dataset     {}", s(&r["dataset"]));
    let _ = writeln!(out, "dataset id  {}", s(&r["dataset_id"]));
    let _ = writeln!(out, "snapshot    {}", s(&r["snapshot"]));
    let _ = writeln!(out, "records     {}", n(&r["records"]));
    let _ = writeln!(
        out,
        "mountpoint  {} (pid {}, up {})",
        s(&r["mountpoint"]),
        n(&r["pid"]),
        duration(n(&r["uptime_secs"]))
    );
    let cache = &r["cache"];
    let rate = cache["hit_rate"]
        .as_f64()
        .map_or("-".to_string(), |x| format!("{:.1}%", x * 100.0));
    let _ = writeln!(
        out,
        "cache       {} of {} in memory; {} hits, {} misses (hit rate {rate}); {} loaded",
        bytes(n(&cache["memory_bytes"])),
        bytes(n(&cache["capacity_bytes"])),
        n(&cache["hits"]),
        n(&cache["misses"]),
        bytes(n(&cache["loaded_bytes"])),
    );
    let _ = writeln!(
        out,
        "budgets     memory {} of {} in use (everything decoded or kept); temporary files {} of {}",
        bytes(n(&r["memory"]["used_bytes"])),
        bytes(n(&r["memory"]["budget_bytes"])),
        bytes(n(&r["spill"]["used_bytes"])),
        bytes(n(&r["spill"]["budget_bytes"])),
    );
    let _ = writeln!(
        out,
        "requests    {} FUSE requests, {} answered EIO",
        n(&r["requests"]["fuse"]),
        n(&r["requests"]["eio"])
    );
    let computed = &r["computed"];
    let _ = writeln!(
        out,
        "computed    {} rendered (pictures, SigMF documents, collections, record.json); {} files of {} kept",
        n(&computed["renders"]),
        n(&computed["kept_files"]),
        bytes(n(&computed["kept_bytes"])),
    );
    let passthrough = &r["passthrough"];
    let _ = writeln!(
        out,
        "passthrough {}; {} opens served by the kernel from decoded files",
        if passthrough["enabled"].as_bool() == Some(true) {
            "on"
        } else {
            "off"
        },
        n(&passthrough["opens"])
    );
    if let Some(backends) = r["storage"].as_object() {
        for (name, b) in backends {
            let name = escaped(name);
            let _ = writeln!(
                out,
                "storage     {name}: {} requests, {} fetched, {} errors",
                n(&b["requests"]),
                bytes(n(&b["bytes"])),
                n(&b["errors"])
            );
        }
    }
    match r["errors"].as_object() {
        Some(errors) if !errors.is_empty() => {
            let _ = writeln!(out, "errors by object:");
            for (object, e) in errors {
                let object = escaped(object);
                let _ = writeln!(
                    out,
                    "  {object}: {} (last: {})",
                    n(&e["count"]),
                    s(&e["last_error"])
                );
            }
        }
        _ => {
            let _ = writeln!(out, "errors      none");
        }
    }
    out
}
