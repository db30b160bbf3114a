//! Decoding a large record into temporary files: the payload in one file, and each large
//! tensor in a file of its own.
//!
//! Why a file per large tensor: a field's `.raw` (and `.sigmf-data`) view is exactly its
//! tensor's bytes. When those bytes start at offset 0 of a file, the kernel can serve the view
//! from that file directly (FUSE passthrough, see [`crate::fs::fuse`]): no request reaches the
//! daemon for the data, and the reader copies from the temporary file's page cache, which on
//! ext4 and tmpfs uses large folios where a FUSE mount's own page cache uses 4 KiB pages.
//!
//! The payload streams through [`SpillSink`] once, as it is decompressed: the SafeTensors
//! header at its start says where every tensor is, so each byte can go straight to its file.
//! The payload file keeps every byte at its payload offset, except the ranges of split-off
//! tensors, which stay holes (no disk space). A header that does not parse, or is larger than
//! `HEADER_KEEP_MAX`, leaves everything in the payload file; the caller's validation of that
//! file then reports any defect, as before.
//!
//! Memory: the sink holds at most [`SINK_MEMORY`] bytes, which the caller charges to the memory
//! budget with the decoder's working set before decoding.
//!
//! Write-behind: the bytes are collected into 1 MiB buffers that one helper thread writes
//! while decompression goes on (at most `BUFFERS` in flight, so memory stays bounded).
//! Writing into the page cache was a sixth of a large record's decoding time on one thread;
//! on a machine with a second core it now overlaps with zstd.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::arrayrecord::RecordSink;
use crate::format::limits::RecordLimits;
use crate::format::record::{header_len, parse_header, DESCRIPTOR_TENSOR};

/// Tensors of at least this many bytes get a file of their own.
pub const OWN_FILE_MIN_BYTES: u64 = 1 << 20;
/// At most this many tensors of one record get a file of their own (the rest stay in the
/// payload file), so a record with many large tensors cannot use many descriptors.
const MAX_OWN_FILES: usize = 8;
/// Size of one write-behind buffer, and how many may be in flight.
const BUFFER_BYTES: usize = 1 << 20;
const BUFFERS: usize = 4;
/// Headers (length prefix included) up to this size are kept and parsed to split tensors off;
/// a larger one (the format allows 16 MiB) leaves every byte in the payload file, so the
/// sink's memory stays fixed ([`SINK_MEMORY`]).
const HEADER_KEEP_MAX: u64 = 1 << 20;

/// The most memory a [`SpillSink`] holds: its write-behind buffers, the staging buffer it
/// lends the decoder before the header is parsed (at most one buffer's size), and the header
/// bytes it keeps until the header parses (at most `HEADER_KEEP_MAX`).
pub const SINK_MEMORY: u64 = (BUFFERS as u64 + 1) * BUFFER_BYTES as u64 + HEADER_KEEP_MAX;

/// A tensor written to a file of its own.
#[derive(Debug)]
pub struct OwnFile {
    /// The tensor's absolute byte range in the payload.
    pub range: Range<u64>,
    pub file: Arc<File>,
}

/// Where the bytes of a spilled payload went.
#[derive(Debug)]
pub struct Spilled {
    /// The payload, with holes where own-file tensors are.
    pub payload: Arc<File>,
    /// Split-off tensors by SafeTensors key.
    pub own_files: BTreeMap<String, OwnFile>,
}

/// A tensor that goes to a file of its own.
struct Target {
    key: String,
    range: Range<u64>,
    file: Arc<File>,
}

/// Bytes collected for one contiguous stretch of one file: the first `filled` bytes of
/// `data`, a buffer of [`BUFFER_BYTES`] kept initialized so it can be lent to the decoder.
struct Pending {
    file: Arc<File>,
    offset: u64,
    data: Vec<u8>,
    filled: usize,
}

impl Pending {
    fn is_full(&self) -> bool {
        self.filled >= self.data.len()
    }

