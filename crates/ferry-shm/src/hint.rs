//! Cache hints for the lines a writer is about to fill.

/// Asks for the cache line at `p` in exclusive state ahead of a write
/// (`prefetchw`): the line another process last read is fetched while this
/// thread does other work, instead of when the write has to drain. Only a
/// hint: no effect on memory contents or ordering; a no-op off x86-64.
#[inline]
pub(crate) fn prefetch_for_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetchw never faults (not even on an unmapped address) and
    // changes no architectural state but the cache.
    unsafe {
        std::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, readonly, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
