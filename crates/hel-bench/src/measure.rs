//! What the benchmarks' figures are made of: medians of runs, and the
//! bytes a directory takes on disk.

use std::fs;
use std::path::Path;

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Sum of file lengths, and of the blocks allocated to every file and
/// directory, under `dir` (not `dir` itself: every store's root is a
/// directory; hel's `.hel/` and each `sessions/<id>/` under it count).
pub fn disk_usage(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let (mut apparent, mut allocated) = (0, 0);
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                allocated += m.blocks() * 512;
                stack.push(e.path());
            } else {
                apparent += m.len();
                allocated += m.blocks() * 512;
            }
        }
    }
    (apparent, allocated)
}
