// Local profiling helper (not committed): build a store and keep it.
use hel_bench::carry::Carried;
use hel_bench::stores::{BenchStore, HelStore, Jsonl, Sqlite};
use hel_bench::workload;
use std::path::Path;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (kind, what, n, dir) = (
        a[1].as_str(),
        a[2].as_str(),
        a[3].parse::<usize>().unwrap(),
        Path::new(&a[4]),
    );
    if kind == "scan" {
        let store = hel_store::Store::open_with(dir, hel_bench::stores::no_limits()).unwrap();
        let t = std::time::Instant::now();
        let mut hits = 0;
        let f = memchr::memmem::Finder::new(what.as_bytes());
        store
            .scan_messages(&mut |m| {
                if f.find(m).is_some() {
                    hits += 1
                }
            })
            .unwrap();
        println!("scan {hits} hits {:?}", t.elapsed());
        if a.len() > 5 {
            return;
        }
        let t = std::time::Instant::now();
        let r = hel_bench::packs::pass(&dir.join(".hel"), hel_bench::packs::Pass::Decode);
        println!("decode {:?} {:?}", r, t.elapsed());
        let r = hel_bench::packs::pass(&dir.join(".hel"), hel_bench::packs::Pass::Verify);
        println!("verify {:?}", r);
        let t = std::time::Instant::now();
        assert!(store.fsck().unwrap().is_sound());
        println!("fsck {:?}", t.elapsed());
        return;
    }
    std::fs::create_dir_all(dir).unwrap();
    let mut st: Box<dyn BenchStore> = match kind {
        "hel" => Box::new(HelStore::new(dir)),
        "sqlite" => Box::new(Sqlite::new(&dir.join("sqlite"))),
        _ => Box::new(Jsonl::new(&dir.join("jsonl"))),
    };
    let mut rng = workload::rng(1);
    match what {
        "grow" => {
            let s = st.create();
            let mut msgs = vec![workload::system()];
            st.commit(s, &msgs, &Carried::none(), false, None);
            for k in 0..n.div_ceil(4) {
                let ex = workload::exchange(&mut rng, "g", k);
                let c = Carried::prefix(msgs.len());
                msgs.extend(ex.messages);
                st.commit(s, &msgs, &c, false, ex.spill.as_ref());
            }
            println!("{:?}", st.probe_args(s));
        }
        "list" => {
            for i in 0..n {
                let s = st.create();
                let mut msgs = vec![workload::system()];
                for k in 0..2 {
                    msgs.extend(workload::exchange(&mut rng, &format!("l{i}"), k).messages);
                }
                st.commit(s, &msgs, &Carried::none(), false, None);
            }
        }
        "many" => {
            for i in 0..n {
                let s = st.create();
                let mut msgs = vec![workload::system()];
                st.commit(s, &msgs, &Carried::none(), false, None);
                for k in 0..50 {
                    let ex = workload::exchange(&mut rng, &format!("m{i}"), k);
                    let c = Carried::prefix(msgs.len());
                    msgs.extend(ex.messages);
                    st.commit(s, &msgs, &c, false, ex.spill.as_ref());
                }
            }
        }
        _ => panic!(),
    }
    st.close();
}
