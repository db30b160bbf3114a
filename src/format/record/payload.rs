//! SafeTensors framing: encoding a record, and reading a payload's layout without its tensors.
//!
//! Writing produces the payload as pieces ([`EncodedPayload`]): the length prefix and header,
//! made here, then every tensor's bytes borrowed from the record, so a writer can stream a
//! record of gigabytes without copying it. The header is what the `safetensors` crate's
//! `serialize` (which the Python library calls) writes: tensors sorted by the crate's `Dtype`
//! order, descending, then by key; compact JSON with `dtype`, `shape`, `data_offsets` in that
//! order; spaces padding it to a multiple of 8. A unit test holds the two byte for byte. Every
//! limit is checked before anything is allocated from the record's sizes.
//!
//! Reading is our own, because a mount must learn where every field's bytes are from the first
//! few kilobytes of a payload that may be gigabytes long, and because the profile's rules are
//! stricter than the crate's (duplicate keys, exact entry keys, limits before allocation). The
//! reader accepts what the SafeTensors format allows: any header length (aligned or not), JSON
//! whitespace anywhere in the header, tensors in any header order, zero-length tensors.
//!
//! The descriptor is a tensor in the *data* buffer, not in the header; since `U8` sorts after
//! every wider dtype it usually sits near the end. Hence the two steps: [`parse_header`] gives
//! every tensor's absolute byte range, then [`RecordLayout::from_parts`] joins the header with the
//! descriptor bytes read from [`PayloadHeader::descriptor_range`]. [`parse_layout`] does both when
//! the caller already holds the bytes up to the descriptor's end.
//!
//! Limit decision: the SafeTensors header JSON is held to `max_descriptor_bytes`, like the
//! descriptor. The header holds one short entry per tensor, so it is far smaller than that bound
//! for any record within the field-count limit, and no separate knob is needed.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use bytes::Bytes;
use safetensors::tensor::Dtype as StDtype;

use super::error::{limit, rule, RecordError};
use super::json_form::{
    descriptor_from_object, descriptor_value, tensor_key, Descriptor, RECORD_FORMAT,
    SUPPORTED_RECORD_VERSIONS,
};
use super::model::{Field, FieldMeta, Record, RecordMeta};
use super::validate::{check_json_extent, field_bytes, validate_for_write, validate_read};
use crate::format::dtype::DType;
use crate::format::json::{parse_object, to_compact, JsonLimits, Object, ObjectExt, Value};
use crate::format::limits::RecordLimits;

/// The SafeTensors key of the descriptor tensor.
pub const DESCRIPTOR_TENSOR: &str = "__sds_descriptor__";
/// Bytes of the little-endian header-length prefix.
pub const LENGTH_PREFIX_BYTES: u64 = 8;

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

fn to_usize(n: u64) -> Result<usize, RecordError> {
    usize::try_from(n).map_err(|_| RecordError::Limit {
        limit: limit::ENCODED_RECORD_BYTES,
        value: n,
        max: to_u64(usize::MAX),
    })
}

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// One tensor of a payload being written: where its bytes come from, and its header entry.
struct TensorRef<'a> {
    key: String,
    dtype: DType,
    shape: Vec<u64>,
    bytes: Piece<'a>,
}

/// Where a tensor's bytes are: the record's field, or the descriptor the encoder made.
#[derive(Debug, Clone, Copy)]
enum Piece<'a> {
    Field(&'a [u8]),
    Descriptor,
}

/// The crate's `Dtype`, whose declaration order is the layout order every SafeTensors writer
/// (the Python library's included) uses: tensors sort by that order, descending, then by key.
fn safetensors_dtype(dtype: DType) -> StDtype {
    match dtype {
        DType::Bool => StDtype::BOOL,
        DType::U8 => StDtype::U8,
        DType::U16 => StDtype::U16,
        DType::U32 => StDtype::U32,
        DType::U64 => StDtype::U64,
        DType::I8 => StDtype::I8,
        DType::I16 => StDtype::I16,
        DType::I32 => StDtype::I32,
        DType::I64 => StDtype::I64,
        DType::F16 => StDtype::F16,
        DType::F32 => StDtype::F32,
        DType::F64 => StDtype::F64,
        DType::C64 => StDtype::C64,
    }
}

