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
