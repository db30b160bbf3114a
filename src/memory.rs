//! Large fresh buffers: a helper below every layer (it uses nothing else in the crate).
//!
//! A large decoded record or shard piece is written once, front to back, into fresh memory.
//! With 4 KiB pages that is one page fault per 4 KiB (a third of the decoding time of a
//! 256 MiB record in profiles, more in a VM); with 2 MiB transparent huge pages, 512 times
//! fewer. `MADV_HUGEPAGE` asks for those where the system's policy is `madvise`.
//!
//! Buffers a decode takes and frees many times over (the read-ahead's pieces of a chunk) are
//! mappings of their own: [`piece_buffer`] gives every one from [`PIECE_MAPPED_MIN`] up at
//! least [`LARGE_BLOCK`] of capacity, glibc's mapping threshold in the daemon
//! (`fs::cache::bound_allocator`). A block below the threshold is carved from the heap, and
//! glibc does not give a freed block inside the heap back to the system: the read-ahead's
//! pieces, 4 MiB minus a 24-byte header per 64 KiB block (1.5 KiB below the threshold), left
//! the heap at the high-water mark of every piece decodes had held at once. With 16 readers of
//! distinct 30 MiB records under a 128 MiB budget that was 45-85 MiB of heap besides the
//! budget's records (measured from `/proc/PID/smaps`), for pieces the decodes had charged and
//! freed. Unused capacity of a mapping is never touched, so it takes no memory.

/// Allocations of at least this many bytes are mappings of their own, unmapped when freed,
/// in the daemon (`fs::cache::bound_allocator` sets glibc's `M_MMAP_THRESHOLD` to it).
pub const LARGE_BLOCK: usize = 4 << 20;

/// Buffers from this size up are backed by transparent huge pages where the kernel allows it.
const HUGE_MIN: usize = LARGE_BLOCK;

/// Pieces from this size up are made mappings of their own by [`piece_buffer`]; smaller ones
/// stay in the heap, where so little memory is not worth a mapping and its page faults.
pub const PIECE_MAPPED_MIN: usize = 1 << 20;

/// An empty vector with room for `len` bytes of a piece a decode fills once and frees: from
/// [`PIECE_MAPPED_MIN`] up its capacity is at least [`LARGE_BLOCK`], so it is a mapping of
/// its own (returned to the system when freed, not kept in the heap) backed by huge pages.
pub(crate) fn piece_buffer(len: usize) -> Vec<u8> {
    let capacity = if len >= PIECE_MAPPED_MIN {
        len.max(LARGE_BLOCK)
    } else {
        len
    };
    let buf = Vec::with_capacity(capacity);
    advise_huge_pages(&buf);
    buf
}

/// Asks for huge pages behind the spare capacity of `buf` when it is large. Call it right
/// after reserving, before the memory is touched.
pub(crate) fn advise_huge_pages(buf: &Vec<u8>) {
    if buf.capacity() < HUGE_MIN {
        return;
    }
    const PAGE: usize = 4096;
    // malloc's large blocks start 16 bytes into a page, and madvise wants whole pages.
    let start = buf.as_ptr() as usize;
    let first = start.next_multiple_of(PAGE);
    let end = (start + buf.capacity()) & !(PAGE - 1);
    if end > first {
        // SAFETY: whole pages inside an allocation `buf` owns; madvise only changes how the
        // kernel backs them, never their contents or validity.
        unsafe {
            libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
        }
    }
}

/// Appends exactly `len` bytes read at `offset` of `file` to `buf`, straight into its spare
/// capacity: no zero fill first (for the multi-MiB pieces of a large chunk, zeroing cost about
/// as much as the read). The caller reserves the room; a short file is `UnexpectedEof`.
pub(crate) fn read_exact_at_into(
    file: &std::fs::File,
    offset: u64,
    len: usize,
    buf: &mut Vec<u8>,
) -> std::io::Result<()> {
    read_split_at(file, offset, &[(0, len)], &mut [buf])
}

/// How many bytes a split read of `parts` reads.
pub(crate) fn split_len(parts: &[(usize, usize)]) -> u64 {
    parts.iter().map(|&(_, len)| len as u64).sum()
}

/// Appends `bytes` part by part to `outs`, as `ByteSource::read_split` describes.
pub(crate) fn split_into(
    bytes: &[u8],
    parts: &[(usize, usize)],
    outs: &mut [&mut Vec<u8>],
) -> std::io::Result<()> {
    let mut rest = bytes;
    for &(out, len) in parts {
        let (part, after) = rest.split_at_checked(len).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "split read ran short")
        })?;
        outs.get_mut(out)
            .ok_or_else(|| std::io::Error::other("split read: no such output"))?
            .extend_from_slice(part);
        rest = after;
    }
    Ok(())
}