/// A record's payload as the pieces it is made of, in payload order: the length prefix with
/// the header, then every tensor's bytes, borrowed from the record. A writer streams the
/// pieces, so encoding a record of gigabytes copies none of its tensor bytes.
#[derive(Debug)]
pub struct EncodedPayload<'a> {
    /// The length prefix and the header, padded.
    head: Vec<u8>,
    descriptor: Vec<u8>,
    tensors: Vec<Piece<'a>>,
    len: u64,
}

impl EncodedPayload<'_> {
    /// The payload's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the payload is empty (never: the header is always there).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pieces, in order; their concatenation is the payload.
    pub fn pieces(&self) -> Vec<&[u8]> {
        let tensors = self.tensors.iter().map(|piece| match piece {
            Piece::Field(bytes) => *bytes,
            Piece::Descriptor => self.descriptor.as_slice(),
        });
        std::iter::once(self.head.as_slice())
            .chain(tensors)
            .collect()
    }

    /// The payload in one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        self.pieces().concat()
    }
}

/// Encodes `record` as one SafeTensors payload after checking every rule and limit.
pub fn encode(record: &Record, limits: &RecordLimits) -> Result<Vec<u8>, RecordError> {
    encode_pieces(record, limits).map(|(payload, _)| payload.to_vec())
}

/// [`encode`] as pieces that borrow the record's tensor bytes, also returning the record's
/// metadata (`record.meta()`, which encoding builds anyway) for a writer that needs it next,
/// e.g. for the metadata row.
pub fn encode_pieces<'a>(
    record: &'a Record,
    limits: &RecordLimits,
) -> Result<(EncodedPayload<'a>, RecordMeta), RecordError> {
    let meta = record.meta();
    validate_for_write(&meta, limits)?;
    for (name, field) in &record.fields {
        field.check_data_length(name)?;
    }
    let descriptor = descriptor_json(&meta, limits)?.into_bytes();
    let mut tensors = tensor_refs(record, to_u64(descriptor.len()));
    tensors.sort_by(|left, right| {
        let order = safetensors_dtype(right.dtype).cmp(&safetensors_dtype(left.dtype));
        order.then_with(|| left.key.cmp(&right.key))
    });
    let piece_len = |piece: &Piece<'_>| match piece {
        Piece::Field(bytes) => to_u64(bytes.len()),
        Piece::Descriptor => to_u64(descriptor.len()),
    };
    let header = header_json(&tensors, piece_len);
    let header_len = to_u64(header.len()).next_multiple_of(LENGTH_PREFIX_BYTES);
    RecordError::check_limit(
        limit::DESCRIPTOR_BYTES,
        header_len,
        limits.max_descriptor_bytes,
    )?;
    let data_len = tensors
        .iter()
        .fold(0u64, |sum, t| sum.saturating_add(piece_len(&t.bytes)));
    let len = LENGTH_PREFIX_BYTES
        .saturating_add(header_len)
        .saturating_add(data_len);
    RecordError::check_limit(
        limit::ENCODED_RECORD_BYTES,
        len,
        limits.max_encoded_record_bytes,
    )?;
    let mut head = Vec::with_capacity(to_usize(LENGTH_PREFIX_BYTES + header_len)?);
    head.extend_from_slice(&header_len.to_le_bytes());
    head.extend_from_slice(header.as_bytes());
    // Spaces pad the header to a multiple of 8, as every SafeTensors writer does.
    head.resize(head.capacity(), b' ');
    let tensors = tensors.into_iter().map(|t| t.bytes).collect();
    let payload = EncodedPayload {
        head,
        descriptor,
        tensors,
        len,
    };
    Ok((payload, meta))
}

