//! Many small, independent pieces of work on a few threads: a delete's
//! look at other heads, a listing's stat of every session and parse of
//! its summary index, gc's unlinks. Each item costs a handful of system
//! calls or a short parse, so it shares well across cores; short lists
//! stay on the calling thread. Also the one place the store starts a
//! thread ([`spawn_scoped`]).

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

/// Threads the store's parallel work uses: one per core (2 when the
/// count cannot be read), at most [`THREADS_MAX`].
pub(crate) fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, THREADS_MAX)
}

/// `f` of every item, in the items' order, on a few threads when there
/// are many items. A panic in `f` is passed on. A fallible `f` collects
/// into `Result<Vec<_>>`: the first error in the items' order.
pub(crate) fn map<T, R, F>(items: &[T], f: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> R + Sync,
{
    let threads = threads();
    if items.len() < SERIAL_BELOW || threads == 1 {
        return items.iter().map(&f).collect();
    }
    parts(items, threads, |part| {
        part.iter().map(&f).collect::<Vec<R>>()
    })
    .into_iter()
    .flatten()
    .collect()
}

/// `f` of each of `threads` consecutive parts of `items` (fewer when
/// there are fewer items), in order, each on a thread of its own; a part
/// no thread could be started for (a process or container limit) is done
/// on this thread, in its turn. A panic in `f` is passed on.
pub(crate) fn parts<T, R, F>(items: &[T], threads: usize, f: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(&[T]) -> R + Sync,
{
    let chunk = items.len().div_ceil(threads.max(1)).max(1);
    let f = &f;
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .chunks(chunk)
            .map(|part| spawn_scoped(scope, move || f(part)).map_err(|_| part))
            .collect();
        workers
            .into_iter()
            .map(|w| match w {
                Ok(w) => w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                Err(part) => f(part),
            })
            .collect()
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
            let out = map(&items, |i| i * 2);
            assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        }
        let items: Vec<usize> = (0..1000).collect();
        let got: crate::Result<Vec<usize>> = map(&items, |i| {
            if *i == 300 || *i == 900 {
                Err(Error::Internal(format!("item {i}")))
            } else {
                Ok(*i)
            }
        })
        .into_iter()
        .collect();
        match got {
            Err(Error::Internal(m)) => assert_eq!(m, "item 300"),
            other => panic!("expected the first error, got {other:?}"),
        }
    }

    #[test]
    fn parts_cover_the_items_in_order_in_at_most_so_many_parts() {
        for (n, threads) in [(0, 4), (1, 4), (3, 4), (5, 4), (1000, 4), (7, 1), (7, 0)] {
            let items: Vec<usize> = (0..n).collect();
            let got = parts(&items, threads, <[usize]>::to_vec);
            assert!(got.len() <= threads.max(1), "{n} items, {threads}: {got:?}");
            assert!(got.iter().all(|p| !p.is_empty()), "{n}, {threads}");
            assert_eq!(got.concat(), items, "{n} items, {threads} threads");
        }
    }
}
