//! Interrupts (Ctrl-C): whoever owns the process's signals calls
//! [`Interrupter::interrupt`]; the run's waits end at the next interrupt
//! after the point they started from. An interrupt cancels what is
//! running when it comes, nothing later: a wait counts only interrupts
//! after the ones it has seen, so an interactive prompt can cancel one
//! instruction and go on with the next.

use std::sync::Arc;

use tokio::sync::watch;

/// The sending side. Clones send on the same channel (the signal handler
/// and a question asked in raw mode, where Ctrl-C is a key, not a signal).
#[derive(Clone)]
pub struct Interrupter {
    tx: Arc<watch::Sender<u64>>,
}

/// The receiving side: counts interrupts.
#[derive(Clone)]
pub struct Interrupts {
    rx: watch::Receiver<u64>,
}

/// A connected pair.
pub fn channel() -> (Interrupter, Interrupts) {
    let (tx, rx) = watch::channel(0);
    (Interrupter { tx: Arc::new(tx) }, Interrupts { rx })
}

impl Interrupter {
    pub fn interrupt(&self) {
        self.tx.send_modify(|n| *n += 1);
    }
}

impl Interrupts {
    /// Interrupts so far.
    pub fn count(&self) -> u64 {
        *self.rx.borrow()
    }

    /// Wait for an interrupt after the first `seen`. Never returns when
    /// the sending side is gone.
    pub async fn after(&self, seen: u64) {
        let mut rx = self.rx.clone();
        loop {
            if *rx.borrow_and_update() > seen {
                return;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_for_an_interrupt_after_the_ones_seen() {
        let (tx, rx) = channel();
        tx.interrupt();
        let seen = rx.count();
        assert_eq!(seen, 1);
        let wait = rx.after(seen);
        tokio::pin!(wait);
        assert!(futures_poll_once(wait.as_mut()).await.is_none());
        tx.interrupt();
        wait.await;
        rx.after(0).await;
    }

    async fn futures_poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            v = f => Some(v),
            _ = std::future::ready(()) => None,
        }
    }
}
