//! The table of issue 24's targets (and issue 21's commit and listing
//! figures) that a run prints last: each figure, what this run measured,
//! its yardstick from the same run, the ratio, the target, and whether it
//! was met. A figure the run did not measure (`--only`, a store skipped)
//! says so instead of being left out.

use crate::run::Row;
use crate::workspace::Results as Ws;

/// Syncs per commit: hel-store's (the journal's `fdatasync`, the
/// new ref file's and `refs/sessions/`'s `fsync`; counted by hel-store's
/// test `a_commit_costs_three_syncs`) and SQLite's in WAL mode with
/// `synchronous=FULL` (the WAL's one sync per transaction, between
/// checkpoints).
pub const HEL_SYNCS: f64 = 3.0;
pub const SQLITE_SYNCS: f64 = 1.0;

/// One line of the table.
struct Line {
    figure: String,
    measured: String,
    yardstick: String,
    ratio: Option<f64>,
    target: String,
    /// None: nothing to judge (a figure reported, or not measured).
    met: Option<bool>,
}

impl Line {
    fn new(figure: impl Into<String>, target: impl Into<String>) -> Line {
        Line {
            figure: figure.into(),
            measured: "not measured in this run".into(),
            yardstick: String::new(),
            ratio: None,
            target: target.into(),
            met: None,
        }
    }

    /// `measured` against `yardstick`, met when the ratio is at most `max`.
    fn ratio(mut self, measured: String, yardstick: String, ratio: f64, max: f64) -> Line {
        self.measured = measured;
        self.yardstick = yardstick;
        self.ratio = Some(ratio);
        self.met = Some(ratio <= max);
        self
    }

    /// `measured` against `yardstick`, told as a figure that is no target.
    fn info(mut self, measured: String, yardstick: String, ratio: f64) -> Line {
        self.measured = measured;
        self.yardstick = yardstick;
        self.ratio = Some(ratio);
        self
    }
}

fn find<'a>(rows: &'a [Row], store: &str, workload: &str, n: Option<usize>) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.store == store && r.workload == workload && n.is_none_or(|n| r.n == n) && r.commits > 0
    })
}

fn ms(t: f64) -> String {
    if t >= 100.0 {
        format!("{t:.0} ms")
    } else {
        format!("{t:.1} ms")
    }
}

fn us(t: u64) -> String {
    let s = t.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    format!("{out} µs")
}

fn mb(b: u64) -> String {
    format!("{:.1} MB", b as f64 / 1_048_576.0)
}

