//! The strict JSON reader and the deterministic JSON writer of `docs/FORMAT.md` section 1.
//!
//! Why a hand-written parser rather than `serde_json`: the profile needs things a general parser
//! does not give together: duplicate keys refused at every depth, integers kept apart from floats
//! (`3.0` is not an integer, `true` is not an integer), integers of any size kept exactly (never
//! degraded to floats), non-finite numbers refused, and depth / node / byte limits enforced
//! *before* memory in proportion to the input is committed. The parser is a small
//! recursive-descent reader over bytes whose recursion is bounded by the depth limit.
//!
//! Integers: metadata may hold any integer (the format owner's library writes `2**70` as
//! `1180591620717411303424`), so integers beyond `i128` are kept as their decimal digits
//! ([`BigInt`]) and written back digit for digit. The one bound is Python's: its JSON reader
//! refuses integers of more than 4300 digits ([`MAX_INTEGER_DIGITS`]), so a document holding
//! one could not be read by the library, and we refuse it too. Integer *fields* of documents
//! (counts, sizes, ordinals) still go through [`Value::as_u64`] / [`ObjectExt::req_u64`], which
//! refuse anything outside `u64` with a clear error.
//!
//! Depth counts every value, as the library's `_validate_structure` does: the top-level value
//! is depth 1, its members depth 2, and a scalar counts like a container (a scalar nested in 128
//! containers is at depth 129). Nodes are values (objects, arrays, scalars), never keys.
//!
//! The writer reproduces Python's `json.dumps(doc, sort_keys=True, ensure_ascii=False, ...)`:
//! keys in code-point order (ordering keys by their UTF-8 bytes gives the same
//! order), only the escapes Python emits, and floats as `repr(float)` writes them.

use std::fmt::Write as _;

pub use compact_str::CompactString;

pub use super::limits::JsonLimits;

mod members;
mod object;
pub use members::{member_bytes_at_most, Member, ObjectText};
/// A JSON object: keys in code-point order, which is also the deterministic output order.
///
/// Keys are [`CompactString`]s, which keep up to 24 bytes inline: document keys are short
/// (`"axes"`, `"metadata"`, `"coordinate"`), so a parsed object allocates for its members and
/// not for each key. They order, hash, compare and print as their `str`.
pub use object::{Entry as ObjectEntry, Object};

/// The most digits an integer may have: CPython's default `int_max_str_digits`, beyond which
/// the library's JSON reader refuses the document.
pub const MAX_INTEGER_DIGITS: usize = 4300;

/// An integer outside the `i128` range, kept as its canonical decimal text (an optional `-`
/// and digits without leading zeros). Only [`Value::integer`] makes one, so every integer has
/// exactly one representation and `==` on values compares numbers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BigInt(String);

impl BigInt {
    /// The decimal text, exactly as it is written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A parsed JSON value. Integers and floats stay distinct: `1` is `Int(1)`, `1.0` is `Float(1.0)`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// An integer in the `i128` range (larger ones are [`Value::BigInt`]).
    Int(i128),
    /// An integer outside the `i128` range, kept digit for digit.
    BigInt(BigInt),
    /// A finite float; non-finite values are refused on read and on write.
    Float(f64),
    String(String),
    Array(Vec<Value>),
    Object(Object),
}

/// Consistent with `==`: values that compare equal hash alike (`0.0` and `-0.0` included).
impl std::hash::Hash for Value {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Value::Null => {}
            Value::Bool(b) => b.hash(state),
            Value::Int(i) => i.hash(state),
            Value::BigInt(digits) => digits.hash(state),
            Value::Float(f) => (if *f == 0.0 { 0 } else { f.to_bits() }).hash(state),
            Value::String(text) => text.hash(state),
            Value::Array(items) => items.hash(state),
            Value::Object(members) => members.hash(state),
        }
    }
}

/// Why a document was refused, with the byte offset where the problem was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} at byte {offset}")]
pub struct JsonError {
    pub kind: JsonErrorKind,
    pub offset: usize,
}

/// The JSON rule a document broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonErrorKind {
    #[error("document of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge { size: usize, limit: usize },
    #[error("JSON nesting deeper than the limit of {limit}")]
    TooDeep { limit: usize },
    #[error("more than the limit of {limit} JSON values")]
    TooManyNodes { limit: usize },
    #[error("document is not valid UTF-8")]
    NotUtf8,
    #[error("top-level value is not an object")]
    NotAnObject,
    #[error("duplicate key {0:?}")]
    DuplicateKey(String),
    #[error("non-finite number {0} is not allowed")]
    NonFinite(String),
    #[error(
        "integer {0} has more than the {MAX_INTEGER_DIGITS} digits Python's JSON reader accepts"
    )]
    IntegerTooLong(String),
    #[error("invalid string escape")]
    BadEscape,
    #[error("unpaired UTF-16 surrogate in \\u escape")]
    LoneSurrogate,
    #[error("control character in string")]
    ControlCharacter,
    #[error("invalid number")]
    BadNumber,
    #[error("unexpected end of input")]
    UnexpectedEnd,
    #[error("unexpected character {0:?}")]
    Unexpected(char),
    #[error("trailing characters after the document")]
    TrailingCharacters,
}

/// Parses a document whose top-level value must be an object.
pub fn parse_object(input: &[u8], limits: &JsonLimits) -> Result<Object, JsonError> {
    match parse_value(input, limits)? {
        Value::Object(object) => Ok(object),
        _ => Err(JsonError {
            kind: JsonErrorKind::NotAnObject,
            offset: 0,
        }),
    }
}

/// Parses one JSON value of any kind under `limits` (the depth of a top-level container is 1).
pub fn parse_value(input: &[u8], limits: &JsonLimits) -> Result<Value, JsonError> {
    check_document(input, limits)?;
    let mut parser = Parser {
        input,
        pos: 0,
        nodes: 0,
        limits,
    };
    parser.skip_whitespace();
    let value = parser.value(1)?;
    parser.skip_whitespace();
    if parser.pos != input.len() {
        return Err(parser.error(JsonErrorKind::TrailingCharacters));
    }
    Ok(value)
}

