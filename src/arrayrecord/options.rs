//! Writer options: the reference option-string grammar (spec section 7.1) and the exact
//! `writer_options` string the reference stores in the footer.
//!
//! Parsing follows the reference's rules, including its oddities (bare
//! `pad_to_block_boundary` means false, bare `transpose` means true), so that an option
//! string means the same thing to both implementations. Options that only steer the
//! reference's threading are accepted and ignored; they do not change the bytes.

use std::fmt;
use std::str::FromStr;

use super::error::{Error, Result};

/// The compressor of data and footer chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Raw bytes.
    None,
    /// zstd at `level` (libzstd semantics, 0 = default) with `window_log`.
    Zstd { level: i32, window_log: u32 },
    /// brotli at `quality`; `window_log` None = brotli's 22 (and not shown in the string).
    Brotli {
        quality: u32,
        window_log: Option<u32>,
    },
    /// Snappy at `level` 1 (the default) or 2 (the reference's double-hash match finder).
    Snappy { level: u32 },
}

impl Compression {
    /// The compression-type byte of a simple chunk.
    pub fn type_byte(&self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Zstd { .. } => b'z',
            Compression::Brotli { .. } => b'b',
            Compression::Snappy { .. } => b's',
        }
    }
}

/// Default zstd level and the window ArrayRecord forces for zstd.
const DEFAULT_ZSTD_LEVEL: i32 = 3;
const DEFAULT_ZSTD_WINDOW_LOG: u32 = 20;
const DEFAULT_BROTLI_QUALITY: u32 = 6;
const DEFAULT_SNAPPY_LEVEL: u32 = 1;

/// Parsed writer options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterOptions {
    /// Records per data chunk (1..=2^31-1).
    pub group_size: u32,
    /// Compressor of every data chunk and the footer.
    pub compression: Compression,
    /// Pad every data chunk to a block boundary.
    pub pad_to_block_boundary: bool,
}

impl Default for WriterOptions {
    /// The reference default: group_size 1, zstd level 3 with window_log 20, no padding.
    fn default() -> Self {
        Self {
            group_size: 1,
            compression: Compression::Zstd {
                level: DEFAULT_ZSTD_LEVEL,
                window_log: DEFAULT_ZSTD_WINDOW_LOG,
            },
            pad_to_block_boundary: false,
        }
    }
}

/// Options as written, before the compressor-dependent defaults are resolved.
#[derive(Default)]
struct Raw {
    group_size: Option<u32>,
    compressor: Option<(&'static str, Option<i64>)>,
    window_log: Option<Option<u32>>,
    pad: Option<bool>,
}

struct Parser<'a> {
    text: &'a str,
}