    /// Whether payload bytes for `file` at `offset` continue this stretch.
    fn continues(&self, file: &Arc<File>, offset: u64) -> bool {
        Arc::ptr_eq(&self.file, file) && self.offset + self.filled as u64 == offset
    }
}

/// Bytes of a decoded segment for one stretch of one file, written without a copy.
struct Shared {
    file: Arc<File>,
    offset: u64,
    segment: Arc<Vec<u8>>,
    range: Range<usize>,
}

/// A write for the writer thread.
enum Job {
    Owned(Pending),
    Shared(Shared),
    /// Reserve the blocks of a tensor's own file before its bytes come (see [`reserve`]).
    Reserve(Arc<File>, u64),
}

/// What [`SpillSink`] lent last through [`RecordSink::buffer`].
enum Lent {
    Nothing,
    /// The header staging buffer (before the header is parsed).
    Staging,
    /// The pending buffer, from `filled` on.
    Pending,
}

/// A `Write` that routes a payload's bytes by position (see the module documentation).
pub struct SpillSink<'a> {
    limits: &'a RecordLimits,
    payload: Arc<File>,
    /// Bytes taken so far.
    position: u64,
    /// The header bytes seen while it is incomplete.
    prefix: Vec<u8>,
    /// `None` until the header is parsed (or given up on).
    targets: Option<Vec<Target>>,
    pending: Option<Pending>,
    behind: WriteBehind,
    /// Header bytes lent to the decoder before the header is parsed.
    staging: Vec<u8>,
    lent: Lent,
}

impl<'a> SpillSink<'a> {
    pub fn new(limits: &'a RecordLimits) -> std::io::Result<SpillSink<'a>> {
        Ok(SpillSink {
            limits,
            payload: Arc::new(tempfile::tempfile()?),
            position: 0,
            prefix: Vec::new(),
            targets: None,
            pending: None,
            behind: WriteBehind::start()?,
            staging: Vec::new(),
            lent: Lent::Nothing,
        })
    }

    /// Waits for every write and returns the files.
    pub fn finish(mut self) -> std::io::Result<Spilled> {
        self.submit_pending()?;
        self.behind.finish()?;
        let own_files = self
            .targets
            .take()
            .unwrap_or_default()
            .into_iter()
            .map(|t| {
                let own = OwnFile {
                    range: t.range,
                    file: t.file,
                };
                (t.key, own)
            })
            .collect();
        Ok(Spilled {
            payload: self.payload,
            own_files,
        })
    }

    /// Takes the leading part of `bytes` that belongs to a header not parsed yet: each piece
    /// is routed with `route` (header bytes go to the payload file as they come) and kept
    /// until the header parses (it is small and bounded by the limits). Returns how many
    /// bytes were taken; the rest is routed by the caller, with the targets known.
    fn take_header(
        &mut self,
        bytes: &[u8],
        mut route: impl FnMut(&mut Self, Range<usize>) -> std::io::Result<()>,
    ) -> std::io::Result<usize> {
        let mut at = 0;
        while self.targets.is_none() && at < bytes.len() {
            let take = self.header_bytes_wanted().min(bytes.len() - at);
            route(self, at..at + take)?;
            self.take_header_bytes(&bytes[at..at + take])?;
            at += take;
        }
        Ok(at)
    }

    /// How many more bytes the header needs before it can be parsed.
    fn header_bytes_wanted(&self) -> usize {
        let have = self.prefix.len();
        if have < 8 {
            return 8 - have;
        }
        header_len(&self.prefix, self.limits)
            .ok()
            .and_then(|len| usize::try_from(8 + len).ok())
            .map_or(1, |total| total.saturating_sub(have).max(1))
    }

    /// Collects header bytes until the header can be parsed; then plans the own files.
    fn take_header_bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.prefix.extend_from_slice(bytes);
        if self.prefix.len() < 8 {
            return Ok(());
        }
        let len = match header_len(&self.prefix, self.limits) {
            Ok(len) if len.saturating_add(8) <= HEADER_KEEP_MAX => len,
            _ => {
                self.targets = Some(Vec::new());
                self.prefix = Vec::new();
                return Ok(());
            }
        };
        if (self.prefix.len() as u64) < 8 + len {
            return Ok(());
        }
        let tensors = match parse_header(&self.prefix, self.limits) {
            Ok(header) => header
                .tensors
                .into_iter()
                .map(|(k, t)| (k, t.range))
                .collect(),
            Err(_) => Vec::new(),
        };
        let position = self.position;
        // Tensors start after the header (parse_header checks it); the guard keeps a header
        // that claims otherwise from splitting anything.
        let targets = plan_targets(tensors.into_iter().filter(|(_, r)| r.start >= position))?;
        for target in &targets {
            let len = target.range.end - target.range.start;
            self.behind
                .submit_job(Job::Reserve(target.file.clone(), len))?;
        }
        self.targets = Some(targets);
        self.prefix = Vec::new();
        Ok(())
    }

