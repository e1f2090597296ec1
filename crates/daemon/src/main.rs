//! The `tablekeeper` binary; everything lives in the library so tests can reach it.

/// jemalloc instead of the system allocator: glibc's malloc keeps the pages of memory the
/// process freed (loading a 10,000-table inventory peaks at ~275 MB of parse tree that is
/// dropped right after, BENCHMARKS.md), so a replica's RSS would carry its peak for ever;
/// jemalloc's background threads hand freed pages back to the OS within seconds.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    tablekeeper::main()
}
