//! Objects read one member at a time: where each member's value sits in the text, found
//! without building it, and each value parsed when asked.
//!
//! Why: a metadata row of thousands of fields parses into a tree of values several times the
//! size of its text, and the typed model made from that tree is larger still. A reader that
//! only needs one field at a time keeps the text and the places of its members, and parses a
//! member when it is asked for, so what it holds grows with the text and not with its parse.
//!
//! Locating a member's value skips it by its brackets and strings (strings are read through
//! their escapes, so a `}` inside one is not a bracket) and checks nothing else inside it; the
//! content is checked when the value is parsed ([`ObjectText::parse`]), with the full rules and
//! at the depth the value has in the document. A text is therefore valid JSON when its members
//! are located without error and every value parses: every byte is either checked by the
//! locating pass (whitespace, keys, `:`, `,`, braces) or lies inside one parsed value.

use std::ops::Range;

use super::{CompactString, JsonError, JsonErrorKind, JsonLimits, Parser, Text, Value, INLINE_KEY};

/// One member of an object: its key, where the key starts and the span of its value's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub key: CompactString,
    pub key_at: usize,
    pub value: Range<usize>,
}

/// A JSON document (its size and encoding checked) whose objects are read member by member.
#[derive(Clone, Copy)]
pub struct ObjectText<'a> {
    text: &'a str,
    limits: JsonLimits,
}

/// A key read only to be skipped: nothing is kept.
#[derive(Default)]
struct Skipped;

impl Text for Skipped {
    fn push_str(&mut self, _: &str) {}
    fn push(&mut self, _: char) {}
}

impl<'a> ObjectText<'a> {
    /// `text` under `limits`: refused when larger than the limit or not UTF-8.
    pub fn new(text: &'a [u8], limits: &JsonLimits) -> Result<ObjectText<'a>, JsonError> {
        super::check_document(text, limits)?;
        let text = std::str::from_utf8(text).unwrap_or_default();
        Ok(ObjectText::of_str(text, limits))
    }

    /// A text known to be UTF-8 and within its size limit (one [`ObjectText::new`] checked,
    /// kept as a `str`): nothing is checked again, so parsing one member of a large text costs
    /// that member only.
    pub fn of_str(text: &'a str, limits: &JsonLimits) -> ObjectText<'a> {
        ObjectText {
            text,
            limits: *limits,
        }
    }

    /// The text, checked.
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// The whole document's span.
    pub fn whole(&self) -> Range<usize> {
        0..self.text.len()
    }

    /// The text of `span`.
    pub fn slice(&self, span: &Range<usize>) -> &'a [u8] {
        self.text.as_bytes().get(span.clone()).unwrap_or_default()
    }

    /// How many members the object at `span` has (whitespace around it allowed): counted
    /// without allocating, so a caller can refuse or charge before [`ObjectText::members`].
    pub fn member_count(&self, span: Range<usize>) -> Result<usize, JsonError> {
        let mut count = 0usize;
        self.walk::<Skipped>(span, &mut |_, _, _| count += 1)?;
        Ok(count)
    }

    /// The members of the object at `span` in document order, each value's span exact (no
    /// whitespace around it). Keys are checked and unescaped; values are not parsed.
    pub fn members(&self, span: Range<usize>) -> Result<Vec<Member>, JsonError> {
        let mut members = Vec::with_capacity(self.member_count(span.clone())?);
        self.walk::<CompactString>(span, &mut |key, key_at, value| {
            members.push(Member { key, key_at, value })
        })?;
        Ok(members)
    }

    /// Parses the value at `span` (a member's, as [`ObjectText::members`] found it) as a value
    /// at `depth` in its document; returns it and the values it counted (the document's
    /// node limit is the caller's to sum).
    pub fn parse(&self, span: Range<usize>, depth: usize) -> Result<(Value, usize), JsonError> {
        let mut parser = self.parser_over(&span);
        let value = parser.value(depth)?;
        if parser.pos != span.end {
            return Err(parser.error(JsonErrorKind::TrailingCharacters));
        }
        Ok((value, parser.nodes))
    }

    fn parser_over(&self, span: &Range<usize>) -> Parser<'_> {
        let end = span.end.min(self.text.len());
        Parser {
            input: self.text.as_bytes().get(..end).unwrap_or_default(),
            pos: span.start.min(end),
            nodes: 0,
            limits: &self.limits,
        }
    }

    /// Where the object at `span` opens (after any whitespace).
    pub fn object_at(&self, span: &Range<usize>) -> usize {
        let mut parser = self.parser_over(span);
        parser.skip_whitespace();
        parser.pos
    }

