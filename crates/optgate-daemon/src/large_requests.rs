//! The daemon's slots for reading long request lines: a fixed number shared by every
//! connection of the process, taken by the server and counted by `status`.

/// Request lines longer than the server's `SMALL_REQUEST_BYTES` (up to `MAX_REQUEST_BYTES`)
/// read at once: 16, so clients can pin at most 16 MiB of large requests; the others wait
/// for a slot within their `REQUEST_TIMEOUT`.
pub const MAX_LARGE_REQUESTS: usize = 16;

/// The slots of [`MAX_LARGE_REQUESTS`], shared by every connection of this process.
static SLOTS: std::sync::LazyLock<tokio::sync::Semaphore> =
    std::sync::LazyLock::new(|| tokio::sync::Semaphore::new(MAX_LARGE_REQUESTS));

/// Waits for a slot; it is free again when the permit is dropped.
pub async fn take() -> Option<tokio::sync::SemaphorePermit<'static>> {
    SLOTS.acquire().await.ok()
}

/// How many of the [`MAX_LARGE_REQUESTS`] slots are held now (shown by `status`).
pub fn reading() -> usize {
    MAX_LARGE_REQUESTS - SLOTS.available_permits()
}