/// The compact descriptor JSON, refused when it breaks a JSON or size limit.
fn descriptor_json(meta: &RecordMeta, limits: &RecordLimits) -> Result<String, RecordError> {
    let value = descriptor_value(meta);
    check_json_extent(&value, limits)?;
    let text = to_compact(&value);
    let size = to_u64(text.len());
    RecordError::check_limit(limit::DESCRIPTOR_BYTES, size, limits.max_descriptor_bytes)?;
    Ok(text)
}

/// The descriptor (`descriptor_len` bytes) and one tensor per field, keyed as section 2
/// assigns.
fn tensor_refs(record: &Record, descriptor_len: u64) -> Vec<TensorRef<'_>> {
    let descriptor = TensorRef {
        key: DESCRIPTOR_TENSOR.to_string(),
        dtype: DType::U8,
        shape: vec![descriptor_len],
        bytes: Piece::Descriptor,
    };
    let fields = record
        .fields
        .values()
        .enumerate()
        .map(|(index, field)| TensorRef {
            key: tensor_key(index),
            dtype: field.meta.dtype,
            shape: field.meta.shape.clone(),
            bytes: Piece::Field(&field.data),
        });
    std::iter::once(descriptor).chain(fields).collect()
}

/// The header JSON of `tensors` (already in layout order) as SafeTensors writers write it:
/// compact, entries in layout order, keys `dtype`, `shape`, `data_offsets` in that order.
fn header_json(tensors: &[TensorRef<'_>], len: impl Fn(&Piece<'_>) -> u64) -> String {
    let mut header = String::from("{");
    let mut offset = 0u64;
    for (i, tensor) in tensors.iter().enumerate() {
        let end = offset.saturating_add(len(&tensor.bytes));
        let separator = if i == 0 { "" } else { "," };
        let shape: Vec<String> = tensor.shape.iter().map(u64::to_string).collect();
        header.push_str(&format!(
            "{separator}{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
            to_compact(&Value::from(tensor.key.as_str())),
            tensor.dtype.safetensors_name(),
            shape.join(","),
        ));
        offset = end;
    }
    header.push('}');
    header
}

// ---------------------------------------------------------------------------------------------
// Reading the header
// ---------------------------------------------------------------------------------------------

/// One tensor of a payload header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorEntry {
    pub dtype: DType,
    pub shape: Vec<u64>,
    /// Absolute byte range of the tensor's data within the payload.
    pub range: Range<u64>,
}

/// A parsed and checked SafeTensors header: every tensor's place in the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadHeader {
    /// Length of the header JSON (padding included), as the prefix states it.
    pub header_len: u64,
    /// Every tensor, the descriptor included, by SafeTensors key.
    pub tensors: BTreeMap<String, TensorEntry>,
    /// The payload's complete length: prefix, header and the whole data buffer.
    pub total_len: u64,
}

impl PayloadHeader {
    /// Where the data buffer starts.
    pub fn data_start(&self) -> u64 {
        LENGTH_PREFIX_BYTES + self.header_len
    }

    /// The absolute byte range of the descriptor JSON (present: [`parse_header`] checks).
    pub fn descriptor_range(&self) -> Range<u64> {
        self.tensors
            .get(DESCRIPTOR_TENSOR)
            .map_or(0..0, |entry| entry.range.clone())
    }
}