impl Parser<'_> {
    fn err(&self, detail: impl Into<String>) -> Error {
        Error::InvalidOptions {
            options: self.text.to_owned(),
            detail: detail.into(),
        }
    }

    fn int(&self, name: &str, value: &str, lo: i64, hi: i64) -> Result<i64> {
        let digits = value.strip_prefix('-').unwrap_or(value);
        let parsed = if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            None
        } else {
            value.parse::<i64>().ok()
        };
        match parsed {
            Some(v) if (lo..=hi).contains(&v) => Ok(v),
            _ => Err(self.err(format!(
                "{name}: {value:?} is not an integer in {lo}..={hi}"
            ))),
        }
    }

    fn boolean(&self, name: &str, value: Option<&str>, bare: bool) -> Result<bool> {
        match value {
            None | Some("") => Ok(bare),
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            Some(v) => Err(self.err(format!("{name}: {v:?} is not true or false"))),
        }
    }

    fn parse(&self) -> Result<WriterOptions> {
        let mut raw = Raw::default();
        let mut seen: Vec<&str> = Vec::new();
        for (position, item) in self.text.split(',').enumerate() {
            if item.is_empty() {
                continue;
            }
            let (name, value) = match item.split_once(':') {
                Some((n, v)) => (n, Some(v)),
                None => (item, None),
            };
            if seen.contains(&name) {
                return Err(self.err(format!("option {name:?} given twice")));
            }
            seen.push(name);
            self.option(&mut raw, name, value, position)?;
        }
        self.resolve(raw)
    }

    fn option(
        &self,
        raw: &mut Raw,
        name: &str,
        value: Option<&str>,
        position: usize,
    ) -> Result<()> {
        let v = value.unwrap_or("");
        match name {
            "default" if value.is_none() && position == 0 => {}
            "default" => return Err(self.err("\"default\" takes no value and must come first")),
            "group_size" => raw.group_size = Some(self.int(name, v, 1, i32::MAX.into())? as u32),
            "zstd" => self.compressor(raw, "zstd", value, -131072, 22)?,
            "brotli" => self.compressor(raw, "brotli", value, 0, 11)?,
            "snappy" => self.compressor(raw, "snappy", value, 1, 2)?,
            "uncompressed" if value.is_none() || v.is_empty() => {
                self.compressor(raw, "uncompressed", None, 0, 0)?
            }
            "uncompressed" => return Err(self.err("\"uncompressed\" takes no value")),
            "window_log" if v == "auto" => raw.window_log = Some(None),
            "window_log" => raw.window_log = Some(Some(self.int(name, v, 10, 31)? as u32)),
            "pad_to_block_boundary" => raw.pad = Some(self.boolean(name, value, false)?),
            "transpose" => {
                if self.boolean(name, value, true)? {
                    return Err(self.err(
                        "transpose:true is not supported for writing (transposed chunks are \
                         a protobuf-specific encoding; use transpose:false)",
                    ));
                }
            }
            "transpose_bucket_size" => self.byte_size(name, v)?,
            "max_parallelism" if v == "auto" => {}
            "max_parallelism" => drop(self.int(name, v, 1, i32::MAX.into())?),
            "saturation_delay_ms" => drop(self.int(name, v, 1, i32::MAX.into())?),
            _ => return Err(self.err(format!("unknown option {name:?}"))),
        }
        Ok(())
    }

    fn compressor(
        &self,
        raw: &mut Raw,
        name: &'static str,
        value: Option<&str>,
        lo: i64,
        hi: i64,
    ) -> Result<()> {
        if let Some((other, _)) = raw.compressor {
            return Err(self.err(format!("only one compressor allowed ({other} and {name})")));
        }
        let level = match value {
            None | Some("") => None,
            Some(v) => Some(self.int(name, v, lo, hi)?),
        };
        raw.compressor = Some((name, level));
        Ok(())
    }

    fn byte_size(&self, name: &str, v: &str) -> Result<()> {
        let digits = v.trim_end_matches(['B', 'k', 'K', 'M', 'G', 'T', 'P', 'E']);
        if v == "auto" || (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())) {
            Ok(())
        } else {
            Err(self.err(format!("{name}: {v:?} is not a byte size")))
        }
    }

    fn resolve(&self, raw: Raw) -> Result<WriterOptions> {
        let (name, level) = raw.compressor.unwrap_or(("zstd", None));
        let window = raw.window_log.flatten();
        let compression = match name {
            "zstd" => Compression::Zstd {
                level: level.map_or(DEFAULT_ZSTD_LEVEL, |l| l as i32),
                window_log: window.unwrap_or(DEFAULT_ZSTD_WINDOW_LOG),
            },
            "brotli" if window.is_some_and(|w| w > 30) => {
                return Err(self.err("window_log for brotli must be in 10..=30"));
            }
            "brotli" => Compression::Brotli {
                quality: level.map_or(DEFAULT_BROTLI_QUALITY, |l| l as u32),
                window_log: window,
            },
            _ if raw.window_log.is_some() => {
                return Err(self.err(format!("window_log is not allowed with {name}")));
            }
            "snappy" => Compression::Snappy {
                level: level.map_or(DEFAULT_SNAPPY_LEVEL, |l| l as u32),
            },
            _ => Compression::None,
        };
        Ok(WriterOptions {
            group_size: raw.group_size.unwrap_or(1),
            compression,
            pad_to_block_boundary: raw.pad.unwrap_or(false),
        })
    }
}

