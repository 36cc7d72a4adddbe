//! The benchmark keeps building and running: tiny sizes, no timing assertions.

use hel_bench::run::{self, Config};

#[test]
fn smoke_run_covers_every_store_and_workload() {
    let dir = tempfile::tempdir().unwrap();
    let rows = run::run_all(&Config::smoke(dir.path().join("work")), |_| {});
    for workload in ["grow", "fork", "compact", "many"] {
        for store in run::STORES {
            let row = rows
                .iter()
                .find(|r| r.workload == workload && r.store == *store)
                .unwrap_or_else(|| panic!("no {store} {workload}"));
            assert!(
                row.commits > 0,
                "{store} {workload} did not run: {:?}",
                row.note
            );
            assert!(row.apparent_bytes > 0 && row.unique_compressed_bytes > 0);
        }
    }
    let hel_many = rows
        .iter()
        .find(|r| r.workload == "many" && r.store == "hel-store")
        .unwrap();
    assert!(
        hel_many.gc_reclaimed_bytes.unwrap() > 0,
        "deleting half the sessions reclaims bytes"
    );
    let table = run::table(&rows);
    assert_eq!(table.lines().count(), 2 + rows.len());
    assert!(run::targets(&rows).contains("commit p50"));
    let png = dir.path().join("chart.png");
    hel_bench::chart::draw(&rows, &png).unwrap();
    assert_eq!(&std::fs::read(&png).unwrap()[..4], b"\x89PNG");
}