/// Reads the header length from the first 8 bytes and checks it against the limits, so the
/// caller can allocate that many bytes for the header safely.
pub fn header_len(first8: &[u8], limits: &RecordLimits) -> Result<u64, RecordError> {
    let prefix: [u8; 8] = first8
        .get(..8)
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or(RecordError::Truncated {
            needed: LENGTH_PREFIX_BYTES,
            available: to_u64(first8.len()),
        })?;
    let length = u64::from_le_bytes(prefix);
    RecordError::check_limit(limit::DESCRIPTOR_BYTES, length, limits.max_descriptor_bytes)?;
    let with_prefix = length.saturating_add(LENGTH_PREFIX_BYTES);
    RecordError::check_limit(
        limit::ENCODED_RECORD_BYTES,
        with_prefix,
        limits.max_encoded_record_bytes,
    )?;
    Ok(length)
}

/// Parses and checks the header; `prefix` holds at least the first `8 + header_len` bytes.
pub fn parse_header(prefix: &[u8], limits: &RecordLimits) -> Result<PayloadHeader, RecordError> {
    let header_len = header_len(prefix, limits)?;
    let header_end = LENGTH_PREFIX_BYTES + header_len;
    let header_bytes = prefix
        .get(8..to_usize(header_end)?)
        .ok_or(RecordError::Truncated {
            needed: header_end,
            available: to_u64(prefix.len()),
        })?;
    let json_limits = JsonLimits {
        max_bytes: to_usize(header_len)?,
        max_depth: limits.max_json_depth,
        max_nodes: limits.max_json_nodes,
    };
    let object = parse_object(header_bytes, &json_limits)
        .map_err(|e| RecordError::json("SafeTensors header", e))?;
    check_header_metadata(&object)?;
    let max_tensors = to_u64(limits.max_fields).saturating_add(1);
    let metadata_entries = u64::from(object.contains_key(HEADER_METADATA_KEY));
    let tensor_count = to_u64(object.len()) - metadata_entries;
    if tensor_count > max_tensors {
        let (value, max) = (tensor_count - 1, max_tensors - 1);
        return Err(RecordError::Limit {
            limit: limit::FIELDS,
            value,
            max,
        });
    }
    let relative = object
        .iter()
        .filter(|(name, _)| name.as_str() != HEADER_METADATA_KEY)
        .map(|(name, value)| Ok((name.to_string(), header_entry(name, value, limits)?)))
        .collect::<Result<BTreeMap<_, _>, RecordError>>()?;
    let data_len = check_coverage(&relative)?;
    check_header_totals(&relative, limits)?;
    finish_header(header_len, relative, data_len, limits)
}

/// The SafeTensors header key of free-form metadata, which is not a tensor.
const HEADER_METADATA_KEY: &str = "__metadata__";

/// Writers emit no `__metadata__`; readers tolerate one and ignore it, as the library does. It
/// must still be what SafeTensors allows (an object of strings), or the library's `safetensors`
/// loader refuses the payload, and so do we.
fn check_header_metadata(header: &Object) -> Result<(), RecordError> {
    match header.get(HEADER_METADATA_KEY) {
        None => Ok(()),
        Some(Value::Object(map)) if map.values().all(|v| v.as_str().is_some()) => Ok(()),
        Some(_) => {
            let detail = "__metadata__ must be an object of strings";
            Err(RecordError::corrupt(rule::HEADER_METADATA, detail))
        }
    }
}

/// Turns data-relative ranges into absolute ones and checks the total length.
fn finish_header(
    header_len: u64,
    relative: BTreeMap<String, TensorEntry>,
    data_len: u64,
    limits: &RecordLimits,
) -> Result<PayloadHeader, RecordError> {
    let data_start = LENGTH_PREFIX_BYTES + header_len;
    // A saturated sum is u64::MAX, above any usable limit, so overflow is refused here.
    let total_len = data_start.saturating_add(data_len);
    RecordError::check_limit(
        limit::ENCODED_RECORD_BYTES,
        total_len,
        limits.max_encoded_record_bytes.min(u64::MAX - 1),
    )?;
    // Cannot overflow: every range ends within `data_len`, and `data_start + data_len` fit.
    let tensors = relative
        .into_iter()
        .map(|(name, mut entry)| {
            entry.range = data_start + entry.range.start..data_start + entry.range.end;
            (name, entry)
        })
        .collect();
    let header = PayloadHeader {
        header_len,
        tensors,
        total_len,
    };
    check_descriptor_entry(&header, limits)?;
    Ok(header)
}

