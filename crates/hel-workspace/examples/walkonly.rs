use hel_workspace::walk;
use std::os::fd::AsFd;
fn main() {
    let root = std::path::PathBuf::from(std::env::args().nth(1).unwrap());
    let fd = hel_fs::at::open_dir_following(&root).unwrap();
    let cache = hel_workspace::cache::Cache::default();
    let plan = walk::Plan {
        root: &root,
        cache: &cache,
        prev: None,
        max_file: 0,
        paths_max: hel_store::tree::FLAT_PATHS_MAX,
        bytes_max: hel_store::tree::FLAT_BYTES_MAX,
        watch: None,
    };
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let mut n = 0;
        walk::walk(fd.as_fd(), &plan, |_e| n += 1).unwrap();
        println!("walk {n} entries {:?}", t.elapsed());
    }
}
