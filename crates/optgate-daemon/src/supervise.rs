//! The engine task's supervisor. An engine that panics (a bug, an invariant that broke)
//! must not leave a daemon whose socket still answers `status` while nothing moves: it is
//! started again (its state is all in the database, and a new engine reconciles first),
//! and if it keeps dying the whole daemon stops, loudly, with the reason.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::DaemonError;

/// How many times the engine may die within [`RESTART_WINDOW`] and be started again; one
/// more and the daemon stops with [`DaemonError::EngineDied`].
pub const MAX_RESTARTS: u32 = 3;

/// The window in which engine deaths are counted: deaths further apart are separate
/// accidents, each restarted.
pub const RESTART_WINDOW: Duration = Duration::from_secs(600);

/// The pause before a restart, so a crash loop does not spin.
pub const RESTART_DELAY: Duration = Duration::from_millis(500);

/// Runs `start()`'s task until it returns (at shutdown), starting it again when it
/// panics, at most [`MAX_RESTARTS`] times within [`RESTART_WINDOW`]. Past that it cancels
/// `shutdown` (so the server and every other task stop too) and returns the last panic.
pub async fn supervise<F, Fut>(
    name: &'static str,
    start: F,
    shutdown: CancellationToken,
    delay: Duration,
) -> Result<(), DaemonError>
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut deaths: Vec<std::time::Instant> = Vec::new();
    loop {
        let outcome = tokio::spawn(start()).await;
        let Err(e) = outcome else {
            return Ok(());
        };
        let message = panic_message(e);
        let now = std::time::Instant::now();
        deaths.retain(|t| now.duration_since(*t) < RESTART_WINDOW);
        deaths.push(now);
        if shutdown.is_cancelled() {
            tracing::error!("{name} died while the daemon was stopping: {message}");
            return Ok(());
        }
        if deaths.len() as u32 > MAX_RESTARTS {
            tracing::error!(
                "{name} died {} times within {:?}; stopping the daemon. Last: {message}",
                deaths.len(),
                RESTART_WINDOW
            );
            shutdown.cancel();
            return Err(DaemonError::EngineDied {
                task: name,
                deaths: deaths.len() as u32,
                message,
            });
        }
        tracing::error!("{name} died ({message}); starting it again");
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

fn panic_message(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_string()),
        Err(e) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn an_engine_that_dies_once_is_started_again() {
        let starts = Arc::new(AtomicU32::new(0));
        let shutdown = CancellationToken::new();
        let (s, stop) = (starts.clone(), shutdown.clone());
        let result = supervise(
            "engine",
            move || {
                let (s, stop) = (s.clone(), stop.clone());
                async move {
                    if s.fetch_add(1, Ordering::SeqCst) == 0 {
                        panic!("an invariant broke");
                    }
                    // The second engine runs until the daemon stops.
                    stop.cancel();
                }
            },
            shutdown.clone(),
            Duration::from_millis(1),
        )
        .await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(starts.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_engine_that_keeps_dying_stops_the_daemon_with_the_reason() {
        let starts = Arc::new(AtomicU32::new(0));
        let shutdown = CancellationToken::new();
        let s = starts.clone();
        let result = supervise(
            "engine",
            move || {
                let s = s.clone();
                async move {
                    s.fetch_add(1, Ordering::SeqCst);
                    panic!("the store is corrupt");
                }
            },
            shutdown.clone(),
            Duration::from_millis(1),
        )
        .await;
        let e = result.unwrap_err().to_string();
        assert!(
            e.contains("the store is corrupt") && e.contains("4 times"),
            "{e}"
        );
        assert_eq!(starts.load(Ordering::SeqCst), MAX_RESTARTS + 1);
        assert!(shutdown.is_cancelled(), "the server must stop too");
    }
}