/// One `{"dtype","shape","data_offsets"}` entry, offsets still relative to the data buffer.
fn header_entry(
    name: &str,
    value: &Value,
    limits: &RecordLimits,
) -> Result<TensorEntry, RecordError> {
    let entry = value
        .as_object()
        .ok_or_else(|| entry_fault(rule::HEADER_ENTRY, name, "entry is not an object"))?;
    check_entry_keys(entry, name)?;
    let dtype_name = entry
        .req_str("dtype")
        .map_err(|e| entry_fault(rule::HEADER_ENTRY, name, e))?;
    let dtype = DType::from_safetensors_name(dtype_name)
        .ok_or_else(|| RecordError::UnsupportedDtype(dtype_name.to_string()))?;
    let shape = u64_list(entry, "shape", name, rule::HEADER_ENTRY)?;
    let max_axes = to_u64(limits.max_axes_per_field);
    RecordError::check_limit(limit::AXES_PER_FIELD, to_u64(shape.len()), max_axes)?;
    let meta = FieldMeta {
        dtype,
        shape,
        axes: Vec::new(),
        metadata: Object::new(),
    };
    let byte_len = field_bytes(&meta, limits)?;
    let range = entry_range(entry, name, byte_len)?;
    Ok(TensorEntry {
        dtype,
        shape: meta.shape,
        range,
    })
}

/// A framing error about tensor `name`'s header entry.
fn entry_fault(rule: &'static str, name: &str, what: impl std::fmt::Display) -> RecordError {
    RecordError::corrupt(rule, format!("tensor {name:?}: {what}"))
}

fn check_entry_keys(entry: &Object, name: &str) -> Result<(), RecordError> {
    const KEYS: [&str; 3] = ["dtype", "shape", "data_offsets"];
    let fault = |what: String| entry_fault(rule::HEADER_ENTRY, name, what);
    entry.only_keys(&KEYS).map_err(|e| fault(e.to_string()))?;
    match KEYS.iter().find(|key| !entry.contains_key(**key)) {
        Some(missing) => Err(fault(format!("missing key {missing:?}"))),
        None => Ok(()),
    }
}

/// The nonnegative integers of `entry[key]`; a broken list breaks `rule`.
fn u64_list(
    entry: &Object,
    key: &str,
    name: &str,
    rule: &'static str,
) -> Result<Vec<u64>, RecordError> {
    let items = entry
        .req_array(key)
        .map_err(|e| entry_fault(rule, name, e))?;
    items
        .iter()
        .map(|item| {
            item.as_u64().ok_or_else(|| {
                entry_fault(
                    rule,
                    name,
                    format!("{key} entries must be nonnegative integers"),
                )
            })
        })
        .collect()
}

/// The data-relative range, which must hold exactly the tensor's bytes.
fn entry_range(entry: &Object, name: &str, byte_len: u64) -> Result<Range<u64>, RecordError> {
    let offsets = u64_list(entry, "data_offsets", name, rule::DATA_OFFSETS)?;
    let [start, end] = offsets[..] else {
        return Err(entry_fault(
            rule::DATA_OFFSETS,
            name,
            "data_offsets must hold two integers",
        ));
    };
    if end < start || end - start != byte_len {
        return Err(entry_fault(
            rule::DATA_OFFSETS,
            name,
            format!(
                "data_offsets [{start}, {end}] do not hold the {byte_len} bytes its shape needs"
            ),
        ));
    }
    Ok(start..end)
}