    /// Walks the object at `span`, calling `found` with each member's key (read as `K`), the
    /// key's offset and its value's span.
    fn walk<K: Text>(
        &self,
        span: Range<usize>,
        found: &mut dyn FnMut(K, usize, Range<usize>),
    ) -> Result<(), JsonError> {
        let mut parser = self.parser_over(&span);
        parser.skip_whitespace();
        if parser.peek() != Some(b'{') {
            return Err(parser.error(JsonErrorKind::NotAnObject));
        }
        parser.pos += 1;
        parser.skip_whitespace();
        if parser.peek() == Some(b'}') {
            parser.pos += 1;
        } else {
            loop {
                parser.skip_whitespace();
                if parser.peek() != Some(b'"') {
                    return Err(parser.unexpected());
                }
                let key_at = parser.pos;
                let key: K = parser.string()?;
                parser.skip_whitespace();
                parser.expect_byte(b':')?;
                parser.skip_whitespace();
                let start = parser.pos;
                parser.skip_value()?;
                found(key, key_at, start..parser.pos);
                parser.skip_whitespace();
                match parser.peek() {
                    Some(b',') => parser.pos += 1,
                    Some(b'}') => {
                        parser.pos += 1;
                        break;
                    }
                    _ => return Err(parser.unexpected()),
                }
            }
        }
        parser.skip_whitespace();
        if parser.pos != parser.input.len() {
            return Err(parser.error(JsonErrorKind::TrailingCharacters));
        }
        Ok(())
    }
}

/// An upper bound on what [`ObjectText::members`] holds for the objects nested at most `depth`
/// deep in `text` (the top-level value is depth 1), from one scan: a [`Member`] for each of
/// their colons outside strings, and the heap of each key too long to be kept inline (its
/// text's length: escapes only shorten it).
pub fn member_bytes_at_most(text: &[u8], depth: usize) -> u64 {
    let member = std::mem::size_of::<Member>() as u64;
    let (mut open, mut bytes) = (0usize, 0u64);
    let (mut in_string, mut escaped, mut length) = (false, false, 0usize);
    // The length of the string just closed, while only whitespace follows it.
    let mut last_string: Option<usize> = None;
    for &byte in text {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => {
                    in_string = false;
                    last_string = Some(length);
                    continue;
                }
                _ => {}
            }
            length += 1;
            continue;
        }
        if byte.is_ascii_whitespace() {
            continue;
        }
        match byte {
            b'"' => (in_string, length) = (true, 0),
            b'{' | b'[' => open += 1,
            b'}' | b']' => open = open.saturating_sub(1),
            b':' if open <= depth => {
                let key = last_string.filter(|&len| len > INLINE_KEY as usize);
                bytes += member + key.map_or(0, super::text_heap_bytes);
            }
            _ => {}
        }
        last_string = None;
    }
    bytes
}