/// The checks a whole document passes before any of it is parsed: its size and its encoding.
fn check_document(input: &[u8], limits: &JsonLimits) -> Result<(), JsonError> {
    if input.len() > limits.max_bytes {
        return Err(JsonError {
            kind: JsonErrorKind::TooLarge {
                size: input.len(),
                limit: limits.max_bytes,
            },
            offset: 0,
        });
    }
    match std::str::from_utf8(input) {
        Ok(_) => Ok(()),
        Err(e) => Err(JsonError {
            kind: JsonErrorKind::NotUtf8,
            offset: e.valid_up_to(),
        }),
    }
}

/// What a JSON string is read into: a `String` for values, a [`CompactString`] for keys.
trait Text: Default {
    fn push_str(&mut self, run: &str);
    fn push(&mut self, c: char);
}

impl Text for String {
    fn push_str(&mut self, run: &str) {
        String::push_str(self, run);
    }
    fn push(&mut self, c: char) {
        String::push(self, c);
    }
}

impl Text for CompactString {
    fn push_str(&mut self, run: &str) {
        CompactString::push_str(self, run);
    }
    fn push(&mut self, c: char) {
        CompactString::push(self, c);
    }
}

struct Parser<'a> {
    input: &'a [u8],
    pos: usize,
    nodes: usize,
    limits: &'a JsonLimits,
}

impl Parser<'_> {
    fn error(&self, kind: JsonErrorKind) -> JsonError {
        JsonError {
            kind,
            offset: self.pos,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn unexpected(&self) -> JsonError {
        match self.rest_str().chars().next() {
            Some(c) => self.error(JsonErrorKind::Unexpected(c)),
            None => self.error(JsonErrorKind::UnexpectedEnd),
        }
    }

    /// The input from the current position. Tests on it compare bytes: decoding the rest as
    /// UTF-8 for each keyword made parsing quadratic in the document's length.
    fn rest(&self) -> &[u8] {
        self.input.get(self.pos..).unwrap_or_default()
    }

    fn rest_str(&self) -> &str {
        // The whole input was checked to be UTF-8 and `pos` only ever stops on char boundaries.
        std::str::from_utf8(self.input.get(self.pos..).unwrap_or_default()).unwrap_or_default()
    }

    fn expect_byte(&mut self, byte: u8) -> Result<(), JsonError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }

    fn count_node(&mut self) -> Result<(), JsonError> {
        self.nodes += 1;
        if self.nodes > self.limits.max_nodes {
            return Err(self.error(JsonErrorKind::TooManyNodes {
                limit: self.limits.max_nodes,
            }));
        }
        Ok(())
    }

    /// Parses a value at `depth` (the top-level value is depth 1; scalars count too).
    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        self.count_node()?;
        self.check_depth(depth)?;
        match self.peek() {
            None => Err(self.error(JsonErrorKind::UnexpectedEnd)),
            Some(b'{') => self.object(depth).map(Value::Object),
            Some(b'[') => self.array(depth).map(Value::Array),
            Some(b'"') => self.string().map(Value::String),
            Some(b't') => self.keyword("true", Value::Bool(true)),
            Some(b'f') => self.keyword("false", Value::Bool(false)),
            Some(b'n') => self.keyword("null", Value::Null),
            Some(b'N') => self.non_finite("NaN"),
            Some(b'I') => self.non_finite("Infinity"),
            Some(b'-') if self.rest().starts_with(b"-Infinity") => self.non_finite("-Infinity"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.unexpected()),
        }
    }

    fn keyword(&mut self, word: &str, value: Value) -> Result<Value, JsonError> {
        if self.rest().starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.unexpected())
        }
    }

    fn non_finite(&mut self, word: &str) -> Result<Value, JsonError> {
        if self.rest().starts_with(word.as_bytes()) {
            Err(self.error(JsonErrorKind::NonFinite(word.to_string())))
        } else {
            Err(self.unexpected())
        }
    }

    fn check_depth(&self, depth: usize) -> Result<(), JsonError> {
        if depth > self.limits.max_depth {
            return Err(self.error(JsonErrorKind::TooDeep {
                limit: self.limits.max_depth,
            }));
        }
        Ok(())
    }

    /// Parses an object whose own depth is `depth`; its members are one deeper.
    fn object(&mut self, depth: usize) -> Result<Object, JsonError> {
        let object_offset = self.pos;
        self.pos += 1; // '{'
                       // Members in document order; sorted once at the end when they came out of order.
        let mut members: Vec<(CompactString, Value)> = Vec::new();
        let mut in_order = true;
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Object::new());
        }
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return Err(self.unexpected());
            }
            let key_offset = self.pos;
            let key: CompactString = self.string()?;
            self.skip_whitespace();
            self.expect_byte(b':')?;
            self.skip_whitespace();
            let value = self.value(depth + 1)?;
            match members.last() {
                Some((last, _)) if *last == key => {
                    return Err(JsonError {
                        kind: JsonErrorKind::DuplicateKey(key.to_string()),
                        offset: key_offset,
                    });
                }
                Some((last, _)) if *last > key => in_order = false,
                _ => {}
            }
            members.push((key, value));
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return self.sorted_object(members, in_order, object_offset);
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    /// The object of `members` (in document order; `in_order` when each key followed the one
    /// before): sorted, checked for a key given twice, and holding no slot it does not use.
    fn sorted_object(
        &self,
        mut members: Vec<(CompactString, Value)>,
        in_order: bool,
        object_offset: usize,
    ) -> Result<Object, JsonError> {
        if !in_order {
            members.sort_by(|a, b| a.0.cmp(&b.0));
            if let Some(twice) = members.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(JsonError {
                    kind: JsonErrorKind::DuplicateKey(twice[0].0.to_string()),
                    offset: object_offset,
                });
            }
        }
        members.shrink_to_fit();
        Ok(Object::from_sorted(members))
    }

    /// Parses an array whose own depth is `depth`; its items are one deeper.
    fn array(&mut self, depth: usize) -> Result<Vec<Value>, JsonError> {
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(items);
        }
        loop {
            self.skip_whitespace();
            items.push(self.value(depth + 1)?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    items.shrink_to_fit();
                    return Ok(items);
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    fn string<T: Text>(&mut self) -> Result<T, JsonError> {
        self.pos += 1; // opening quote
        let mut out = T::default();
        loop {
            let start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(self.slice_str(start, self.pos));
            match self.peek() {
                None => return Err(self.error(JsonErrorKind::UnexpectedEnd)),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => out.push(self.escape()?),
                Some(_) => return Err(self.error(JsonErrorKind::ControlCharacter)),
            }
        }
    }

    fn slice_str(&self, start: usize, end: usize) -> &str {
        // Runs end before an ASCII byte or at the end of a UTF-8-checked input: char boundaries.
        std::str::from_utf8(self.input.get(start..end).unwrap_or_default()).unwrap_or_default()
    }

    fn escape(&mut self) -> Result<char, JsonError> {
        self.pos += 1; // backslash
        let c = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 1;
                return self.unicode_escape();
            }
            None => return Err(self.error(JsonErrorKind::UnexpectedEnd)),
            Some(_) => return Err(self.error(JsonErrorKind::BadEscape)),
        };
        self.pos += 1;
        Ok(c)
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let digits = self
            .input
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.error(JsonErrorKind::BadEscape))?;
        let text = std::str::from_utf8(digits).map_err(|_| self.error(JsonErrorKind::BadEscape))?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(self.error(JsonErrorKind::BadEscape));
        }
        let value =
            u32::from_str_radix(text, 16).map_err(|_| self.error(JsonErrorKind::BadEscape))?;
        self.pos += 4;
        Ok(value)
    }

    fn unicode_escape(&mut self) -> Result<char, JsonError> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if !self.rest().starts_with(b"\\u") {
                    return Err(self.error(JsonErrorKind::LoneSurrogate));
                }
                self.pos += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(self.error(JsonErrorKind::LoneSurrogate));
                }
                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(self.error(JsonErrorKind::LoneSurrogate)),
            other => other,
        };
        char::from_u32(code).ok_or_else(|| self.error(JsonErrorKind::BadEscape))
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let int_start = self.pos;
        let int_digits = self.digits();
        if int_digits == 0 || (int_digits > 1 && self.input.get(int_start) == Some(&b'0')) {
            return Err(self.error(JsonErrorKind::BadNumber));
        }
        let mut is_float = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.error(JsonErrorKind::BadNumber));
            }
            is_float = true;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.error(JsonErrorKind::BadNumber));
            }
            is_float = true;
        }
        let text = self.slice_str(start, self.pos);
        if is_float {
            return parse_float(text).map_err(|kind| JsonError {
                kind,
                offset: start,
            });
        }
        parse_int(text).map_err(|kind| JsonError {
            kind,
            offset: start,
        })
    }
}

