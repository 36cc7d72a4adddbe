//! Quick timing of snapshots on a generated tree (not the benchmark).
use hel_store::{CommitInput, Record, SessionState, Store};
use hel_workspace::{Flat, Options, Prev, Workspace};
use std::time::Instant;

fn main() {
    let root = std::path::PathBuf::from(std::env::args().nth(1).unwrap());
    let store = Store::open(&root).unwrap();
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let mut ws = Workspace::open(
        &store,
        Options {
            max_file: 1 << 20,
            budget: u64::MAX,
            ..Options::default()
        },
    )
    .unwrap();
    let mut last: Option<(hel_store::ObjectId, Flat)> = None;
    for round in 0..4 {
        if round == 3 {
            std::fs::write(root.join("d0/s0/f0.txt"), format!("changed {}", round)).unwrap();
        }
        let t = Instant::now();
        let mut txn = store.begin(&lease, &mut state).unwrap();
        let prev = last.as_ref().map(|(t, f)| Prev { tree: *t, flat: f });
        let snap = ws.snapshot(&mut txn, prev).unwrap();
        let t_snap = t.elapsed();
        let (objs, bytes) = txn.written();
        txn.commit(CommitInput {
            messages: &[],
            leaves: &[],
            cwd: "/p".into(),
            request_config: serde_json::json!({}),
            meter: serde_json::json!(null),
            cursors: serde_json::json!({}),
            new_spill: vec![],
            instruction: "i".into(),
            input_tokens: 0,
            output_tokens: 0,
            why: "t".into(),
            record: Record::Start,
            workspace: Some(hel_store::Workspace {
                tree: snap.tree,
                start: None,
                not_tracked: 0,
                restored: None,
            }),
        })
        .unwrap();
        println!("round {round}: snapshot {:?} total {:?} files_read {} objects {objs} bytes {bytes} entries {}", t_snap, t.elapsed(), snap.files_read, snap.flat.items.len());
        last = Some((snap.tree, snap.flat));
    }
}