    /// The file and offset of payload position `position`, and how many bytes from there
    /// go to the same file contiguously.
    fn destination(&self, position: u64) -> (Arc<File>, u64, u64) {
        let targets = self.targets.as_deref().unwrap_or_default();
        if let Some(t) = targets.iter().find(|t| t.range.contains(&position)) {
            return (
                t.file.clone(),
                position - t.range.start,
                t.range.end - position,
            );
        }
        let next_start = targets
            .iter()
            .map(|t| t.range.start)
            .filter(|&start| start > position)
            .min()
            .unwrap_or(u64::MAX);
        (self.payload.clone(), position, next_start - position)
    }

    /// Appends `bytes` (which start at payload offset `self.position`) to the buffers of the
    /// files they belong to.
    fn route(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        while !bytes.is_empty() {
            let (file, offset, run) = self.destination(self.position);
            let take = usize::try_from(run).map_or(bytes.len(), |run| run.min(bytes.len()));
            self.append(file, offset, &bytes[..take])?;
            self.position += take as u64;
            bytes = &bytes[take..];
        }
        Ok(())
    }

    /// Appends to the pending buffer, handing it to the writer when it is full or when the
    /// bytes go elsewhere.
    fn append(&mut self, file: Arc<File>, offset: u64, mut bytes: &[u8]) -> std::io::Result<()> {
        let mut offset = offset;
        while !bytes.is_empty() {
            let pending = self.pending_for(&file, offset)?;
            let take = (pending.data.len() - pending.filled).min(bytes.len());
            pending.data[pending.filled..pending.filled + take].copy_from_slice(&bytes[..take]);
            pending.filled += take;
            bytes = &bytes[take..];
            offset += take as u64;
        }
        Ok(())
    }

    /// The pending buffer for bytes of `file` at `offset`, with room: the current one if they
    /// continue it and it is not full, else a fresh one (the current one goes to the writer).
    fn pending_for(&mut self, file: &Arc<File>, offset: u64) -> std::io::Result<&mut Pending> {
        let usable = self
            .pending
            .as_ref()
            .is_some_and(|p| p.continues(file, offset) && !p.is_full());
        if !usable {
            self.submit_pending()?;
            let data = self.behind.buffer()?;
            self.pending = Some(Pending {
                file: file.clone(),
                offset,
                data,
                filled: 0,
            });
        }
        self.pending.as_mut().ok_or_else(stopped)
    }

    /// Sends bytes `range` of `segment` (which start at payload offset `self.position`) to
    /// the writer, split by destination file.
    fn route_shared(&mut self, segment: &Arc<Vec<u8>>, range: Range<usize>) -> std::io::Result<()> {
        // Keep the writes in payload order: what is buffered goes first.
        self.submit_pending()?;
        let mut at = range.start;
        while at < range.end {
            let (file, offset, run) = self.destination(self.position);
            let take = usize::try_from(run).map_or(range.end - at, |run| run.min(range.end - at));
            self.behind.submit_shared(Shared {
                file,
                offset,
                segment: segment.clone(),
                range: at..at + take,
            })?;
            self.position += take as u64;
            at += take;
        }
        Ok(())
    }