/// `t` ms, with the bytes read when counted.
fn ms_read(t: f64, read: Option<u64>) -> String {
    match read {
        Some(b) => format!("{}, {} read", ms(t), mb(b)),
        None => ms(t),
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    a / b.max(1e-9)
}

/// The commit lines: per sync against SQLite at every grow size, against
/// JSONL (reported), flat in n, and the CPU part on tmpfs.
fn commits(rows: &[Row], out: &mut Vec<Line>) {
    let mut sizes: Vec<usize> = rows
        .iter()
        .filter(|r| r.workload == "grow" && r.store == "hel-store" && r.commits > 0)
        .map(|r| r.n)
        .collect();
    sizes.sort_unstable();
    if sizes.is_empty() {
        out.push(Line::new(
            "commit p50 per sync made (hel 3, SQLite 1), grow",
            "≤ 2× SQLite's",
        ));
    }
    for &n in &sizes {
        let h = find(rows, "hel-store", "grow", Some(n));
        let q = find(rows, "sqlite", "grow", Some(n));
        let mut l = Line::new(
            format!("commit p50 per sync made, grow n={n} (hel {HEL_SYNCS} syncs, SQLite {SQLITE_SYNCS})"),
            "≤ 2×",
        );
        if let (Some(h), Some(q)) = (h, q) {
            let hs = h.commit_p50_us as f64 / HEL_SYNCS;
            let qs = q.commit_p50_us as f64 / SQLITE_SYNCS;
            l = l.ratio(
                format!(
                    "{} ({} per sync)",
                    us(h.commit_p50_us),
                    us(hs.round() as u64)
                ),
                format!("SQLite {}", us(q.commit_p50_us)),
                ratio(hs, qs),
                2.0,
            );
        }
        out.push(l);
    }
    for &n in &sizes {
        let (Some(h), Some(j)) = (
            find(rows, "hel-store", "grow", Some(n)),
            find(rows, "jsonl", "grow", Some(n)),
        ) else {
            continue;
        };
        out.push(Line {
            figure: format!(
                "commit p50, grow n={n}, against the JSONL append (issue 21: reported)"
            ),
            measured: us(h.commit_p50_us),
            yardstick: format!("JSONL {}", us(j.commit_p50_us)),
            ratio: Some(ratio(h.commit_p50_us as f64, j.commit_p50_us as f64)),
            target: String::new(),
            met: None,
        });
    }
    let mut flat = Line::new(
        "commit p50 flat in n: largest grow n against the smallest",
        "≤ 1.5×",
    );
    if let (Some(&lo), Some(&hi)) = (sizes.first(), sizes.last()) {
        if lo != hi {
            let h0 = find(rows, "hel-store", "grow", Some(lo));
            let h1 = find(rows, "hel-store", "grow", Some(hi));
            if let (Some(h0), Some(h1)) = (h0, h1) {
                let sq = match (
                    find(rows, "sqlite", "grow", Some(lo)),
                    find(rows, "sqlite", "grow", Some(hi)),
                ) {
                    (Some(a), Some(b)) => format!(
                        "n={lo}: {}; SQLite's own: {:.2}×",
                        us(h0.commit_p50_us),
                        ratio(b.commit_p50_us as f64, a.commit_p50_us as f64)
                    ),
                    _ => format!("n={lo}: {}", us(h0.commit_p50_us)),
                };
                flat = flat.ratio(
                    format!("n={hi}: {}", us(h1.commit_p50_us)),
                    sq,
                    ratio(h1.commit_p50_us as f64, h0.commit_p50_us as f64),
                    1.5,
                );
            }
        }
    }
    out.push(flat);
    let t = rows
        .iter()
        .find(|r| r.workload == "tmpfs" && r.store == "hel-store")
        .map_or(0, |r| r.n);
    let mut cpu = Line::new(
        format!("commit p50 on tmpfs (the CPU part), grow n={t}"),
        "≤ 1.5× SQLite's",
    );
    // The floor the card sets: no store that compresses with zstd, as the
    // card's does, commits for less than this.
    let mut floor = Line::new(
        format!("  of which zstd level 3 of each commit's new messages alone, tmpfs n={t}"),
        "(the card's compression)",
    );
    if let (Some(h), Some(q)) = (
        find(rows, "hel-store", "tmpfs", None),
        find(rows, "sqlite", "tmpfs", None),
    ) {
        let sqlite = q.commit_p50_us as f64;
        cpu = cpu.ratio(
            us(h.commit_p50_us),
            format!("SQLite {}", us(q.commit_p50_us)),
            ratio(h.commit_p50_us as f64, sqlite),
            1.5,
        );
        floor = floor.info(
            us(h.new_zstd_p50_us),
            format!("SQLite {}", us(q.commit_p50_us)),
            ratio(h.new_zstd_p50_us as f64, sqlite),
        );
    }
    out.push(cpu);
    out.push(floor);
}

/// The resume lines: 1,000 and 10,000 messages against SQLite and the flat
/// file; the 200-message session of the many store against SQLite.
fn resumes(rows: &[Row], out: &mut Vec<Line>) {
    for n in [1_000, 10_000] {
        let h = find(rows, "hel-store", "grow", Some(n));
        let mut l = Line::new(format!("resume, {n} messages, against SQLite"), "≤ 1.0×");
        if let (Some(h), Some(q)) = (h, find(rows, "sqlite", "grow", Some(n))) {
            l = l.ratio(
                ms(h.resume_ms),
                format!("SQLite {}", ms(q.resume_ms)),
                ratio(h.resume_ms, q.resume_ms),
                1.0,
            );
        }
        out.push(l);
        let mut l = Line::new(
            format!("resume, {n} messages, against one flat JSON file"),
            "≤ 1.2×",
        );
        if let Some(h) = h {
            l = l.ratio(
                ms(h.resume_ms),
                format!("flat JSON {}", ms(h.flat_resume_ms)),
                ratio(h.resume_ms, h.flat_resume_ms),
                1.2,
            );
        }
        out.push(l);
    }
    let h = find(rows, "hel-store", "many", None);
    let mut l = Line::new(
        format!(
            "resume of a 200-message session in a {}-session store, against SQLite",
            h.map_or(0, |h| h.n)
        ),
        "≤ 1.0×",
    );
    if let (Some(h), Some(q)) = (h, find(rows, "sqlite", "many", None)) {
        l = l.ratio(
            ms(h.resume_ms),
            format!("SQLite {}", ms(q.resume_ms)),
            ratio(h.resume_ms, q.resume_ms),
            1.0,
        );
    }
    out.push(l);
}

/// fsck, search, gc and delete.
fn maintenance(rows: &[Row], out: &mut Vec<Line>) {
    let f = rows
        .iter()
        .find(|r| r.store == "hel-store" && r.fsck_ms.is_some());
    let mut l = Line::new(
        format!(
            "fsck of grow n={} against reading, checking, decompressing, hashing and parsing every record once",
            f.map_or(0, |f| f.n)
        ),
        "≤ 1.3×",
    );
    if let Some(f) = f {
        if let Some((a, b)) = f.fsck_ms.zip(f.fsck_baseline_ms) {
            l = l.ratio(
                ms_read(a, f.fsck_read_bytes),
                format!("yardstick {}", ms_read(b, f.fsck_baseline_read_bytes)),
                ratio(a, b),
                1.3,
            );
        }
    }
    out.push(l);
    let h = find(rows, "hel-store", "many", None);
    let q = find(rows, "sqlite", "many", None);
    let n = h.map_or(0, |h| h.n);
    let mut l = Line::new(
        format!("search of every stored message of the {n}-session store against decoding its objects once"),
        "≤ 1.3×",
    );
    if let Some((a, b)) = h.and_then(|h| h.search_ms.zip(h.search_decode_once_ms)) {
        l = l.ratio(ms(a), format!("decode {}", ms(b)), ratio(a, b), 1.3);
    }
    out.push(l);
    let gc = h.and_then(|h| h.gc_ms);
    let mut l = Line::new(
        format!("full gc of the {n}-session store after deleting half, against SQLite's VACUUM"),
        "≤ 0.1×",
    );
    if let Some((a, b)) = gc.zip(q.and_then(|q| q.gc_ms)) {
        l = l.ratio(
            ms_read(a, h.and_then(|h| h.gc_read_bytes)),
            format!("VACUUM {}", ms(b)),
            ratio(a, b),
            0.1,
        );
    }
    out.push(l);
    let mut l = Line::new(
        "the same gc against reading its structure objects (snapshots, list nodes, trees) once",
        "≤ 1.5×",
    );
    if let Some((a, b)) = gc.zip(h.and_then(|h| h.structure_read_ms)) {
        l = l.ratio(
            ms_read(a, h.and_then(|h| h.gc_read_bytes)),
            format!(
                "structure read {}",
                ms_read(b, h.and_then(|h| h.structure_read_bytes))
            ),
            ratio(a, b),
            1.5,
        );
    }
    out.push(l);
    let mut l = Line::new(
        format!(
            "delete of one session of {n} (hel-store with its collection) against SQLite's delete, median of 5 each"
        ),
        "≤ 5×",
    );
    if let (Some(a), Some(b)) = (
        h.and_then(|h| h.delete_one_ms),
        q.and_then(|q| q.delete_one_ms),
    ) {
        l = l.ratio(
            ms_read(a, h.and_then(|h| h.delete_one_read_bytes)),
            format!("SQLite {}", ms(b)),
            ratio(a, b),
            5.0,
        );
    }
    out.push(l);
}

/// The workspace lines (issue 24, item 4).
fn workspace(ws: Option<&Ws>, out: &mut Vec<Line>) {
    let size = ws.map_or(String::new(), |w| format!(", {} files", w.files));
    let mut l = Line::new(
        format!("workspace snapshot, nothing changed, a fresh process{size}, against `git status`"),
        "≤ 1.0×",
    );
    if let Some(w) = ws {
        l = l.ratio(
            ms(w.nochange_fresh_ms),
            format!("git status {}", ms(w.git_status_ms)),
            ratio(w.nochange_fresh_ms, w.git_status_ms),
            1.0,
        );
    }
    out.push(l);
    let mut l = Line::new(
        format!(
            "workspace snapshot, nothing changed, within the instance{size}, against `git status`"
        ),
        "≤ 0.05×",
    );
    if let Some(w) = ws {
        l = l.ratio(
            ms(w.nochange_snapshot_ms),
            format!("git status {}", ms(w.git_status_ms)),
            ratio(w.nochange_snapshot_ms, w.git_status_ms),
            0.05,
        );
    }
    out.push(l);
    let mut l = Line::new(
        "the store's part of a checkpoint commit with the workspace field, against without",
        "≤ 1.2×",
    );
    if let Some(w) = ws {
        l = l.ratio(
            ms(w.commit_with_workspace_ms),
            format!(
                "without {} (with, dirty pages synced first: {})",
                ms(w.commit_plain_ms),
                ms(w.commit_with_workspace_synced_ms)
            ),
            ratio(w.commit_with_workspace_ms, w.commit_plain_ms),
            1.2,
        );
    }
    out.push(l);
}

/// Allocated bytes against the unique compressed content, and the listing.
fn sizes_and_listing(rows: &[Row], out: &mut Vec<Line>) {
    let largest = rows
        .iter()
        .filter(|r| r.workload == "grow")
        .map(|r| r.n)
        .max();
    let mut any = false;
    for r in rows.iter().filter(|r| {
        r.store == "hel-store"
            && r.commits > 0
            && matches!(r.workload.as_str(), "grow" | "fork" | "compact" | "many")
            && (r.workload != "grow" || Some(r.n) == largest)
    }) {
        any = true;
        out.push(
            Line::new(
                format!(
                    "allocated / unique compressed content, {} n={}",
                    r.workload, r.n
                ),
                "≤ 1.1×",
            )
            .ratio(
                mb(r.allocated_bytes),
                format!("unique {}", mb(r.unique_compressed_bytes)),
                ratio(r.allocated_bytes as f64, r.unique_compressed_bytes as f64),
                1.1,
            ),
        );
    }
    if !any {
        out.push(Line::new("allocated / unique compressed content", "≤ 1.1×"));
    }
    let h = find(rows, "hel-store", "list", None);
    let mut l = Line::new(
        format!(
            "`hel sessions` of {} sessions (process, warm), against 200 ms",
            h.map_or(0, |h| h.n)
        ),
        "≤ 200 ms at 10,000 sessions",
    );
    if let Some(t) = h.and_then(|h| h.list_ms) {
        let q = find(rows, "sqlite", "list", None).and_then(|q| q.list_ms);
        l = l.ratio(
            ms(t),
            format!(
                "200 ms{}",
                q.map(|q| format!(" (SQLite's rows {})", ms(q)))
                    .unwrap_or_default()
            ),
            t / 200.0,
            1.0,
        );
        if h.is_some_and(|h| h.n < 10_000) {
            l.met = None;
            l.target =
                "≤ 200 ms at 10,000 sessions (fewer listed: not judged; `--list-sessions 10000`)"
                    .into();
        }
    }
    out.push(l);
}

/// The table: every target with its ratio in this run.
pub fn table(rows: &[Row], ws: Option<&Ws>) -> String {
    let mut lines = Vec::new();
    commits(rows, &mut lines);
    resumes(rows, &mut lines);
    maintenance(rows, &mut lines);
    workspace(ws, &mut lines);
    sizes_and_listing(rows, &mut lines);
    lines.push(Line {
        figure: "syncs per commit (issue 21)".into(),
        measured: format!("hel-store {HEL_SYNCS}"),
        yardstick: format!("SQLite (WAL) {SQLITE_SYNCS}, JSONL 1"),
        ratio: None,
        target: "3 (objects, ref file, directory)".into(),
        met: None,
    });
    let mut s = String::from(
        "| figure | measured | yardstick | ratio | target | |\n|---|---|---|---|---|---|\n",
    );
    for l in lines {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            l.figure,
            l.measured,
            l.yardstick,
            l.ratio.map(|r| format!("{r:.2}×")).unwrap_or_default(),
            l.target,
            match l.met {
                Some(true) => "met",
                Some(false) => "**missed**",
                None => "",
            }
        ));
    }
    s
}