impl Parser<'_> {
    /// Moves past one value by its structure alone: containers by their brackets, strings
    /// through their escapes, scalars up to the next delimiter. Its content is checked when
    /// it is parsed.
    fn skip_value(&mut self) -> Result<(), JsonError> {
        match self.peek() {
            None => Err(self.error(JsonErrorKind::UnexpectedEnd)),
            Some(b'"') => self.skip_string(),
            Some(b'{' | b'[') => self.skip_container(),
            Some(_) => {
                let start = self.pos;
                while let Some(b) = self.peek() {
                    if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    self.pos += 1;
                }
                match self.pos > start {
                    true => Ok(()),
                    false => Err(self.unexpected()),
                }
            }
        }
    }

    /// Moves past the string opening here, to just after its closing quote: an escape's
    /// backslash takes the byte after it along (its content is checked when it is parsed).
    fn skip_string(&mut self) -> Result<(), JsonError> {
        let rest = self.input.get(self.pos + 1..).unwrap_or_default();
        let mut at = 0;
        while let Some(&byte) = rest.get(at) {
            match byte {
                b'"' => {
                    self.pos += at + 2;
                    return Ok(());
                }
                b'\\' => at += 2,
                _ => at += 1,
            }
        }
        self.pos = self.input.len();
        Err(self.error(JsonErrorKind::UnexpectedEnd))
    }

    /// Moves past the container opening here, to just after the bracket that closes it.
    fn skip_container(&mut self) -> Result<(), JsonError> {
        let mut open = 0usize;
        loop {
            match self.peek() {
                None => return Err(self.error(JsonErrorKind::UnexpectedEnd)),
                Some(b'"') => {
                    self.skip_string()?;
                    continue;
                }
                Some(b'{' | b'[') => {
                    open += 1;
                    if open > self.limits.max_depth {
                        let limit = self.limits.max_depth;
                        return Err(self.error(JsonErrorKind::TooDeep { limit }));
                    }
                }
                Some(b'}' | b']') => open -= 1,
                Some(_) => {}
            }
            self.pos += 1;
            if open == 0 {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::json::parse_value;

    const LIMITS: JsonLimits = JsonLimits {
        max_bytes: 1 << 20,
        max_depth: 8,
        max_nodes: 1000,
    };

    fn members(text: &str) -> Result<Vec<(String, String)>, JsonErrorKind> {
        let doc = ObjectText::new(text.as_bytes(), &LIMITS).map_err(|e| e.kind)?;
        let found = doc.members(doc.whole()).map_err(|e| e.kind)?;
        Ok(found
            .into_iter()
            .map(|m| (m.key.to_string(), text[m.value].to_string()))
            .collect())
    }

    #[test]
    fn members_are_found_with_their_values_exact() {
        let text = r#" { "a" : [1, {"}": "]"}] , "b\u0022":"x\"}" ,"c":-1.5e3,"d":{} } "#;
        let found = members(text).unwrap();
        let expected = [
            ("a", r#"[1, {"}": "]"}]"#),
            ("b\"", r#""x\"}""#),
            ("c", "-1.5e3"),
            ("d", "{}"),
        ];
        assert_eq!(found.len(), expected.len());
        for ((key, value), (want_key, want_value)) in found.iter().zip(expected) {
            assert_eq!((key.as_str(), value.as_str()), (want_key, want_value));
        }
        assert_eq!(members("{}").unwrap(), vec![]);
        let member = std::mem::size_of::<Member>() as u64;
        assert_eq!(member_bytes_at_most(text.as_bytes(), 1), 4 * member);
        // And the member inside the array.
        assert_eq!(member_bytes_at_most(text.as_bytes(), 3), 5 * member);
        let long = format!(r#"{{"{}":1,"b":"{}"}}"#, "k".repeat(40), "v".repeat(40));
        let with_long_key = member_bytes_at_most(long.as_bytes(), 1);
        assert_eq!(
            with_long_key,
            2 * member + super::super::text_heap_bytes(40)
        );
    }

    #[test]
    fn each_value_parses_as_the_whole_document_would() {
        let text = r#"{"a":[1,{"b":2.5}],"c":"é","d":null}"#;
        let doc = ObjectText::new(text.as_bytes(), &LIMITS).unwrap();
        let Value::Object(whole) = parse_value(text.as_bytes(), &LIMITS).unwrap() else {
            panic!("not an object");
        };
        let mut nodes = 1;
        for member in doc.members(doc.whole()).unwrap() {
            let (value, counted) = doc.parse(member.value, 2).unwrap();
            assert_eq!(Some(&value), whole.get(&member.key));
            nodes += counted;
        }
        assert_eq!(
            nodes, 7,
            "the document's values: the object and six inside it"
        );
    }

    /// What locating lets through, parsing refuses, each at its own byte: together they refuse
    /// what a whole parse refuses.
    #[test]
    fn bad_documents_are_refused_by_locating_or_by_parsing() {
        let located_but_bad = [
            r#"{"a":[1,,2]}"#,
            r#"{"a":[}"#,
            r#"{"a":{"k":1,"k":2}}"#,
            r#"{"a":tru}"#,
            r#"{"a":NaN}"#,
            r#"{"a":01}"#,
        ];
        for text in located_but_bad {
            assert!(parse_value(text.as_bytes(), &LIMITS).is_err(), "{text}");
            let doc = ObjectText::new(text.as_bytes(), &LIMITS).unwrap();
            let parsed: Result<Vec<_>, _> = match doc.members(doc.whole()) {
                Ok(found) => found.into_iter().map(|m| doc.parse(m.value, 2)).collect(),
                Err(e) => Err(e),
            };
            assert!(parsed.is_err(), "{text}");
        }
        let not_located = [
            ("[1]", JsonErrorKind::NotAnObject),
            (r#"{"a" 1}"#, JsonErrorKind::Unexpected('1')),
            (r#"{"a":1,}"#, JsonErrorKind::Unexpected('}')),
            (r#"{"a":1} x"#, JsonErrorKind::TrailingCharacters),
            (r#"{"a":"x}"#, JsonErrorKind::UnexpectedEnd),
            (r#"{"a":}"#, JsonErrorKind::Unexpected('}')),
            (
                r#"{"a":[[[[[[[[[[1]]]]]]]]]]}"#,
                JsonErrorKind::TooDeep { limit: 8 },
            ),
        ];
        for (text, kind) in not_located {
            assert_eq!(members(text), Err(kind), "{text}");
        }
    }
}