/// Reads consecutive bytes at `offset` of `file` with `preadv`, appending them part by part:
/// each `(out, len)` of `parts`, in file order, sends the next `len` bytes to the end of
/// `outs[out]`, straight into its spare capacity (the caller reserves the room). One system
/// call for a whole run of interleaved parts, and no copy through an intermediate buffer. A
/// short file is `UnexpectedEof`; on error the outputs keep their old lengths.
pub(crate) fn read_split_at(
    file: &std::fs::File,
    offset: u64,
    parts: &[(usize, usize)],
    outs: &mut [&mut Vec<u8>],
) -> std::io::Result<()> {
    use std::io::{Error, ErrorKind};
    use std::os::fd::AsRawFd;
    // Where each output's next part goes, and how much each output grows.
    let mut grow = vec![0usize; outs.len()];
    let mut iov = Vec::with_capacity(parts.len());
    for &(out, len) in parts {
        let buf = outs
            .get_mut(out)
            .ok_or_else(|| Error::other("split read: no such output"))?;
        let at = buf.len() + grow[out];
        if at + len > buf.capacity() {
            return Err(Error::other("split read: no room reserved"));
        }
        // SAFETY: `at..at + len` lies in the spare capacity of `buf` (checked above), which is
        // allocated and exclusively ours; parts of one output do not overlap.
        let base = unsafe { buf.as_mut_ptr().add(at) };
        iov.push(libc::iovec {
            iov_base: base.cast(),
            iov_len: len,
        });
        grow[out] += len;
    }
    let total: usize = grow.iter().sum();
    // Short reads (a signal, a filesystem's own limits) continue where they stopped.
    let (mut first, mut done) = (0usize, 0usize);
    while done < total {
        let at = offset
            .checked_add(done as u64)
            .and_then(|p| libc::off_t::try_from(p).ok())
            .ok_or_else(|| Error::new(ErrorKind::InvalidInput, "read offset overflows"))?;
        let count = (iov.len() - first).min(1024) as libc::c_int;
        // SAFETY: every iovec points into reserved spare capacity (above); preadv writes at
        // most the sum of their lengths.
        let n = unsafe { libc::preadv(file.as_raw_fd(), iov.as_ptr().add(first), count, at) };
        if n < 0 {
            let e = Error::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(Error::new(
                ErrorKind::UnexpectedEof,
                format!("read of {total} bytes at {offset}: file ends after {done} bytes"),
            ));
        }
        let mut n = n as usize;
        done += n;
        // Skip the iovecs filled, and start the next call inside a partly filled one.
        while n > 0 {
            let v = &mut iov[first];
            if n >= v.iov_len {
                n -= v.iov_len;
                first += 1;
            } else {
                // SAFETY: advancing within the same iovec's range.
                v.iov_base = unsafe { v.iov_base.cast::<u8>().add(n) }.cast();
                v.iov_len -= n;
                n = 0;
            }
        }
        while first < iov.len() && iov[first].iov_len == 0 {
            first += 1;
        }
    }
    for (buf, grown) in outs.iter_mut().zip(grow) {
        // SAFETY: preadv initialized exactly these bytes after each output's old length.
        unsafe { buf.set_len(buf.len() + grown) };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn split_reads_stop_at_a_short_file_and_leave_the_outputs_alone() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&[7u8; 100]).unwrap();
        let (mut a, mut b) = (vec![1u8], Vec::with_capacity(200));
        a.reserve_exact(200);
        read_split_at(&file, 10, &[(0, 30), (1, 40)], &mut [&mut a, &mut b]).unwrap();
        assert_eq!((a.len(), b.len()), (31, 40));
        assert!(a[1..].iter().chain(&b).all(|&x| x == 7));
        // 50 bytes asked for past byte 60 of 100: the file ends first.
        let err = read_split_at(&file, 60, &[(0, 20), (1, 30)], &mut [&mut a, &mut b]);
        assert_eq!(err.unwrap_err().kind(), std::io::ErrorKind::UnexpectedEof);
        assert_eq!((a.len(), b.len()), (31, 40));
        // More than the room reserved is refused before any read.
        let err = read_split_at(&file, 0, &[(1, 1000)], &mut [&mut a, &mut b]);
        assert!(err.unwrap_err().to_string().contains("no room"));
    }
}
