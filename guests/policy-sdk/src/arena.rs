//! A bump allocator for policy guests: the host throws every guest instance
//! away after one call, so memory freed during a decision is never needed
//! again and a general-purpose allocator's bookkeeping is wasted work.
//!
//! The SDK installs [`DecisionArena`] as the global allocator when its
//! `arena` feature is on (the default). A guest that keeps one instance for
//! many calls, or frees and reallocates far more than it keeps, should turn
//! the feature off and get Rust's default allocator back.
//!
//! Memory comes first from a zero-initialised static buffer of
//! [`STATIC_ARENA_BYTES`], which the linker places in the guest's initial
//! memory, so a typical decision never calls `memory.grow` (growing memory
//! costs the host a page-protection change on every instantiation). Past it,
//! memory comes from `memory.grow` in chunks of at least four pages (256 KiB);
//! never from the region the linker left for libc's own `malloc`. A `dealloc`
//! or `realloc` of the most recent allocation is done in place, which covers
//! the common `Vec`/`String` growth pattern; anything else stays in the arena
//! until the instance is dropped. The host's per-decision memory cap bounds
//! the total.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::ptr;

/// Bytes served from the static buffer before the arena grows memory: a
/// default-policy decision on a template with a few dozen resources uses a
/// small fraction of it; pages never touched cost nothing.
pub const STATIC_ARENA_BYTES: usize = 256 << 10;

/// The static buffer; `UnsafeCell` so the arena can hand out its bytes.
#[repr(C, align(16))]
struct StaticBuffer(std::cell::UnsafeCell<[u8; STATIC_ARENA_BYTES]>);

// SAFETY: a wasm32 guest has one thread.
unsafe impl Sync for StaticBuffer {}

static STATIC_BUFFER: StaticBuffer =
    StaticBuffer(std::cell::UnsafeCell::new([0; STATIC_ARENA_BYTES]));

/// A wasm page.
const PAGE: usize = 64 * 1024;
/// Fewest pages asked of the host at a time (256 KiB): each `memory.grow`
/// is a call into the host, untouched pages cost nothing.
const MIN_GROW_PAGES: usize = 4;

/// The bump allocator; see the module documentation. The SDK installs it
/// for you (feature `arena`); name it only to install it yourself in a guest
/// that does not use the SDK's `arena` feature:
/// `#[global_allocator] static A: DecisionArena = DecisionArena::new();`.
pub struct DecisionArena {
    /// Next free byte.
    next: Cell<usize>,
    /// One past the last byte this arena owns.
    end: Cell<usize>,
}

// SAFETY: a wasm32 guest has one thread; nothing here is shared across threads.
unsafe impl Sync for DecisionArena {}

impl DecisionArena {
    /// An arena that owns nothing yet: the first allocation takes the static
    /// buffer. `const`, so that it can initialise a `static`.
    pub const fn new() -> Self {
        Self {
            next: Cell::new(0),
            end: Cell::new(0),
        }
    }

    /// Start on the static buffer (first allocation only).
    #[cold]
    fn start(&self) {
        let start = STATIC_BUFFER.0.get() as usize;
        self.next.set(start);
        self.end.set(start + STATIC_ARENA_BYTES);
    }

    /// Grow linear memory so that `[start, start + size)` is owned by the
    /// arena, where `start` is `next` aligned to `align`. Null if the host
    /// refuses (the memory cap).
    #[cold]
    fn grow(&self, size: usize, align: usize) -> *mut u8 {
        let pages = size.div_ceil(PAGE).saturating_add(1).max(MIN_GROW_PAGES);
        let previous = grow_memory(pages);
        if previous == usize::MAX {
            return ptr::null_mut();
        }
        let fresh = previous * PAGE;
        // Memory grown now is contiguous with what the arena owned if
        // nothing else grew memory since; otherwise start afresh.
        let start_region = if self.end.get() == fresh {
            self.next.get()
        } else {
            fresh
        };
        self.end.set(fresh + pages * PAGE);
        let start = align_up(start_region, align);
        let Some(stop) = start.checked_add(size) else {
            return ptr::null_mut();
        };
        if stop > self.end.get() {
            return ptr::null_mut();
        }
        self.next.set(stop);
        start as *mut u8
    }
}

impl Default for DecisionArena {
    fn default() -> Self {
        Self::new()
    }
}

fn align_up(address: usize, align: usize) -> usize {
    (address + align - 1) & !(align - 1)
}

#[cfg(target_arch = "wasm32")]
fn grow_memory(pages: usize) -> usize {
    core::arch::wasm32::memory_grow(0, pages)
}

/// Off wasm (the SDK's own unit tests) the arena is never installed; this
/// keeps the crate compiling for the host target.
#[cfg(not(target_arch = "wasm32"))]
fn grow_memory(_pages: usize) -> usize {
    usize::MAX
}

unsafe impl GlobalAlloc for DecisionArena {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if self.end.get() == 0 {
            self.start();
        }
        let start = align_up(self.next.get(), layout.align());
        match start.checked_add(layout.size()) {
            Some(stop) if stop <= self.end.get() => {
                self.next.set(stop);
                start as *mut u8
            }
            _ => self.grow(layout.size(), layout.align()),
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // Memory the arena hands out for the first time is fresh from
        // `memory.grow` and therefore zero, but a block given back by
        // `dealloc` and handed out again is not: always clear.
        let block = unsafe { self.alloc(layout) };
        if !block.is_null() {
            unsafe { ptr::write_bytes(block, 0, layout.size()) };
        }
        block
    }

    #[inline]
    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // Only the most recent allocation can be given back.
        if block as usize + layout.size() == self.next.get() {
            self.next.set(block as usize);
        }
    }

    #[inline]
    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let start = block as usize;
        if start + layout.size() == self.next.get() {
            // The most recent allocation grows or shrinks in place.
            if let Some(stop) = start.checked_add(new_size)
                && stop <= self.end.get()
            {
                self.next.set(stop);
                return block;
            }
        } else if new_size <= layout.size() {
            return block;
        }
        // SAFETY: the caller guarantees `layout.align()` with `new_size` is a
        // valid layout (GlobalAlloc::realloc's contract).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        let moved = unsafe { self.alloc(new_layout) };
        if !moved.is_null() {
            unsafe {
                ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
            }
        }
        moved
    }
}