impl WriterOptions {
    /// Parses a reference option string (e.g. `"group_size:2,brotli:9"`; `""` = default).
    pub fn parse(text: &str) -> Result<Self> {
        Parser { text }.parse()
    }
}

impl FromStr for WriterOptions {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

impl fmt::Display for WriterOptions {
    /// The exact string the reference stores in the footer metadata.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "group_size:{},transpose:false,pad_to_block_boundary:{},",
            self.group_size, self.pad_to_block_boundary
        )?;
        match self.compression {
            Compression::None => f.write_str("uncompressed")?,
            // The reference names the compressor only, whatever its level.
            Compression::Snappy { .. } => f.write_str("snappy")?,
            Compression::Zstd { level, window_log } => {
                write!(f, "zstd:{level},window_log:{window_log}")?
            }
            Compression::Brotli {
                quality,
                window_log,
            } => {
                write!(f, "brotli:{quality}")?;
                if let Some(w) = window_log {
                    write!(f, ",window_log:{w}")?;
                }
            }
        }
        // The reference Python writer has no thread pool: always 1.
        f.write_str(",max_parallelism:1")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(s: &str) -> String {
        WriterOptions::parse(s).unwrap().to_string()
    }

    #[test]
    fn renders_reference_strings() {
        let default =
            "group_size:1,transpose:false,pad_to_block_boundary:false,zstd:3,window_log:20,max_parallelism:1";
        assert_eq!(render(""), default);
        assert_eq!(render("default"), default);
        assert_eq!(WriterOptions::default().to_string(), default);
        assert_eq!(WriterOptions::parse("").unwrap(), WriterOptions::default());
        assert_eq!(
            render("group_size:2,uncompressed"),
            "group_size:2,transpose:false,pad_to_block_boundary:false,uncompressed,max_parallelism:1"
        );
        assert_eq!(
            render("brotli,group_size:2"),
            "group_size:2,transpose:false,pad_to_block_boundary:false,brotli:6,max_parallelism:1"
        );
        assert_eq!(
            WriterOptions::parse("snappy:2").unwrap().compression,
            Compression::Snappy { level: 2 }
        );
        assert_eq!(
            WriterOptions::parse("snappy").unwrap().compression,
            Compression::Snappy { level: 1 }
        );
        assert_eq!(
            render("snappy:2"),
            "group_size:1,transpose:false,pad_to_block_boundary:false,snappy,max_parallelism:1"
        );
        assert!(render("window_log:24").ends_with("zstd:3,window_log:24,max_parallelism:1"));
        assert!(
            render("zstd:0,window_log:auto").ends_with("zstd:0,window_log:20,max_parallelism:1")
        );
        assert!(render("zstd:-5").contains("zstd:-5,"));
        assert!(
            render("brotli:9,window_log:24").ends_with("brotli:9,window_log:24,max_parallelism:1")
        );
        assert!(render(",,group_size:2,").starts_with("group_size:2,"));
        assert!(render("pad_to_block_boundary:true").contains("pad_to_block_boundary:true"));
        // Bare pad_to_block_boundary means false (reference quirk).
        assert!(render("pad_to_block_boundary").contains("pad_to_block_boundary:false"));
        assert_eq!(
            render("transpose:false,max_parallelism:auto,saturation_delay_ms:5"),
            default
        );
    }

    #[test]
    fn rejects_what_the_reference_rejects() {
        for bad in [
            "group_size:0",
            "group_size:2147483648",
            "group_size:x",
            "group_size:2,group_size:3",
            "zstd,brotli",
            "zstd:23",
            "brotli:12",
            "snappy:3",
            "uncompressed,window_log:20",
            "snappy,window_log:20",
            "window_log:9",
            "window_log:32",
            "brotli,window_log:31",
            " group_size:2",
            "Group_size:2",
            "group_size:2,default",
            "default:1",
            "pad_to_block_boundary:yes",
            "bogus",
            "transpose",
            "transpose:true",
        ] {
            let err = WriterOptions::parse(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidOptions { .. }), "{bad}: {err}");
        }
        let err = WriterOptions::parse("transpose:true")
            .unwrap_err()
            .to_string();
        assert!(err.contains("transpose"), "{err}");
    }
}
