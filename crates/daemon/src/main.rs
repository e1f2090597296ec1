//! The `tablekeeper` binary; everything lives in the library so tests can reach it. It owns
//! the process's allocator: jemalloc, configured so a replica's resident memory follows what
//! it holds (BENCHMARKS.md, "Idle RSS at 10,000 tables: jemalloc with two arenas").

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read when it starts (the symbol `malloc_conf` under the crate's
/// `_rjem_` prefix); `_RJEM_MALLOC_CONF` in the environment overrides any of them.
/// - `narenas:2`: two arenas, not four per core. A large first probe round runs on every
///   runtime thread; with an arena each, the memory freed after it is spread over them all.
/// - `background_thread:true`, `dirty_decay_ms:1000`, `muzzy_decay_ms:0`: a background thread
///   returns pages freed a second ago to the system, so an idle replica gives back what its
///   last busy moment used (without it, jemalloc purges only when the process allocates).
#[cfg(not(target_env = "msvc"))]
#[expect(
    unsafe_code,
    reason = "jemalloc reads its options from an exported C symbol"
)]
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: &[u8; 70] =
    b"narenas:2,background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

fn main() -> std::process::ExitCode {
    tablekeeper::main()
}