fn parse_float(text: &str) -> Result<Value, JsonErrorKind> {
    let value: f64 = text.parse().map_err(|_| JsonErrorKind::BadNumber)?;
    if !value.is_finite() {
        return Err(JsonErrorKind::NonFinite(text.to_string()));
    }
    Ok(Value::Float(value))
}

fn parse_int(text: &str) -> Result<Value, JsonErrorKind> {
    Value::integer(text).ok_or_else(|| JsonErrorKind::IntegerTooLong(truncate_for_message(text)))
}

impl Value {
    /// The heap memory the value holds (not its own slot): its strings, its containers' slots
    /// and what their values hold, and [`ALLOCATION`] bytes for each allocation. What a parsed
    /// document keeps is charged at this.
    pub fn heap_bytes(&self) -> u64 {
        match self {
            Value::Null | Value::Bool(_) | Value::Int(_) | Value::Float(_) => 0,
            Value::BigInt(digits) => text_heap_bytes(digits.as_str().len()),
            Value::String(text) => text_heap_bytes(text.capacity()),
            Value::Array(items) => items_heap_bytes(items),
            Value::Object(object) => object.heap_bytes(),
        }
    }
}

/// What a heap text of `capacity` bytes takes.
pub(crate) fn text_heap_bytes(capacity: usize) -> u64 {
    if capacity == 0 {
        0
    } else {
        capacity as u64 + ALLOCATION
    }
}

/// What a vector of values holds on the heap ([`Value::heap_bytes`]).
pub fn items_heap_bytes(items: &Vec<Value>) -> u64 {
    let slots = (items.capacity() * std::mem::size_of::<Value>()) as u64;
    let held: u64 = items.iter().map(Value::heap_bytes).sum();
    held + if slots == 0 { 0 } else { slots + ALLOCATION }
}

impl Value {
    /// The integer written as `text` (an optional `-`, then digits without leading zeros, as
    /// JSON writes them): `Int` when it fits `i128`, else `BigInt`. `None` for text that is not
    /// such an integer or has more than [`MAX_INTEGER_DIGITS`] digits.
    pub fn integer(text: &str) -> Option<Value> {
        let digits = text.strip_prefix('-').unwrap_or(text);
        let canonical = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        if !canonical || digits.len() > MAX_INTEGER_DIGITS {
            return None;
        }
        match text.parse::<i128>() {
            Ok(value) => Some(Value::Int(value)),
            // Canonical digits that do not parse can only be out of range: keep the text.
            Err(_) => Some(Value::BigInt(BigInt(text.to_string()))),
        }
    }
}

fn truncate_for_message(text: &str) -> String {
    if text.len() <= 48 {
        text.to_string()
    } else {
        format!("{}... ({} digits)", &text[..40], text.len())
    }
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

/// Compact deterministic JSON (record descriptors, metadata rows): `,` and `:`, no whitespace,
/// no trailing newline.
pub fn to_compact(value: &Value) -> String {
    let mut out = String::new();
    write_compact(value, &mut out);
    out
}

/// Pretty deterministic JSON (control documents): two-space indent, `,` and `: `, one final LF.
pub fn to_pretty(value: &Value) -> String {
    let mut out = String::new();
    write_pretty(value, 0, &mut out);
    out.push('\n');
    out
}

/// Compact form of an object (convenience for documents built as [`Object`]s).
pub fn object_to_compact(object: &Object) -> String {
    let mut out = String::new();
    write_compact_object(object, &mut out);
    out
}

/// Pretty form of an object, with the final LF.
pub fn object_to_pretty(object: &Object) -> String {
    let mut out = String::new();
    write_pretty_object(object, 0, &mut out);
    out.push('\n');
    out
}

/// An object written in the pretty form member by member, exactly as [`object_to_pretty`]
/// writes a whole one (the caller gives the keys in order): for documents whose members are
/// made one at a time, so that only the text is ever whole.
pub struct PrettyObject<'o> {
    out: &'o mut String,
    indent: usize,
    members: usize,
}

