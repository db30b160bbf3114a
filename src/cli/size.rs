//! Byte sizes on the command line: `1073741824`, `512M`, `2G`, `1GiB`, `64KiB` (binary units),
//! and back: [`format_size`] writes a count for people (`1.4 MiB`).

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
