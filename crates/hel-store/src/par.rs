//! Many small, independent reads on a few threads: a delete's look at
//! other heads, a listing's stat of every session. Each item costs a
//! handful of system calls, so the time is the kernel's and shares well
//! across cores; short lists stay on the calling thread.

use crate::Result;

/// Start `f` on a thread of `scope`: the one place the store starts
/// threads, so that each caller handles a failure (a process or container
/// limit on threads, or the `thread-spawn` failpoint) by doing the work on
/// its own thread instead of panicking as `Scope::spawn` would.
pub(crate) fn spawn_scoped<'scope, 'env, T, F>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    f: F,
) -> std::io::Result<std::thread::ScopedJoinHandle<'scope, T>>
where
    F: FnOnce() -> T + Send + 'scope,
    T: Send + 'scope,
{
    if crate::failpoint::hit("thread-spawn") {
        return Err(crate::failpoint::error("thread-spawn"));
    }
    std::thread::Builder::new().spawn_scoped(scope, f)
}

/// Below this many items the work stays on the calling thread.
const SERIAL_BELOW: usize = 64;

/// Threads at most (each item is latency-bound, not CPU-bound).
const THREADS_MAX: usize = 4;

/// `f` of every item, in the items' order; the first error (in that
/// order) is the result. A panic in `f` is passed on.
pub(crate) fn map<T, R, F>(items: &[T], f: F) -> Result<Vec<R>>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> Result<R> + Sync,
{
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, THREADS_MAX);
    if items.len() < SERIAL_BELOW || threads == 1 {
        return items.iter().map(&f).collect();
    }
    let chunk = items.len().div_ceil(threads).max(1);
    let f = &f;
    std::thread::scope(|scope| {
        // A part no thread could be started for (a process or container
        // limit) is done on this thread, in its turn.
        let workers: Vec<_> = items
            .chunks(chunk)
            .map(|part| {
                spawn_scoped(scope, move || {
                    part.iter().map(f).collect::<Result<Vec<R>>>()
                })
                .map_err(|_| part)
            })
            .collect();
        let mut out = Vec::with_capacity(items.len());
        for w in workers {
            out.extend(match w {
                Ok(w) => w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?,
                Err(part) => part.iter().map(f).collect::<Result<Vec<R>>>()?,
            });
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn keeps_order_and_returns_the_first_error() {
        for n in [0, 1, 63, 64, 65, 1000] {
            let items: Vec<usize> = (0..n).collect();
            let out = map(&items, |i| Ok(i * 2)).expect("no error");
            assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        }
        let items: Vec<usize> = (0..1000).collect();
        let got = map(&items, |i| {
            if *i == 300 || *i == 900 {
                Err(Error::Internal(format!("item {i}")))
            } else {
                Ok(*i)
            }
        });
        match got {
            Err(Error::Internal(m)) => assert_eq!(m, "item 300"),
            other => panic!("expected the first error, got {other:?}"),
        }
    }
}