impl<'o> PrettyObject<'o> {
    /// An object at nesting level `indent`, written into `out`.
    pub fn open(out: &'o mut String, indent: usize) -> PrettyObject<'o> {
        PrettyObject {
            out,
            indent,
            members: 0,
        }
    }

    /// The next member.
    pub fn member(&mut self, key: &str, value: &Value) {
        self.key(key);
        write_pretty(value, self.indent + 1, self.out);
    }

    /// The next member, an object held as one.
    pub fn object(&mut self, key: &str, object: &Object) {
        self.key(key);
        write_pretty_object(object, self.indent + 1, self.out);
    }

    /// The next member, an object written member by member (closed by the caller).
    pub fn nested(&mut self, key: &str) -> PrettyObject<'_> {
        self.key(key);
        PrettyObject::open(self.out, self.indent + 1)
    }

    fn key(&mut self, key: &str) {
        self.out.push(if self.members == 0 { '{' } else { ',' });
        self.members += 1;
        newline_indent(self.indent + 1, self.out);
        write_string(key, self.out);
        self.out.push_str(": ");
    }

    /// Ends the object.
    pub fn close(self) {
        if self.members == 0 {
            self.out.push_str("{}");
        } else {
            newline_indent(self.indent, self.out);
            self.out.push('}');
        }
    }
}

fn write_compact(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_compact(item, out);
            }
            out.push(']');
        }
        Value::Object(object) => write_compact_object(object, out),
        scalar => write_scalar(scalar, out),
    }
}

fn write_compact_object(object: &Object, out: &mut String) {
    out.push('{');
    for (i, (key, item)) in object.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(key, out);
        out.push(':');
        write_compact(item, out);
    }
    out.push('}');
}

fn write_pretty(value: &Value, indent: usize, out: &mut String) {
    match value {
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline_indent(indent + 1, out);
                write_pretty(item, indent + 1, out);
            }
            newline_indent(indent, out);
            out.push(']');
        }
        Value::Object(object) => write_pretty_object(object, indent, out),
        scalar => write_scalar(scalar, out),
    }
}

fn write_pretty_object(object: &Object, indent: usize, out: &mut String) {
    if object.is_empty() {
        out.push_str("{}");
        return;
    }
    out.push('{');
    for (i, (key, item)) in object.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        newline_indent(indent + 1, out);
        write_string(key, out);
        out.push_str(": ");
        write_pretty(item, indent + 1, out);
    }
    newline_indent(indent, out);
    out.push('}');
}

fn newline_indent(level: usize, out: &mut String) {
    out.push('\n');
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn write_scalar(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::BigInt(big) => out.push_str(big.as_str()),
        Value::Float(f) => out.push_str(&python_float_repr(*f)),
        Value::String(s) => write_string(s, out),
        Value::Array(_) | Value::Object(_) => write_compact(value, out),
    }
}

/// Writes a JSON string the way Python does with `ensure_ascii=False`: only `"`, `\` and the
/// characters below U+0020 are escaped.
pub fn write_string(s: &str, out: &mut String) {
    // At once, not by doubling: a megabytes-long string would otherwise take up to three
    // times its size while the text grows (old and new buffer during the last copy).
    out.reserve(s.len().saturating_add(2));
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Formats a float exactly as Python's `repr(float)`: the shortest digits that round-trip,
/// positional when the decimal exponent is in [-4, 16), otherwise scientific with a sign and
/// at least two exponent digits; integral values keep `.0`.
///
/// Non-finite values cannot be written as JSON; they are rendered as Python would (`nan`,
/// `inf`), and callers refuse them before writing (the value constructors in this crate never
/// produce them from parsed input).
pub fn python_float_repr(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_string();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    let sci = shortest_digits(value);
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if negative { "-" } else { "" };
    if (-4..16).contains(&exponent) {
        format!("{sign}{}", positional(&digits, exponent))
    } else {
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{sign}{first}{fraction}e{exp_sign}{:02}",
            exponent.unsigned_abs()
        )
    }
}

/// The shortest round-trip digits of a finite `value` as `d[.ddd]e<exp>`, choosing among
/// equally short candidates the one Python's `repr` chooses: the nearest to the exact value,
/// ties to an even last digit.
///
/// Why not `{:e}` alone: it gives the shortest length, but on an exact tie it may pick the
/// other neighbour (931877235453057.25 gives `...57.3`, Python `...57.2`). Rust's fixed
/// precision formatting is correctly rounded with ties to even, so the correctly rounded value
/// at the shortest length is Python's answer whenever it round-trips (it can fail to only at a
/// power-of-two boundary, where the shortest candidate stands).
///
/// A tie needs two candidates of `n` digits a unit of the last digit apart to both round-trip,
/// so that unit must be at most the value's ulp; for a normal number the unit is above
/// 10^-n of the value and the ulp below 2^-52 of it, so below 16 digits no tie can happen and
/// `{:e}` is the answer without the second formatting and the parse (most metadata numbers).
fn shortest_digits(value: f64) -> String {
    let shortest = format!("{value:e}");
    let mantissa = shortest.split('e').next().unwrap_or_default();
    let digits = mantissa.bytes().filter(u8::is_ascii_digit).count();
    if digits <= 15 && (value.is_normal() || value == 0.0) {
        return shortest;
    }
    nearest_of_length(value, shortest, digits)
}

/// The correctly rounded `digits`-digit form of `value` when it round-trips, else `shortest`.
fn nearest_of_length(value: f64, shortest: String, digits: usize) -> String {
    let nearest = format!("{:.*e}", digits.saturating_sub(1), value);
    if nearest.parse::<f64>() == Ok(value) {
        nearest
    } else {
        shortest
    }
}

/// Places the decimal point in `digits` (value = d.ddd × 10^exponent), keeping at least one
/// digit after the point.
fn positional(digits: &str, exponent: i32) -> String {
    if exponent < 0 {
        let zeros = "0".repeat((-exponent - 1) as usize);
        return format!("0.{zeros}{digits}");
    }
    let point = exponent as usize + 1;
    if digits.len() <= point {
        let zeros = "0".repeat(point - digits.len());
        format!("{digits}{zeros}.0")
    } else {
        format!("{}.{}", &digits[..point], &digits[point..])
    }
}

