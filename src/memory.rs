//! Large fresh buffers: a helper below every layer (it uses nothing else in the crate).
//!
//! A large decoded record or shard piece is written once, front to back, into fresh memory.
//! With 4 KiB pages that is one page fault per 4 KiB (a third of the decoding time of a
//! 256 MiB record in profiles, more in a VM); with 2 MiB transparent huge pages, 512 times
//! fewer. `MADV_HUGEPAGE` asks for those where the system's policy is `madvise`.

/// Buffers from this size up are backed by transparent huge pages where the kernel allows it.
const HUGE_MIN: usize = 4 << 20;

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
    use std::io::{Error, ErrorKind};
    use std::os::fd::AsRawFd;
    let base = buf.len();
    let target = base
        .checked_add(len)
        .filter(|&t| t <= buf.capacity())
        .ok_or_else(|| Error::other("read_exact_at_into: no room reserved"))?;
    while buf.len() < target {
        let done = buf.len() - base;
        let at = offset
            .checked_add(done as u64)
            .and_then(|p| libc::off_t::try_from(p).ok())
            .ok_or_else(|| Error::new(ErrorKind::InvalidInput, "read offset overflows"))?;
        // SAFETY: the destination is the spare capacity of `buf`, [len, target), which is
        // allocated (checked above) and exclusively ours; pread writes at most
        // `target - len` bytes there.
        let n = unsafe {
            libc::pread(
                file.as_raw_fd(),
                buf.as_mut_ptr().add(buf.len()).cast(),
                target - buf.len(),
                at,
            )
        };
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
                format!("read of {len} bytes at {offset}: file ends after {done} bytes"),
            ));
        }
        // SAFETY: pread initialized the `n` (<= target - len) bytes after the old length.
        unsafe { buf.set_len(buf.len() + n as usize) };
    }
    Ok(())
}