/// Sorted by offsets, the tensors must tile `[0, data_len)` exactly; returns `data_len`.
fn check_coverage(tensors: &BTreeMap<String, TensorEntry>) -> Result<u64, RecordError> {
    let mut by_offset: Vec<(&String, &Range<u64>)> = tensors
        .iter()
        .map(|(name, entry)| (name, &entry.range))
        .collect();
    by_offset.sort_by_key(|(_, range)| (range.start, range.end));
    let mut cursor = 0u64;
    for (name, range) in by_offset {
        if range.start != cursor {
            let kind = if range.start < cursor {
                "overlaps"
            } else {
                "leaves a gap before"
            };
            let detail = format!("tensor {name:?} at {range:?} {kind} offset {cursor}");
            return Err(RecordError::corrupt(rule::DATA_COVERAGE, detail));
        }
        cursor = range.end;
    }
    Ok(cursor)
}

/// The all-tensors limit counts field tensors only; the descriptor has its own.
fn check_header_totals(
    tensors: &BTreeMap<String, TensorEntry>,
    limits: &RecordLimits,
) -> Result<(), RecordError> {
    let field_bytes: u64 = tensors
        .iter()
        .filter(|(name, _)| *name != DESCRIPTOR_TENSOR)
        .map(|(_, entry)| entry.range.end - entry.range.start)
        .fold(0u64, u64::saturating_add);
    RecordError::check_limit(
        limit::TOTAL_TENSOR_BYTES,
        field_bytes,
        limits.max_total_tensor_bytes,
    )
}

fn check_descriptor_entry(
    header: &PayloadHeader,
    limits: &RecordLimits,
) -> Result<(), RecordError> {
    let entry = header.tensors.get(DESCRIPTOR_TENSOR).ok_or_else(|| {
        RecordError::corrupt(
            rule::DESCRIPTOR_MISSING,
            "no __sds_descriptor__ in the header",
        )
    })?;
    if entry.dtype != DType::U8 || entry.shape.len() != 1 {
        let detail = format!("dtype {} shape {:?}", entry.dtype, entry.shape);
        return Err(RecordError::corrupt(rule::DESCRIPTOR_TENSOR, detail));
    }
    let size = entry.range.end - entry.range.start;
    RecordError::check_limit(limit::DESCRIPTOR_BYTES, size, limits.max_descriptor_bytes)
}

// ---------------------------------------------------------------------------------------------
// Joining header and descriptor
// ---------------------------------------------------------------------------------------------

/// Where one field's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldLayout {
    /// The SafeTensors key the descriptor maps the field to.
    pub tensor: String,
    /// Absolute byte range of the field's data within the payload.
    pub range: Range<u64>,
}

/// A decoded record without its tensor bytes: the descriptor joined with the header.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordLayout {
    pub meta: RecordMeta,
    /// Per field name, its tensor key and byte range.
    pub fields: BTreeMap<String, FieldLayout>,
    pub header: PayloadHeader,
}

impl RecordLayout {
    /// The payload's complete expected length.
    pub fn total_len(&self) -> u64 {
        self.header.total_len
    }

    /// Joins a checked header with the descriptor bytes it locates, then validates the record.
    pub fn from_parts(
        header: PayloadHeader,
        descriptor: &[u8],
        limits: &RecordLimits,
    ) -> Result<RecordLayout, RecordError> {
        let range = header.descriptor_range();
        if to_u64(descriptor.len()) != range.end - range.start {
            let detail = format!(
                "{} descriptor bytes given, header says {range:?}",
                descriptor.len()
            );
            return Err(RecordError::corrupt(rule::DESCRIPTOR_TENSOR, detail));
        }
        let source_bytes = descriptor.len();
        let descriptor = read_descriptor(descriptor, limits)?;
        let (meta, fields) = join_fields(&header, descriptor)?;
        validate_read(&meta, limits, source_bytes)?;
        Ok(RecordLayout {
            meta,
            fields,
            header,
        })
    }
}

