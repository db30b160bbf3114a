//! Unit-test support: the test build's global allocator counts what each thread has allocated,
//! so a test can measure the memory a piece of code takes (and check a price against it) while
//! other tests run in other threads.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting per thread.
struct Counting;

thread_local! {
    /// Bytes this thread has allocated and not freed (frees from other threads are not seen).
    static NOW: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

fn count(delta: i64) {
    // `try_with`: during thread teardown the counters may be gone; nothing is counted then.
    let _ = NOW.try_with(|now| {
        let value = now.get() + delta;
        now.set(value);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(value)));
    });
}

/// What an allocation of `layout` takes from malloc: its size rounded up to 16 bytes, plus an
/// 8-byte header, and 32 bytes at least.
fn chunk(layout: Layout) -> i64 {
    ((layout.size() + 8).next_multiple_of(16)).max(32) as i64
}

// SAFETY: every call is forwarded unchanged to `System`; the counting touches only
// const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(chunk(layout));
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-chunk(layout));
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Counted as a fresh allocation beside the old one, then the old one freed: the copy
        // a move takes at its peak.
        let new_layout = Layout::from_size_align(new_size, layout.align()).unwrap_or(layout);
        count(chunk(new_layout));
        // SAFETY: the caller's contract for `realloc`, passed on.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        count(-chunk(layout));
        moved
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Bytes this thread holds now.
pub fn allocated_now() -> u64 {
    NOW.with(Cell::get).max(0) as u64
}

/// Starts measuring this thread's peak from what it holds now.
pub fn reset_peak() {
    PEAK.with(|peak| peak.set(NOW.with(Cell::get)));
}

/// The most this thread has held since [`reset_peak`].
pub fn peak_allocated() -> u64 {
    PEAK.with(Cell::get).max(0) as u64
}