    fn submit_pending(&mut self) -> std::io::Result<()> {
        match self.pending.take() {
            Some(pending) if pending.filled > 0 => self.behind.submit(pending),
            Some(pending) => {
                self.behind.give_back(pending.data);
                Ok(())
            }
            None => Ok(()),
        }
    }
}

/// The decoder writes straight into the write-behind buffers (no copy through a buffer of its
/// own); until the header is parsed it writes into a small staging buffer that goes through
/// [`Write`], so the header is seen before anything is routed.
impl RecordSink for SpillSink<'_> {
    fn buffer(&mut self, max: usize) -> std::io::Result<&mut [u8]> {
        let max = max.max(1);
        if self.targets.is_none() {
            let want = self.header_bytes_wanted().clamp(1, BUFFER_BYTES).min(max);
            self.staging.resize(want, 0);
            self.lent = Lent::Staging;
            return Ok(&mut self.staging[..]);
        }
        let (file, offset, run) = self.destination(self.position);
        let run = usize::try_from(run).unwrap_or(usize::MAX).min(max);
        self.lent = Lent::Pending;
        let pending = self.pending_for(&file, offset)?;
        let take = (pending.data.len() - pending.filled).min(run);
        Ok(&mut pending.data[pending.filled..pending.filled + take])
    }

    /// Segments go to the writer thread as they are (no copy), routed like any other bytes;
    /// the writer drops each once written, which lets the decoder reuse it.
    fn take_segment(&mut self, segment: Arc<Vec<u8>>, range: Range<usize>) -> std::io::Result<()> {
        let bytes = segment
            .get(range.clone())
            .ok_or_else(|| overcommitted(range.len()))?;
        let header = self.take_header(bytes, |sink, part| {
            let part = range.start + part.start..range.start + part.end;
            sink.route_shared(&segment, part)
        })?;
        self.route_shared(&segment, range.start + header..range.end)
    }

    fn commit(&mut self, n: usize) -> std::io::Result<()> {
        match std::mem::replace(&mut self.lent, Lent::Nothing) {
            Lent::Staging => {
                let staged = std::mem::take(&mut self.staging);
                let result = staged
                    .get(..n)
                    .ok_or_else(|| overcommitted(n))
                    .and_then(|bytes| self.write_all(bytes));
                self.staging = staged;
                result
            }
            Lent::Pending => {
                let pending = self.pending.as_mut().ok_or_else(|| overcommitted(n))?;
                if n > pending.data.len() - pending.filled {
                    return Err(overcommitted(n));
                }
                pending.filled += n;
                self.position += n as u64;
                Ok(())
            }
            Lent::Nothing if n == 0 => Ok(()),
            Lent::Nothing => Err(overcommitted(n)),
        }
    }
}

fn overcommitted(n: usize) -> std::io::Error {
    std::io::Error::other(format!("{n} bytes committed that were not lent"))
}

impl Write for SpillSink<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let header = self.take_header(bytes, |sink, part| sink.route(&bytes[part]))?;
        self.route(&bytes[header..])?;
        Ok(bytes.len())
    }

    /// Buffers are written by the helper thread; [`SpillSink::finish`] waits for them.
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The tensors to split off: the largest, at least [`OWN_FILE_MIN_BYTES`] each, at most
/// [`MAX_OWN_FILES`], never the descriptor.
fn plan_targets(
    tensors: impl Iterator<Item = (String, Range<u64>)>,
) -> std::io::Result<Vec<Target>> {
    let mut large: Vec<(String, Range<u64>)> = tensors
        .filter(|(key, range)| {
            key != DESCRIPTOR_TENSOR && range.end.saturating_sub(range.start) >= OWN_FILE_MIN_BYTES
        })
        .collect();
    large.sort_by_key(|(_, range)| std::cmp::Reverse(range.end - range.start));
    large.truncate(MAX_OWN_FILES);
    large
        .into_iter()
        .map(|(key, range)| {
            let file = Arc::new(tempfile::tempfile()?);
            Ok(Target { key, range, file })
        })
        .collect()
}

