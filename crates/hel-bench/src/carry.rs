//! The benchmark workloads' bookkeeping of which messages are unchanged
//! since the last commit (positions), which each store under test turns
//! into what it needs: hel-store into leaves, JSONL into what to append.

/// `messages[at..at + len]` equal the last checkpoint's `[from..from + len]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Carry {
    pub at: usize,
    pub from: usize,
    pub len: usize,
}

/// The runs of a conversation carried over from the last checkpoint,
/// sorted by `at`, non-overlapping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Carried {
    runs: Vec<Carry>,
}

impl Carried {
    /// Nothing carried (a new session, or after a failed load).
    pub fn none() -> Carried {
        Carried::default()
    }

    /// The first `n` messages are those of the last checkpoint.
    pub fn prefix(n: usize) -> Carried {
        Carried {
            runs: if n > 0 {
                vec![Carry {
                    at: 0,
                    from: 0,
                    len: n,
                }]
            } else {
                Vec::new()
            },
        }
    }

    /// Explicit runs (sorted, non-overlapping).
    pub fn from_runs(mut runs: Vec<Carry>) -> Carried {
        runs.retain(|r| r.len > 0);
        runs.sort_by_key(|r| r.at);
        Carried { runs }
    }

    pub fn runs(&self) -> &[Carry] {
        &self.runs
    }

    /// The old position of new position `i`, if carried.
    pub fn source(&self, i: usize) -> Option<usize> {
        self.runs
            .iter()
            .find(|r| r.at <= i && i < r.at + r.len)
            .map(|r| r.from + (i - r.at))
    }

    /// Length of the carried prefix (messages `0..n` are `0..n` of the checkpoint).
    pub fn prefix_len(&self) -> usize {
        match self.runs.first() {
            Some(r) if r.at == 0 && r.from == 0 => r.len,
            _ => 0,
        }
    }

    /// The conversation was cut to `len` messages.
    pub fn truncate(&mut self, len: usize) {
        self.runs.retain(|r| r.at < len);
        for r in &mut self.runs {
            r.len = r.len.min(len - r.at);
        }
    }

    /// Message `i` was changed in place.
    pub fn modify(&mut self, i: usize) {
        let mut out = Vec::with_capacity(self.runs.len() + 1);
        for r in &self.runs {
            if i < r.at || i >= r.at + r.len {
                out.push(*r);
                continue;
            }
            let before = i - r.at;
            if before > 0 {
                out.push(Carry {
                    at: r.at,
                    from: r.from,
                    len: before,
                });
            }
            let after = r.len - before - 1;
            if after > 0 {
                out.push(Carry {
                    at: i + 1,
                    from: r.from + before + 1,
                    len: after,
                });
            }
        }
        self.runs = out;
    }

    /// `messages[start..end]` were replaced by `with` new messages.
    pub fn splice(&mut self, start: usize, end: usize, with: usize) {
        let mut out = Vec::with_capacity(self.runs.len() + 1);
        for r in &self.runs {
            let (a, b) = (r.at, r.at + r.len);
            if a < start {
                let len = b.min(start) - a;
                out.push(Carry {
                    at: a,
                    from: r.from,
                    len,
                });
            }
            if b > end {
                let first = a.max(end);
                out.push(Carry {
                    at: first - end + start + with,
                    from: r.from + (first - a),
                    len: b - first,
                });
            }
        }
        self.runs = out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(at: usize, from: usize, len: usize) -> Carry {
        Carry { at, from, len }
    }

    #[test]
    fn bookkeeping() {
        let mut c = Carried::prefix(10);
        c.modify(3);
        assert_eq!(c.runs(), [run(0, 0, 3), run(4, 4, 6)]);
        // Compaction: [1..7) becomes one summary message.
        c.splice(1, 7, 1);
        assert_eq!(c.runs(), [run(0, 0, 1), run(2, 7, 3)]);
        assert_eq!(c.source(2), Some(7));
        assert_eq!(c.source(1), None);
        assert_eq!(c.prefix_len(), 1);
        c.truncate(3);
        assert_eq!(c.runs(), [run(0, 0, 1), run(2, 7, 1)]);
        c.truncate(1);
        assert_eq!(c.runs(), [run(0, 0, 1)]);
    }
}
