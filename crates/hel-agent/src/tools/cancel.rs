//! Cancelling file tools. A tool that may take long (a search through a
//! large tree, a read or edit of a huge file) runs on a blocking thread,
//! which cannot be stopped from outside: it checks a [`Cancel`] flag in its
//! loops instead, and makes its one visible change (the rename of a
//! replaced file) through [`Cancel::commit`], which never runs once
//! [`Cancel::cancel`] has returned. So when a run reports an instruction
//! interrupted, no write of it can land after.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The flag a blocking tool checks.
#[derive(Clone, Default)]
pub(crate) struct Cancel {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    /// Held while a commit runs, and to cancel: the two exclude each other.
    commit: Mutex<()>,
}

/// The tool was cancelled before it could finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cancelled")]
pub struct Cancelled;

impl Cancel {
    /// Cancel: once this returns, no [`Cancel::commit`] runs its action (one
    /// already running has finished).
    pub(crate) fn cancel(&self) {
        let _held = self.inner.commit.lock().unwrap_or_else(|p| p.into_inner());
        self.inner.cancelled.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// `Err(Cancelled)` once cancelled: for the `?` in a tool's loops.
    pub(crate) fn check(&self) -> Result<(), Cancelled> {
        if self.is_cancelled() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }

    /// Run `act` unless cancelled, excluding a concurrent cancel.
    pub(crate) fn commit<T>(&self, act: impl FnOnce() -> T) -> Result<T, Cancelled> {
        let _held = self.inner.commit.lock().unwrap_or_else(|p| p.into_inner());
        self.check()?;
        Ok(act())
    }
}

/// Cancels when dropped (when the future waiting for the tool is dropped).
struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Run `work` on a blocking thread. Dropping the returned future cancels
/// it: by the time the drop returns, `work` makes no further commit.
pub(crate) async fn blocking<T, F>(work: F) -> T
where
    F: FnOnce(&Cancel) -> T + Send + 'static,
    T: Send + 'static,
{
    let cancel = Cancel::default();
    let _guard = CancelOnDrop(cancel.clone());
    let task = tokio::task::spawn_blocking(move || work(&cancel));
    match task.await {
        Ok(v) => v,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[test]
    fn no_commit_after_cancel_returns() {
        let c = Cancel::default();
        assert_eq!(c.commit(|| 1), Ok(1));
        c.cancel();
        assert_eq!(c.commit(|| 2), Err(Cancelled));
        assert_eq!(c.check(), Err(Cancelled));
    }

    #[tokio::test]
    async fn dropping_the_future_cancels_the_blocking_work() {
        let commits = Arc::new(AtomicUsize::new(0));
        let seen = commits.clone();
        let work = blocking(move |cancel| {
            // A long loop that checks the flag, then commits.
            while !cancel.is_cancelled() {
                std::thread::sleep(Duration::from_millis(1));
            }
            let _ = cancel.commit(|| seen.fetch_add(1, Ordering::SeqCst));
        });
        let timed = tokio::time::timeout(Duration::from_millis(50), work).await;
        assert!(timed.is_err(), "the work ran until cancelled");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(commits.load(Ordering::SeqCst), 0);
    }
}