/// Parses the descriptor JSON and checks its format and version before reading anything else.
fn read_descriptor(bytes: &[u8], limits: &RecordLimits) -> Result<Descriptor, RecordError> {
    let object = parse_object(bytes, &limits.descriptor_json())
        .map_err(|e| RecordError::json("record descriptor", e))?;
    let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_string);
    let format = text("format").unwrap_or_default();
    if format != RECORD_FORMAT {
        return Err(RecordError::UnsupportedFormat(format));
    }
    let version = text("version").unwrap_or_default();
    if !SUPPORTED_RECORD_VERSIONS.contains(&version.as_str()) {
        return Err(RecordError::UnsupportedVersion(version));
    }
    descriptor_from_object(object)
}

type Joined = (RecordMeta, BTreeMap<String, FieldLayout>);

/// Gives each descriptor field its header tensor; every field tensor must be claimed once.
fn join_fields(header: &PayloadHeader, descriptor: Descriptor) -> Result<Joined, RecordError> {
    let mut claimed = BTreeSet::new();
    let mut fields = BTreeMap::new();
    let mut layouts = BTreeMap::new();
    for (name, field) in descriptor.fields {
        let entry = match header.tensors.get(&field.tensor) {
            Some(entry) if field.tensor != DESCRIPTOR_TENSOR => entry,
            _ => {
                let detail = format!("field {name:?} maps to {:?}", field.tensor);
                return Err(RecordError::corrupt(rule::FIELD_TENSOR_MISSING, detail));
            }
        };
        if !claimed.insert(field.tensor.clone()) {
            let detail = format!("field {name:?} maps to {:?}, already claimed", field.tensor);
            return Err(RecordError::corrupt(rule::FIELD_TENSOR_SHARED, detail));
        }
        let meta = FieldMeta {
            dtype: entry.dtype,
            shape: entry.shape.clone(),
            axes: field.axes,
            metadata: field.metadata,
        };
        let layout = FieldLayout {
            tensor: field.tensor,
            range: entry.range.clone(),
        };
        fields.insert(name.clone(), meta);
        layouts.insert(name, layout);
    }
    check_all_claimed(header, &claimed)?;
    let meta = RecordMeta {
        id: descriptor.id,
        scene_id: descriptor.scene_id,
        metadata: descriptor.metadata,
        fields,
    };
    Ok((meta, layouts))
}

fn check_all_claimed(
    header: &PayloadHeader,
    claimed: &BTreeSet<String>,
) -> Result<(), RecordError> {
    let unclaimed = header
        .tensors
        .keys()
        .find(|key| *key != DESCRIPTOR_TENSOR && !claimed.contains(*key));
    match unclaimed {
        Some(key) => {
            let detail = format!("tensor {key:?} belongs to no field");
            Err(RecordError::corrupt(rule::UNMAPPED_TENSOR, detail))
        }
        None => Ok(()),
    }
}

/// Slices `bytes[range]`, reporting a short input as truncated.
fn slice_of<'a>(bytes: &'a [u8], range: &Range<u64>) -> Result<&'a [u8], RecordError> {
    let truncated = RecordError::Truncated {
        needed: range.end,
        available: to_u64(bytes.len()),
    };
    let start = usize::try_from(range.start).map_err(|_| truncated.clone())?;
    let end = usize::try_from(range.end).map_err(|_| truncated.clone())?;
    bytes.get(start..end).ok_or(truncated)
}

/// Reads a record's layout from a payload prefix holding at least the header and the bytes up to
/// the descriptor's end (the whole payload always qualifies). A shorter prefix gives
/// [`RecordError::Truncated`] naming how many bytes are needed.
pub fn parse_layout(prefix: &[u8], limits: &RecordLimits) -> Result<RecordLayout, RecordError> {
    let header = parse_header(prefix, limits)?;
    let descriptor = slice_of(prefix, &header.descriptor_range())?;
    RecordLayout::from_parts(header, descriptor, limits)
}

