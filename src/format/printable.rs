//! Strings from a dataset made safe to print: every control character escaped.
//!
//! Why: field names, ids, set names and messages that quote them come from datasets other
//! people produced, and reach log files and terminals. A raw `\n` or `\r` there forges whole
//! log lines; ESC and the C1 controls (CSI, OSC) drive a terminal (retitle it, hide text,
//! rewrite what was printed). So every C0 control (U+0000-U+001F), DEL (U+007F) and C1 control
//! (U+0080-U+009F) is written as an escape: `\n`, `\r`, `\t`, `\x1b`, `\u{9b}`. So are the
//! bidirectional controls (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069), which reorder
//! what a terminal shows so that text reads other than it is ("Trojan Source"), and the line
//! and paragraph separators U+2028-U+2029, which some viewers break lines at. Nothing else is
//! changed, so ordinary names (any script, `%`, `\`) print as they are.
//!
//! One function ([`escaped`]) for every print site: the daemon's log writer applies it to each
//! event (keeping only the event's final newline), the CLIs to each dataset-supplied string
//! and to their error lines.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` is a C0 control, DEL, a C1 control, a bidirectional control or a line or
/// paragraph separator.
pub fn is_control(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

/// `text` with every control character escaped (borrowed when there is none).
pub fn escaped(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    Cow::Owned(out)
}

/// Appends `c` to `out`, escaped if it is a control character.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{0}'..='\u{7f}' if is_control(c) => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        _ if is_control(c) => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
        _ => out.push(c),
    }
}

/// `bytes` (text that may not be UTF-8, such as a path) printable: invalid sequences replaced,
/// controls escaped.
pub fn escaped_bytes(bytes: &[u8]) -> String {
    escaped(&String::from_utf8_lossy(bytes)).into_owned()
}

/// JSON text (as serde_json writes it, C0 controls already escaped inside strings) with DEL and
/// the C1 controls escaped too (`\u007f`, `\u009b`): still the same JSON, and nothing in it
/// drives a terminal. Those characters can only stand inside strings, where `\u` escapes mean
/// the same.
pub fn json_printable(json: &str) -> Cow<'_, str> {
    if !json.chars().any(is_control) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        match c {
            // C0 controls stand raw only between tokens (a pretty layout's newlines) and are
            // left; the others can stand only inside strings, where `\u` means the same.
            _ if is_control(c) && c > '\u{7e}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            _ => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A value that prints `escaped` of its `Display` form, for `format!` arguments.
pub struct Printable<T>(pub T);

impl<T: std::fmt::Display> std::fmt::Display for Printable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&escaped(&self.0.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_control_is_escaped_and_nothing_else_changes() {
        assert_eq!(escaped("a\nb\rc\td"), "a\\nb\\rc\\td");
        assert_eq!(escaped("\u{1b}]0;owned\u{7}"), "\\x1b]0;owned\\x07");
        assert_eq!(
            escaped("\u{7f}\u{80}\u{9b}\u{9f}"),
            "\\x7f\\u{80}\\u{9b}\\u{9f}"
        );
        assert!(matches!(escaped("ünï/%\\ 中"), Cow::Borrowed(_)));
        // Bidirectional overrides and isolates, and the line separators.
        assert_eq!(
            escaped("a\u{202e}b\u{2066}c\u{2028}\u{61c}"),
            "a\\u{202e}b\\u{2066}c\\u{2028}\\u{61c}"
        );
        assert_eq!(
            json_printable("{\n  \"n\": \"\u{202e}x\"\n}"),
            "{\n  \"n\": \"\\u202ex\"\n}"
        );
        for code in (0u32..0x20).chain(0x7f..0xa0) {
            let c = char::from_u32(code).unwrap();
            assert!(
                !escaped(&c.to_string()).chars().any(is_control),
                "{code:#x}"
            );
        }
        assert_eq!(escaped_bytes(b"x\xff\x1by"), "x\u{fffd}\\x1by");
        assert_eq!(Printable("id\n").to_string(), "id\\n");
        assert_eq!(json_printable("[\"a\u{9b}b\"]"), "[\"a\\u009bb\"]");
    }
}
