//! Editing a published dataset in place, as a careless producer or an attacker would, keeping
//! every `stored_bytes` above the edit right so that only the rule a case is about is broken.
#![allow(dead_code)]

use std::path::Path;

use sdsfs::format::path::RelPath;

pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

pub fn write_json(path: &Path, value: &serde_json::Value) {
    let mut text = serde_json::to_string_pretty(value).unwrap();
    text.push('\n');
    std::fs::write(path, text).unwrap();
}

/// The length of `rel` below `dir` when it is a plain relative path to a regular file.
pub fn file_len(dir: &Path, rel: &str) -> Option<u64> {
    RelPath::new(rel).ok()?;
    let meta = std::fs::symlink_metadata(dir.join(rel)).ok()?;
    meta.is_file().then_some(meta.len())
}

pub fn as_u64(value: &serde_json::Value) -> u64 {
    value.as_u64().unwrap_or(0)
}

/// Recomputes every `stored_bytes` up the control graph after objects were edited in place, so
/// that each case breaks only the rule it is about.
pub fn reseal(dir: &Path) {
    let root_path = dir.join("root.json");
    let mut root = read_json(&root_path);
    let snap_rel = root["snapshot"]["path"].as_str().unwrap().to_string();
    if let Some(snap_len) = file_len(dir, &snap_rel) {
        let snap_path = dir.join(&snap_rel);
        let mut snap = read_json(&snap_path);
        let mut total = 0;
        for m in snap["manifests"].as_array_mut().unwrap() {
            let page_rel = m["object"]["path"].as_str().unwrap().to_string();
            if file_len(dir, &page_rel).is_none() {
                total += as_u64(&m["stored_bytes"]);
                continue;
            }
            let page_path = dir.join(&page_rel);
            let mut page = read_json(&page_path);
            let mut page_total = 0;
            // Entries and pages carry no size of their own: the snapshot's manifest reference
            // holds the sum of its entries' data and metadata `stored_bytes`.
            for s in page["shards"].as_array_mut().unwrap() {
                for kind in ["data", "metadata"] {
                    let rel = s[kind]["path"].as_str().unwrap().to_string();
                    let len = file_len(dir, &rel).unwrap_or(as_u64(&s[kind]["stored_bytes"]));
                    s[kind]["stored_bytes"] = len.into();
                    page_total += len;
                }
            }
            write_json(&page_path, &page);
            m["object"]["stored_bytes"] = file_len(dir, &page_rel).unwrap().into();
            m["stored_bytes"] = page_total.into();
            total += page_total;
        }
        snap["stored_bytes"] = total.into();
        write_json(&snap_path, &snap);
        let _ = snap_len;
        root["snapshot"]["stored_bytes"] = file_len(dir, &snap_rel).unwrap().into();
    }
    write_json(&root_path, &root);
}

pub fn snapshot_rel(dir: &Path) -> String {
    read_json(&dir.join("root.json"))["snapshot"]["path"]
        .as_str()
        .unwrap()
        .to_string()
}

pub fn page_rel(dir: &Path, index: usize) -> String {
    read_json(&dir.join(snapshot_rel(dir)))["manifests"][index]["object"]["path"]
        .as_str()
        .unwrap()
        .to_string()
}