/// Decodes a whole payload; field data are slices of `payload`, never copies.
pub fn decode(payload: Bytes, limits: &RecordLimits) -> Result<Record, RecordError> {
    let layout = parse_layout(&payload, limits)?;
    let actual = to_u64(payload.len());
    if actual != layout.total_len() {
        let detail = format!(
            "{actual} bytes, header and data need {}",
            layout.total_len()
        );
        return Err(RecordError::corrupt(rule::PAYLOAD_LENGTH, detail));
    }
    let mut fields = BTreeMap::new();
    for (name, meta) in layout.meta.fields {
        let range = layout
            .fields
            .get(&name)
            .map(|f| f.range.clone())
            .unwrap_or(0..0);
        // In bounds: the payload length equals the total the ranges were checked against.
        slice_of(&payload, &range)?;
        let data = payload.slice(to_usize(range.start)?..to_usize(range.end)?);
        fields.insert(name, Field { meta, data });
    }
    Ok(Record {
        id: layout.meta.id,
        scene_id: layout.meta.scene_id,
        metadata: layout.meta.metadata,
        fields,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::dtype::ALL_DTYPES;
    use crate::format::record::model::Field;

    /// A tensor as the `safetensors` crate takes it.
    struct CrateTensor<'a>(StDtype, Vec<usize>, &'a [u8]);

    impl safetensors::tensor::View for CrateTensor<'_> {
        fn dtype(&self) -> StDtype {
            self.0
        }
        fn shape(&self) -> &[usize] {
            &self.1
        }
        fn data(&self) -> std::borrow::Cow<'_, [u8]> {
            std::borrow::Cow::Borrowed(self.2)
        }
        fn data_len(&self) -> usize {
            self.2.len()
        }
    }

    /// What the crate's `serialize` (the Python library's writer) makes of `record`.
    fn crate_payload(record: &Record) -> Vec<u8> {
        let descriptor = descriptor_json(&record.meta(), &RecordLimits::default()).unwrap();
        let mut tensors = vec![(
            DESCRIPTOR_TENSOR.to_string(),
            CrateTensor(StDtype::U8, vec![descriptor.len()], descriptor.as_bytes()),
        )];
        for (index, field) in record.fields.values().enumerate() {
            let shape = field.meta.shape.iter().map(|&d| d as usize).collect();
            let tensor = CrateTensor(safetensors_dtype(field.meta.dtype), shape, &field.data);
            tensors.push((tensor_key(index), tensor));
        }
        safetensors::serialize(tensors, None).unwrap()
    }

    #[test]
    fn pieces_are_the_crates_bytes() {
        // Every dtype, twice (ties broken by key), with 1-d, empty and 2-d shapes, and enough
        // fields for keys of two digits (`t10` sorts before `t2`).
        let mut record = Record::new("r");
        for (i, dtype) in ALL_DTYPES.into_iter().chain(ALL_DTYPES).enumerate() {
            let shape = match i % 3 {
                0 => vec![1],
                1 => vec![0, 2],
                _ => vec![3, 2],
            };
            let count = shape.iter().product::<u64>() as usize;
            let len = count * dtype.itemsize() as usize;
            let bytes = (0..len).map(|b| (b * 7 + i) as u8).collect::<Vec<u8>>();
            let field = Field::new(dtype, shape, bytes).unwrap();
            record.fields.insert(format!("field {i:02}"), field);
        }
        let (payload, _) = encode_pieces(&record, &RecordLimits::default()).unwrap();
        let expected = crate_payload(&record);
        assert_eq!(payload.len(), expected.len() as u64);
        assert_eq!(payload.to_vec(), expected);
        assert!(payload.pieces().len() > ALL_DTYPES.len() * 2);
    }

    #[test]
    fn header_len_reads_little_endian() {
        let limits = RecordLimits::default();
        assert_eq!(header_len(&[16, 1, 0, 0, 0, 0, 0, 0, 99], &limits), Ok(272));
    }
}