/// One helper thread writing buffers at their offsets, and the buffers it hands back.
struct WriteBehind {
    jobs: Option<SyncSender<Job>>,
    free: Receiver<Vec<u8>>,
    /// Where unused buffers go back to `free`.
    spare: SyncSender<Vec<u8>>,
    worker: Option<JoinHandle<std::io::Result<()>>>,
}

impl WriteBehind {
    fn start() -> std::io::Result<WriteBehind> {
        let (jobs, queue) = sync_channel::<Job>(BUFFERS);
        let (give_back, free) = sync_channel::<Vec<u8>>(BUFFERS);
        for _ in 0..BUFFERS {
            // Room for every buffer: the channel holds BUFFERS of them.
            let _ = give_back.send(Vec::new());
        }
        let spare = give_back.clone();
        let worker = std::thread::Builder::new()
            .name("sdsfs-spill".into())
            .spawn(move || write_queue(queue, give_back))?;
        Ok(WriteBehind {
            jobs: Some(jobs),
            free,
            spare,
            worker: Some(worker),
        })
    }

    /// A buffer of [`BUFFER_BYTES`] (contents stale), waiting for the writer to finish one
    /// if all are in flight.
    fn buffer(&self) -> std::io::Result<Vec<u8>> {
        let mut data = self.free.recv().map_err(|_| stopped())?;
        // Zero-filled once, when first used; then reused as is.
        data.resize(BUFFER_BYTES, 0);
        Ok(data)
    }

    /// Returns a buffer that was taken but not filled.
    fn give_back(&self, data: Vec<u8>) {
        // Room for it: it came from this channel.
        let _ = self.spare.send(data);
    }

    fn submit(&self, pending: Pending) -> std::io::Result<()> {
        self.submit_job(Job::Owned(pending))
    }

    fn submit_job(&self, job: Job) -> std::io::Result<()> {
        let jobs = self.jobs.as_ref().ok_or_else(stopped)?;
        jobs.send(job).map_err(|_| stopped())
    }

    fn submit_shared(&self, shared: Shared) -> std::io::Result<()> {
        self.submit_job(Job::Shared(shared))
    }

    /// Waits for every submitted write; the first error, if any.
    fn finish(&mut self) -> std::io::Result<()> {
        self.jobs = None;
        match self.worker.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(std::io::Error::other("the spill writer thread panicked")),
            None => Ok(()),
        }
    }
}

/// The writer thread: writes each buffer at its offset and gives it back; after an error it
/// only drains the queue (the error is reported by `finish`).
fn write_queue(queue: Receiver<Job>, give_back: SyncSender<Vec<u8>>) -> std::io::Result<()> {
    let mut result = Ok(());
    for job in queue {
        match job {
            Job::Owned(pending) => {
                if result.is_ok() {
                    let filled = &pending.data[..pending.filled.min(pending.data.len())];
                    result = pending.file.write_all_at(filled, pending.offset);
                }
                let _ = give_back.send(pending.data);
            }
            Job::Shared(shared) => {
                if result.is_ok() {
                    let bytes = shared.segment.get(shared.range.clone()).unwrap_or_default();
                    result = shared.file.write_all_at(bytes, shared.offset);
                }
                // Dropping the segment here lets the decoder reuse it.
            }
            Job::Reserve(file, len) => reserve(&file, len),
        }
    }
    result
}