// ---------------------------------------------------------------------------------------------
// Typed access
// ---------------------------------------------------------------------------------------------

/// Why a key of a parsed object could not be read as the type a document needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    #[error("missing required key {0:?}")]
    Missing(String),
    #[error("key {key:?} must be {expected}")]
    WrongType { key: String, expected: &'static str },
    #[error("unknown key {0:?}")]
    Unknown(String),
}

impl Value {
    /// The JSON type's name, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) | Value::BigInt(_) => "an integer",
            Value::Float(_) => "a float",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A JSON integer in `u64` range. Booleans, floats (even `3.0`) and strings are not integers.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(i) => u64::try_from(*i).ok(),
            _ => None,
        }
    }

    /// A JSON integer in `i64` range.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => i64::try_from(*i).ok(),
            _ => None,
        }
    }

    /// A JSON number as `f64` (integers convert, as Python's `float(int)` does; `None` for an
    /// integer too large for a float, where Python raises `OverflowError`).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::BigInt(big) => big.as_str().parse::<f64>().ok().filter(|f| f.is_finite()),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// True when every float inside is finite (values built in memory may hold NaN).
    pub fn is_finite(&self) -> bool {
        match self {
            Value::Float(f) => f.is_finite(),
            Value::Array(items) => items.iter().all(Value::is_finite),
            Value::Object(object) => object.values().all(Value::is_finite),
            _ => true,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

impl From<u64> for Value {
    fn from(i: u64) -> Self {
        Value::Int(i128::from(i))
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i128::from(i))
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}

impl From<Object> for Value {
    fn from(o: Object) -> Self {
        Value::Object(o)
    }
}

impl From<Vec<Value>> for Value {
    fn from(a: Vec<Value>) -> Self {
        Value::Array(a)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// Typed, rule-enforcing reads of an object's keys.
pub trait ObjectExt {
    fn required(&self, key: &str) -> Result<&Value, AccessError>;
    /// A required nonnegative JSON integer (booleans, floats and strings refused).
    fn req_u64(&self, key: &str) -> Result<u64, AccessError>;
    fn req_str(&self, key: &str) -> Result<&str, AccessError>;
    fn req_object(&self, key: &str) -> Result<&Object, AccessError>;
    fn req_array(&self, key: &str) -> Result<&[Value], AccessError>;
    /// An optional key that may also be `null`: absent or null gives `None`.
    fn opt_str(&self, key: &str) -> Result<Option<&str>, AccessError>;
    fn opt_u64(&self, key: &str) -> Result<Option<u64>, AccessError>;
    fn opt_object(&self, key: &str) -> Result<Option<&Object>, AccessError>;
    /// Refuses any key outside `allowed` (exact-key documents).
    fn only_keys(&self, allowed: &[&str]) -> Result<(), AccessError>;
}

impl AccessError {
    /// Key `key` holds a value of another type than `expected` ("a string").
    pub fn wrong_type(key: &str, expected: &'static str) -> AccessError {
        AccessError::WrongType {
            key: key.to_string(),
            expected,
        }
    }
}

impl ObjectExt for Object {
    fn required(&self, key: &str) -> Result<&Value, AccessError> {
        self.get(key)
            .ok_or_else(|| AccessError::Missing(key.to_string()))
    }

    fn req_u64(&self, key: &str) -> Result<u64, AccessError> {
        self.required(key)?
            .as_u64()
            .ok_or_else(|| AccessError::wrong_type(key, "a nonnegative integer"))
    }

    fn req_str(&self, key: &str) -> Result<&str, AccessError> {
        self.required(key)?
            .as_str()
            .ok_or_else(|| AccessError::wrong_type(key, "a string"))
    }

    fn req_object(&self, key: &str) -> Result<&Object, AccessError> {
        self.required(key)?
            .as_object()
            .ok_or_else(|| AccessError::wrong_type(key, "an object"))
    }

    fn req_array(&self, key: &str) -> Result<&[Value], AccessError> {
        self.required(key)?
            .as_array()
            .ok_or_else(|| AccessError::wrong_type(key, "an array"))
    }

    fn opt_str(&self, key: &str) -> Result<Option<&str>, AccessError> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| AccessError::wrong_type(key, "a string or null")),
        }
    }

    fn opt_u64(&self, key: &str) -> Result<Option<u64>, AccessError> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| AccessError::wrong_type(key, "a nonnegative integer or null")),
        }
    }

    fn opt_object(&self, key: &str) -> Result<Option<&Object>, AccessError> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_object()
                .map(Some)
                .ok_or_else(|| AccessError::wrong_type(key, "an object or null")),
        }
    }

    fn only_keys(&self, allowed: &[&str]) -> Result<(), AccessError> {
        match self.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(unknown) => Err(AccessError::Unknown(unknown.to_string())),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Value, JsonErrorKind> {
        parse_value(text.as_bytes(), &JsonLimits::CONTROL).map_err(|e| e.kind)
    }

    #[test]
    fn the_short_path_agrees_with_the_tie_check_below_16_digits() {
        // Values with 1 to 15 significant digits at many scales, and random bit patterns.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut checked = 0;
        for _ in 0..200_000 {
            let bits = next();
            let digits = (bits % 15) as u32 + 1;
            let exponent = ((bits >> 8) % 80) as i32 - 40;
            let mantissa = (next() % 10u64.pow(digits)) as f64;
            for value in [mantissa * 10f64.powi(exponent), f64::from_bits(next())] {
                if !value.is_finite() {
                    continue;
                }
                let shortest = format!("{value:e}");
                let mantissa = shortest.split('e').next().unwrap_or_default();
                let count = mantissa.bytes().filter(u8::is_ascii_digit).count();
                if count <= 15 && (value.is_normal() || value == 0.0) {
                    let checked_way = nearest_of_length(value, shortest.clone(), count);
                    assert_eq!(shortest, checked_way, "{value:?}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 100_000, "{checked}");
    }

    #[test]
    fn float_repr_matches_python() {
        let cases = [
            (0.25, "0.25"),
            (20000.0, "20000.0"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (1e-5, "1e-05"),
            (1e-6, "1e-06"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1.2345678901234568e17, "1.2345678901234568e+17"),
            (5e-324, "5e-324"),
            (0.1 + 0.2, "0.30000000000000004"),
            (0.0001, "0.0001"),
            (123456789.125, "123456789.125"),
            (1.5e300, "1.5e+300"),
            (-2.5e-7, "-2.5e-07"),
            (f64::MAX, "1.7976931348623157e+308"),
            (9999999999999998.0, "9999999999999998.0"),
            // An exact tie between two shortest candidates: Python picks the even digit.
            (931_877_235_453_057.0 + 0.25, "931877235453057.2"),
        ];
        for (value, expected) in cases {
            assert_eq!(python_float_repr(value), expected, "{value:e}");
        }
    }

    #[test]
    fn ints_and_floats_stay_distinct() {
        assert_eq!(parse("3").unwrap(), Value::Int(3));
        assert_eq!(parse("3.0").unwrap(), Value::Float(3.0));
        assert_eq!(parse("-0").unwrap(), Value::Int(0));
        assert_eq!(parse("1E2").unwrap(), Value::Float(100.0));
        assert_eq!(
            parse("18446744073709551615").unwrap(),
            Value::Int(u64::MAX as i128)
        );
        assert_eq!(
            parse("-9223372036854775808").unwrap(),
            Value::Int(i64::MIN as i128)
        );
        assert_eq!(parse("18446744073709551616").unwrap(), Value::Int(1 << 64));
        assert_eq!(parse("-9223372036854775809").unwrap().as_i64(), None);
        assert_eq!(parse("18446744073709551616").unwrap().as_u64(), None);
        assert_eq!(to_compact(&parse("[1,1.0,-0.0]").unwrap()), "[1,1.0,-0.0]");
    }

    #[test]
    fn integers_of_any_size_are_kept_digit_for_digit() {
        // 2**70 as Python writes it, and values just past i128 on both sides.
        for text in [
            "1180591620717411303424",
            "170141183460469231731687303715884105727",
            "170141183460469231731687303715884105728",
            "-170141183460469231731687303715884105729",
            "123456789012345678901234567890123456789012345678901234567890",
        ] {
            let value = parse(text).unwrap();
            assert_eq!(to_compact(&value), text);
            assert_eq!(value.type_name(), "an integer");
            assert_eq!(value.as_u64(), None);
        }
        assert!(matches!(
            parse("170141183460469231731687303715884105728"),
            Ok(Value::BigInt(_))
        ));
        assert_eq!(parse("1180591620717411303424"), Ok(Value::Int(1 << 70)));
        let long = "9".repeat(MAX_INTEGER_DIGITS);
        assert_eq!(to_compact(&parse(&long).unwrap()), long);
        assert_eq!(
            to_compact(&parse(&format!("-{long}")).unwrap()),
            format!("-{long}")
        );
        assert!(matches!(
            parse(&format!("{long}9")),
            Err(JsonErrorKind::IntegerTooLong(_))
        ));
        let o = parse(r#"{"n":18446744073709551616}"#).unwrap();
        assert!(matches!(
            o.as_object().unwrap().req_u64("n"),
            Err(AccessError::WrongType { .. })
        ));
        assert_eq!(Value::integer("007"), None);
        assert_eq!(Value::integer("-"), None);
        assert_eq!(Value::integer("1e3"), None);
    }

    #[test]
    fn refuses_each_json_rule() {
        assert!(
            matches!(parse(r#"{"a":1,"a":2}"#), Err(JsonErrorKind::DuplicateKey(k)) if k == "a")
        );
        assert!(matches!(
            parse(r#"{"x":{"b":1,"b":1}}"#),
            Err(JsonErrorKind::DuplicateKey(_))
        ));
        for bad in ["NaN", "Infinity", "-Infinity", "1e999", "-1e400"] {
            assert!(
                matches!(parse(&format!("[{bad}]")), Err(JsonErrorKind::NonFinite(_))),
                "{bad}"
            );
        }
        for bad in ["01", "1.", ".5", "+1", "1e", "-", "0x10", "1.e5"] {
            assert!(parse(&format!("[{bad}]")).is_err(), "{bad}");
        }
        assert_eq!(parse("[1] x"), Err(JsonErrorKind::TrailingCharacters));
        assert_eq!(parse("\"a\u{1}\""), Err(JsonErrorKind::ControlCharacter));
        assert_eq!(parse(r#""\ud800""#), Err(JsonErrorKind::LoneSurrogate));
        assert_eq!(parse(r#""\udc00""#), Err(JsonErrorKind::LoneSurrogate));
        assert_eq!(parse(r#""\x""#), Err(JsonErrorKind::BadEscape));
        assert!(matches!(parse("[1,]"), Err(JsonErrorKind::Unexpected(']'))));
        assert!(matches!(
            parse("{\"a\" 1}"),
            Err(JsonErrorKind::Unexpected('1'))
        ));
        assert_eq!(parse("[1"), Err(JsonErrorKind::UnexpectedEnd));
        assert_eq!(
            parse_value(b"\"\xff\"", &JsonLimits::CONTROL)
                .unwrap_err()
                .kind,
            JsonErrorKind::NotUtf8
        );
        assert_eq!(
            parse_object(b"[]", &JsonLimits::CONTROL).unwrap_err().kind,
            JsonErrorKind::NotAnObject
        );
    }

    #[test]
    fn escapes_decode() {
        assert_eq!(
            parse(r#""\u00e9\ud83d\ude00\/\b\f\n\r\t\"\\""#).unwrap(),
            Value::String("é😀/\u{8}\u{c}\n\r\t\"\\".into())
        );
    }

    #[test]
    fn limits_apply_before_allocation() {
        let limits = JsonLimits {
            max_bytes: 100,
            max_depth: 3,
            max_nodes: 5,
        };
        // Depth counts scalars: the 1 in [[[1]]] is at depth 4.
        assert_eq!(
            parse_value(b"[[[1]]]", &limits).unwrap_err().kind,
            JsonErrorKind::TooDeep { limit: 3 }
        );
        assert!(parse_value(b"[[1]]", &limits).is_ok());
        assert!(parse_value(b"[[[]]]", &limits).is_ok());
        assert_eq!(
            parse_value(b"{\"a\":{\"b\":{\"c\":null}}}", &limits)
                .unwrap_err()
                .kind,
            JsonErrorKind::TooDeep { limit: 3 }
        );
        // Nodes are values, not keys: {"a":1,"b":2,"c":3} is 4 values.
        assert_eq!(
            parse_value(b"[1,2,3,4,5]", &limits).unwrap_err().kind,
            JsonErrorKind::TooManyNodes { limit: 5 }
        );
        assert!(parse_value(b"[1,2,3,4]", &limits).is_ok());
        assert!(parse_value(b"{\"a\":1,\"b\":2,\"c\":3,\"d\":4}", &limits).is_ok());
        let big = vec![b' '; 101];
        assert!(matches!(
            parse_value(&big, &limits).unwrap_err().kind,
            JsonErrorKind::TooLarge { .. }
        ));
        // 10,000-deep nesting is refused quickly, without recursion past the limit.
        let nested = "[".repeat(10_000) + &"]".repeat(10_000);
        assert!(matches!(
            parse(&nested),
            Err(JsonErrorKind::TooDeep { limit: 128 })
        ));
    }

    /// An object written member by member is the text of the same object written whole.
    #[test]
    fn a_pretty_object_written_member_by_member_is_the_whole_one() {
        let inner = parse(r#"{"x":[1,{"y":{}}],"z":[]}"#).unwrap();
        let Value::Object(inner_object) = inner.clone() else {
            panic!("not an object")
        };
        let mut whole = Object::new();
        whole.insert("a".into(), Value::Object(Object::new()));
        whole.insert("b".into(), inner.clone());
        whole.insert("c".into(), Value::Object(inner_object.clone()));
        whole.insert("d".into(), Value::from("é"));
        let mut out = String::new();
        let mut doc = PrettyObject::open(&mut out, 0);
        doc.nested("a").close();
        let mut b = doc.nested("b");
        for (key, value) in inner_object.iter() {
            b.member(key, value);
        }
        b.close();
        doc.object("c", &inner_object);
        doc.member("d", &Value::from("é"));
        doc.close();
        out.push('\n');
        assert_eq!(out, object_to_pretty(&whole));
        let mut empty = String::new();
        PrettyObject::open(&mut empty, 0).close();
        assert_eq!(empty, "{}");
    }

    #[test]
    fn writes_python_layouts() {
        let doc = parse(r#"{"b":[1,{"z":[],"y":{}}],"a":"é\u0001\u007f\u2028","c":null}"#).unwrap();
        assert_eq!(
            to_compact(&doc),
            "{\"a\":\"é\\u0001\u{7f}\u{2028}\",\"b\":[1,{\"y\":{},\"z\":[]}],\"c\":null}"
        );
        assert_eq!(
            to_pretty(&doc),
            "{\n  \"a\": \"é\\u0001\u{7f}\u{2028}\",\n  \"b\": [\n    1,\n    {\n      \"y\": {},\n      \"z\": []\n    }\n  ],\n  \"c\": null\n}\n"
        );
        assert_eq!(to_pretty(&Value::Object(Object::new())), "{}\n");
    }

    #[test]
    fn typed_access_is_strict() {
        let Value::Object(o) =
            parse(r#"{"n":3,"f":3.0,"b":true,"s":"3","neg":-1,"z":null}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(o.req_u64("n"), Ok(3));
        for key in ["f", "b", "s", "neg", "z"] {
            assert!(
                matches!(o.req_u64(key), Err(AccessError::WrongType { .. })),
                "{key}"
            );
        }
        assert_eq!(
            o.req_u64("missing"),
            Err(AccessError::Missing("missing".into()))
        );
        assert_eq!(o.opt_str("z"), Ok(None));
        assert_eq!(o.opt_str("s"), Ok(Some("3")));
        assert!(o.only_keys(&["n", "f", "b", "s", "neg"]).is_err());
    }
}

/// An upper bound on the values a JSON text holds, from one scan without parsing: one, plus
/// one for every comma, colon and opening bracket outside strings. Lets a caller price a parse
/// before committing the memory it takes.
pub fn values_at_most(text: &[u8]) -> u64 {
    structure_at_most(text).values
}

/// The most heap memory parsing `text` into a [`Value`] takes, its strings included, found by
/// one scan without parsing:
/// - every object member a slot of 64 bytes and every array item one of 32 (objects and
///   arrays are vectors holding exactly their members once parsed);
/// - while they are being filled, the open containers' slots again, twice (a growing vector
///   has up to twice its members' slots, and its last trim copies them once more): the most
///   the scan finds open at one time;
/// - every string value its text's length (escapes only shorten it) and keys longer than the
///   24 bytes a key keeps inline the same;
/// - [`ALLOCATION`] bytes for every allocation (non-empty container, string) besides.
///
/// A manifest page of 100,000 shard entries (300,000 objects of four keys) prices at about
/// 120 MB for its 40 MB of text; a record row of 2,000 fields at about 2.6 MB for 0.56 MB.
pub fn parse_bytes_at_most(text: &[u8]) -> u64 {
    let found = structure_at_most(text);
    found
        .slot_bytes
        .saturating_add(found.open_slot_bytes_peak.saturating_mul(2))
        .saturating_add(found.string_bytes)
        .saturating_add(found.allocations.saturating_mul(ALLOCATION))
}

/// What one allocation costs beyond its bytes, at most: glibc's chunk header and rounding up to
/// 16 bytes, 32 bytes for the smallest.
pub const ALLOCATION: u64 = 32;

/// What one scan of a JSON text finds outside strings, each an upper bound.
#[derive(Default)]
struct Structure {
    values: u64,
    /// The slots of every container once parsed.
    slot_bytes: u64,
    /// The most slots open containers hold at one time.
    open_slot_bytes_peak: u64,
    /// String values' text and long keys' text.
    string_bytes: u64,
    allocations: u64,
}

/// A container the scan is inside.
struct Open {
    /// Bytes of one slot: a member's for objects, an item's for arrays.
    slot: u64,
    slots: u64,
    /// The next token starts an item (arrays) or a key (objects).
    expecting: bool,
}

/// A string the scan is inside.
struct InString {
    escaped: bool,
    bytes: u64,
    is_key: bool,
}

const MEMBER_SLOT: u64 = std::mem::size_of::<(CompactString, Value)>() as u64;
const ITEM_SLOT: u64 = std::mem::size_of::<Value>() as u64;
/// The longest key a [`CompactString`] keeps without allocating.
const INLINE_KEY: u64 = 24;

fn structure_at_most(text: &[u8]) -> Structure {
    let mut found = Structure {
        values: 1,
        ..Structure::default()
    };
    let mut string: Option<InString> = None;
    // The open containers, as deep as the text nests, and their slots together.
    let mut open: Vec<Open> = Vec::new();
    let mut open_slot_bytes = 0u64;
    for &byte in text {
        if let Some(inside) = string.as_mut() {
            match (inside.escaped, byte) {
                (true, _) => inside.escaped = false,
                (false, b'\\') => inside.escaped = true,
                (false, b'"') => {
                    if !inside.is_key || inside.bytes > INLINE_KEY {
                        found.string_bytes += inside.bytes;
                        found.allocations += 1;
                    }
                    string = None;
                    continue;
                }
                _ => {}
            }
            if let Some(inside) = string.as_mut() {
                inside.bytes += 1;
            }
            continue;
        }
        if byte.is_ascii_whitespace() {
            continue;
        }
        let mut is_key = false;
        if let Some(top) = open.last_mut() {
            let closes = matches!(byte, b']' | b'}');
            if top.expecting && !closes {
                top.expecting = false;
                if top.slot == ITEM_SLOT {
                    top.slots += 1;
                    open_slot_bytes += ITEM_SLOT;
                } else {
                    is_key = true;
                }
            }
        }
        match byte {
            b'"' => {
                string = Some(InString {
                    escaped: false,
                    bytes: 0,
                    is_key,
                })
            }
            b'{' | b'[' => open.push(Open {
                slot: if byte == b'{' { MEMBER_SLOT } else { ITEM_SLOT },
                slots: 0,
                expecting: true,
            }),
            b':' => {
                if let Some(top) = open.last_mut() {
                    top.slots += 1;
                    open_slot_bytes += top.slot;
                }
            }
            b',' => {
                if let Some(top) = open.last_mut() {
                    top.expecting = true;
                }
            }
            b'}' | b']' => {
                if let Some(closed) = open.pop() {
                    let bytes = closed.slots * closed.slot;
                    found.open_slot_bytes_peak = found.open_slot_bytes_peak.max(open_slot_bytes);
                    open_slot_bytes -= bytes;
                    found.slot_bytes += bytes;
                    found.allocations += u64::from(closed.slots > 0);
                }
            }
            _ => {}
        }
        if matches!(byte, b',' | b':' | b'[' | b'{') {
            found.values += 1;
        }
    }
    found.open_slot_bytes_peak = found.open_slot_bytes_peak.max(open_slot_bytes);
    found
}

#[cfg(test)]
mod value_bound_tests {
    use super::{parse_bytes_at_most, values_at_most};

    #[test]
    fn the_bound_counts_values_outside_strings_only() {
        assert_eq!(values_at_most(b"7"), 1);
        assert_eq!(values_at_most(b"[1,2,3]"), 4);
        assert_eq!(values_at_most(br#"{"a":[1,{"b":2}]}"#), 7);
        // Separators inside strings, escaped quotes included, are not values.
        assert_eq!(values_at_most(br#"["x,y:[{", "q\",\\"]"#), 3);
    }

    #[test]
    fn the_parse_bound_prices_slots_strings_and_allocations() {
        use super::{ALLOCATION as A, ITEM_SLOT as I, MEMBER_SLOT as M};
        assert_eq!((M, I), (64, 32));
        // Two objects of one member each; the outer is open with the inner: 2 slots at most.
        assert_eq!(
            parse_bytes_at_most(br#"{"a":{"b":1}}"#),
            2 * M + 2 * 2 * M + 2 * A
        );
        // Strings: values their text, short keys nothing, a 25-byte key its text; brackets,
        // colons and commas inside strings are nothing.
        let long_key = "k".repeat(25);
        let text = format!(r#"{{"{long_key}":"x{{:,]","b":["yz", 1 ,true]}}"#);
        assert_eq!(
            parse_bytes_at_most(text.as_bytes()),
            // slots: 2 members + 3 items; open at most both containers; strings 25 + 5 + 2;
            // allocations: 2 containers and 3 strings.
            (2 * M + 3 * I) + 2 * (2 * M + 3 * I) + (25 + 5 + 2) + 5 * A
        );
        // Empty containers allocate nothing.
        assert_eq!(parse_bytes_at_most(b"[{},[]]"), 2 * I + 2 * 2 * I + A);
    }

    /// The bound holds for what a parse really allocates (counted by the test build's
    /// allocator, [`crate::testing`]), over documents of many small objects, long strings and
    /// deep nesting, and for small objects it is within half again of it.
    #[test]
    fn the_parse_bound_is_above_what_a_parse_takes() {
        use super::{parse_value, JsonLimits};
        let page = format!(
            r#"{{"shards":[{}]}}"#,
            (0..2_000)
                .map(|i| format!(
                    r#"{{"data":{{"path":"objects/data/{i:064}","sha256":"{i:064}","stored_bytes":{i}}},"first_ordinal":{i},"record_count":1}}"#
                ))
                .collect::<Vec<_>>()
                .join(",")
        );
        let escaped = format!(r#"["{}"]"#, "\\u00e9\\n".repeat(10_000));
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let limits = JsonLimits::default();
        for (text, tight) in [(page, true), (escaped, false), (deep, false)] {
            let before = crate::testing::allocated_now();
            crate::testing::reset_peak();
            let parsed = parse_value(text.as_bytes(), &limits).unwrap();
            let peak = crate::testing::peak_allocated() - before;
            drop(parsed);
            let bound = parse_bytes_at_most(text.as_bytes());
            assert!(peak <= bound, "took {peak} bytes, priced {bound}");
            // And close to it where the slots dominate, so what fits is served.
            assert!(
                !tight || bound <= peak / 2 * 3,
                "took {peak}, priced {bound}"
            );
        }
    }
}
