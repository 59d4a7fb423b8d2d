//! Crash points: where tests kill the process to see what a crash there leaves on disk.
//!
//! Built with the `crash-points` feature, and with `KILN_CRASH_AT_WRITE=N` in the environment,
//! the process kills itself with SIGKILL just before its Nth durable write: a file renamed
//! into place ([`crate::write_atomic`], a Parquet part, a manifest) or a staged run published
//! ([`crate::RunStore::publish`]). Counting writes rather than time puts every kill exactly
//! where a test asks: it counts an operation's writes ([`writes`]) and kills the operation
//! before the ones it chooses. Without the feature (every build but tests') a crash point does
//! nothing, and no environment variable can stop kiln.

/// The environment variable naming the write the process dies before (from 1).
pub const CRASH_AT_WRITE: &str = "KILN_CRASH_AT_WRITE";

#[cfg(feature = "crash-points")]
static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many durable writes this process has begun: a test measures an operation's writes as
/// the difference before and after it, to choose where to kill it.
#[cfg(feature = "crash-points")]
#[must_use]
pub fn writes() -> u64 {
    WRITES.load(std::sync::atomic::Ordering::SeqCst)
}

/// A durable write is about to happen: with the `crash-points` feature, the process dies here
/// by SIGKILL when it is the write [`CRASH_AT_WRITE`] names.
#[cfg(feature = "crash-points")]
pub(crate) fn before_write() {
    use std::sync::OnceLock;
    use std::sync::atomic::Ordering;
    static TARGET: OnceLock<Option<u64>> = OnceLock::new();
    let this = WRITES.fetch_add(1, Ordering::SeqCst) + 1;
    let target = *TARGET.get_or_init(|| {
        std::env::var(CRASH_AT_WRITE)
            .ok()
            .and_then(|n| n.trim().parse().ok())
    });
    if target == Some(this) {
        // SIGKILL, as `kill -9` from outside: no destructor, no flush, no unwinding. The
        // workspace forbids `unsafe`, so `kill(2)` comes from the `kill` program; the process
        // dies while it waits for it. Abort is the backstop where `kill` cannot run.
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &std::process::id().to_string()])
            .status();
        std::process::abort();
    }
}

/// A durable write is about to happen (this build has no crash points).
#[cfg(not(feature = "crash-points"))]
#[inline]
pub(crate) fn before_write() {}