/// Allocates the first `len` bytes of `file` on its filesystem without changing its size
/// (`fallocate` with `FALLOC_FL_KEEP_SIZE`). On ext4 the writes that follow then land in
/// allocated extents instead of reserving delayed-allocation space page by page: writing a
/// 256 MiB tensor took 44 ms instead of 57 ms of the writer's time. Best effort: where the
/// filesystem cannot (tmpfs without room, an old kernel), the writes simply allocate as before,
/// and report any real failure themselves.
fn reserve(file: &File, len: u64) {
    let _ = rustix::fs::fallocate(file, rustix::fs::FallocateFlags::KEEP_SIZE, 0, len);
}

fn stopped() -> std::io::Error {
    std::io::Error::other("the spill writer thread stopped")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::dtype::DType;
    use crate::format::record::{self, Field, Record};

    /// A payload with one tensor large enough for a file of its own and one small one.
    fn payload() -> Vec<u8> {
        let big: Vec<u8> = (0..(OWN_FILE_MIN_BYTES as usize + 4096))
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        let record = Record::new("r")
            .with_field(
                "big",
                Field::new(DType::U8, vec![big.len() as u64], big).unwrap(),
            )
            .with_field(
                "small",
                Field::new(DType::U8, vec![3], vec![7, 8, 9]).unwrap(),
            );
        record::encode(&record, &RecordLimits::default()).unwrap()
    }

    /// The payload as the spill files hold it: the payload file, with the own files' bytes
    /// put back in their holes.
    fn reassemble(spilled: &Spilled, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        spilled.payload.read_at(&mut out, 0).unwrap();
        for own in spilled.own_files.values() {
            let range = own.range.start as usize..own.range.end as usize;
            own.file.read_exact_at(&mut out[range], 0).unwrap();
        }
        out
    }

    #[test]
    fn lent_buffers_of_any_size_route_every_byte() {
        let payload = payload();
        let limits = RecordLimits::default();
        for lend in [1usize, 7, 4096, usize::MAX] {
            let mut sink = SpillSink::new(&limits).unwrap();
            let mut at = 0;
            while at < payload.len() {
                let space = sink.buffer(lend.min(payload.len() - at)).unwrap();
                assert!(!space.is_empty() && space.len() <= lend);
                // Fill only part of what was lent, as a decompressor may.
                let n = space.len().div_ceil(2);
                space[..n].copy_from_slice(&payload[at..at + n]);
                sink.commit(n).unwrap();
                at += n;
            }
            let spilled = sink.finish().unwrap();
            // Only the large tensor ("big" sorts first: tensor 0) has a file of its own.
            let own: Vec<&String> = spilled.own_files.keys().collect();
            assert_eq!(own, [&record::tensor_key(0)], "lend {lend}");
            assert_eq!(reassemble(&spilled, payload.len()), payload, "lend {lend}");
        }
    }

    #[test]
    fn segments_route_every_byte() {
        let payload = payload();
        let limits = RecordLimits::default();
        // Segments cut anywhere, the header included; each one handed over in two ranges.
        let header = 8 + u64::from_le_bytes(payload[..8].try_into().unwrap()) as usize;
        // The smallest cut puts the header into three segments.
        for cut in [header.div_ceil(3), 70_000, payload.len()] {
            let mut sink = SpillSink::new(&limits).unwrap();
            for chunk in payload.chunks(cut) {
                let segment = Arc::new(chunk.to_vec());
                let half = chunk.len() / 2;
                sink.take_segment(segment.clone(), 0..half).unwrap();
                sink.take_segment(segment, half..chunk.len()).unwrap();
            }
            let spilled = sink.finish().unwrap();
            assert_eq!(spilled.own_files.len(), 1, "cut {cut}");
            assert_eq!(reassemble(&spilled, payload.len()), payload, "cut {cut}");
        }
    }

    #[test]
    fn committing_more_than_was_lent_is_an_error() {
        let limits = RecordLimits::default();
        let mut sink = SpillSink::new(&limits).unwrap();
        assert!(sink.commit(1).is_err());
        let lent = sink.buffer(4).unwrap().len();
        assert!(sink.commit(lent + 1).is_err());
    }
}
