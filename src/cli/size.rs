//! Byte sizes on the command line: `1073741824`, `512M`, `2G`, `1GiB`, `64KiB` (binary units),
//! and back: [`format_size`] writes a count for people (`1.4 MiB`); frequencies and rates in
//! Hz: `2000000`, `2M`, `2.4G`, `433.92MHz`, `250k` (decimal units, [`parse_hz`]).

use crate::cli::CliError;

/// Parses a byte count with an optional binary suffix (K, M, G, T; optional `i`/`iB`/`B`).
pub fn parse_size(text: &str) -> Result<u64, CliError> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, suffix) = trimmed.split_at(split);
    let number: u64 = digits.parse().map_err(|_| {
        CliError::from(format!(
            "invalid size {text:?}: expected a number of bytes such as 512M or 2G"
        ))
    })?;
    let shift = match suffix.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KI" | "KIB" => 10,
        "M" | "MB" | "MI" | "MIB" => 20,
        "G" | "GB" | "GI" | "GIB" => 30,
        "T" | "TB" | "TI" | "TIB" => 40,
        _ => {
            return Err(CliError::from(format!(
                "invalid size {text:?}: unknown unit {suffix:?}"
            )))
        }
    };
    number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| CliError::from(format!("invalid size {text:?}: too large")))
}

/// Parses a frequency or rate in Hz: a decimal number (`2.048`, `1e6`) with an optional SI
/// prefix (`k`/`K`, `M`, `G`, `T`: powers of 1000) and an optional `Hz`. A lower-case `m` is
/// refused (milli or mega?), as is anything not finite.
pub fn parse_hz(text: &str) -> Result<f64, CliError> {
    const RULE: &str = "expected Hz such as 2000000, 2M, 2.4G, 433.92MHz or 250k";
    let invalid = || CliError::from(format!("invalid frequency {text:?}: {RULE}"));
    let trimmed = text.trim();
    let unit_free = ["Hz", "HZ", "hz"]
        .iter()
        .find_map(|hz| trimmed.strip_suffix(hz))
        .unwrap_or(trimmed);
    let prefixes = [('k', 1e3), ('K', 1e3), ('M', 1e6), ('G', 1e9), ('T', 1e12)];
    let (number, scale) = prefixes
        .iter()
        .find_map(|&(prefix, scale)| Some((unit_free.strip_suffix(prefix)?, scale)))
        .unwrap_or((unit_free, 1.0));
    let number: f64 = number.trim().parse().map_err(|_| invalid())?;
    let hz = number * scale;
    if hz.is_finite() {
        Ok(hz)
    } else {
        Err(CliError::from(format!(
            "invalid frequency {text:?}: not a finite number"
        )))
    }
}

/// A byte count for people, in binary units with one decimal: `512 B`, `1.5 KiB`, `1.4 MiB`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::{format_size, parse_size};

    #[test]
    fn formats_for_people() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(1023), "1023 B");
        assert_eq!(format_size(1536), "1.5 KiB");
        assert_eq!(format_size(3 << 20), "3.0 MiB");
        assert_eq!(format_size(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn parses_frequencies() {
        use super::parse_hz;
        let cases = [
            ("2000000", 2e6),
            ("2M", 2e6),
            ("2.048MHz", 2.048e6),
            ("2.4G", 2.4e9),
            ("2.4GHz", 2.4e9),
            ("433.92MHz", 433.92e6),
            ("250k", 250e3),
            ("250kHz", 250e3),
            ("1e6", 1e6),
            ("1.5e-3", 1.5e-3),
            ("-100k", -100e3),
            ("10Hz", 10.0),
            ("2 MHz", 2e6),
        ];
        for (text, hz) in cases {
            assert_eq!(parse_hz(text).ok(), Some(hz), "{text}");
        }
        for bad in [
            "", "M", "2m", "2 MHz x", "2Q", "1e999", "nan", "inf", "2MM", "2g",
        ] {
            assert!(parse_hz(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_units() {
        assert_eq!(parse_size("1073741824").ok(), Some(1 << 30));
        assert_eq!(parse_size("512M").ok(), Some(512 << 20));
        assert_eq!(parse_size("2G").ok(), Some(2 << 30));
        assert_eq!(parse_size("64KiB").ok(), Some(64 << 10));
        assert_eq!(parse_size("1t").ok(), Some(1 << 40));
        assert!(parse_size("").is_err());
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999T").is_err());
    }
}
