//! hel-remote against object_store's in-memory store and the local
//! directory backend: round trips, divergence, request counts, CAS races,
//! hostile remotes, remote gc and the probe.

use std::fmt;
use std::ops::Range;
use std::path::Path as FsPath;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use hel_remote::backend::LockedDir;
use hel_remote::remote::RemoteRef;
use hel_remote::{Remote, RemoteError};
use hel_store::transfer::Adopted;
use hel_store::{CommitInput, Leaf, ObjectId, Record, SessionId, Store};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMode,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use serde_json::{json, Value};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn input<'a>(messages: &'a [Value], leaves: &'a [Option<Leaf>]) -> CommitInput<'a> {
    CommitInput::new(
        Record::Answer,
        messages,
        leaves,
        "/project",
        hel_store::SessionRecord::of(hel_store::RequestConfig::bare("test", "m")),
    )
    .instruction("do it")
    .usage(1, 1)
    .why("test")
}

/// Add one exchange (user, assistant) to `session` in `store` (new when
/// `None`); returns the session and its new head.
fn exchange(store: &Store, session: Option<&SessionId>, text: &str) -> (SessionId, ObjectId) {
    let (lease, messages, leaves, mut state) = match session {
        None => {
            let lease = store.new_session().unwrap();
            (lease, Vec::new(), Vec::new(), Default::default())
        }
        Some(s) => {
            let (lease, head) = store.resume(s).unwrap();
            let l = store.load(&head).unwrap();
            let leaves: Vec<Option<Leaf>> = l.leaves.iter().copied().map(Some).collect();
            (lease, l.messages, leaves, l.state)
        }
    };
    let mut messages = messages;
    let mut leaves = leaves;
    messages.push(json!({"role": "user", "content": format!("{text} (user)")}));
    messages.push(json!({"role": "assistant", "content": format!("{text} (assistant)")}));
    leaves.extend([None, None]);
    let c = store
        .commit(&lease, &mut state, input(&messages, &leaves))
        .unwrap();
    (lease.session().clone(), c.id)
}

fn project() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    (dir, store)
}

/// Counts requests by kind.
#[derive(Debug, Default)]
struct Counts {
    put: AtomicU64,
    get: AtomicU64,
    head: AtomicU64,
    list: AtomicU64,
    delete: AtomicU64,
}

impl Counts {
    fn take(&self) -> [u64; 5] {
        [
            self.put.swap(0, Ordering::SeqCst),
            self.get.swap(0, Ordering::SeqCst),
            self.head.swap(0, Ordering::SeqCst),
            self.list.swap(0, Ordering::SeqCst),
            self.delete.swap(0, Ordering::SeqCst),
        ]
    }
}

/// A store that counts requests, and (with `ignore_conditions`) behaves
/// like a server that ignores If-None-Match/If-Match.
#[derive(Debug)]
struct Wrap {
    inner: Arc<dyn ObjectStore>,
    counts: Arc<Counts>,
    ignore_conditions: bool,
}

impl fmt::Display for Wrap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Wrap")
    }
}

#[async_trait]
impl ObjectStore for Wrap {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.counts.put.fetch_add(1, Ordering::SeqCst);
        if self.ignore_conditions {
            opts.mode = PutMode::Overwrite;
        }
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.counts.put.fetch_add(1, Ordering::SeqCst);
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if options.head {
            self.counts.head.fetch_add(1, Ordering::SeqCst);
        } else {
            self.counts.get.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.get_opts(location, options).await
    }
    async fn get_range(
        &self,
        location: &Path,
        range: Range<u64>,
    ) -> object_store::Result<bytes::Bytes> {
        self.counts.get.fetch_add(1, Ordering::SeqCst);
        self.inner.get_range(location, range).await
    }
    async fn head(&self, location: &Path) -> object_store::Result<ObjectMeta> {
        self.counts.head.fetch_add(1, Ordering::SeqCst);
        self.inner.head(location).await
    }
    async fn delete(&self, location: &Path) -> object_store::Result<()> {
        self.counts.delete.fetch_add(1, Ordering::SeqCst);
        self.inner.delete(location).await
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.counts.list.fetch_add(1, Ordering::SeqCst);
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.counts.list.fetch_add(1, Ordering::SeqCst);
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.copy(from, to).await
    }
    async fn copy_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.copy_if_not_exists(from, to).await
    }
}

fn counted(inner: Arc<dyn ObjectStore>) -> (Remote, Arc<Counts>) {
    let counts = Arc::new(Counts::default());
    let store = Arc::new(Wrap {
        inner,
        counts: Arc::clone(&counts),
        ignore_conditions: false,
    });
    (Remote::new("test", "mem://x", store, "team/hel"), counts)
}

fn dir_store(root: &FsPath) -> Arc<dyn ObjectStore> {
    Arc::new(LockedDir::new(
        LocalFileSystem::new_with_prefix(root).unwrap(),
        root.to_owned(),
    ))
}

#[test]
fn round_trip_fast_forward_and_constant_requests() {
    let rt = rt();
    let (remote, counts) = counted(Arc::new(InMemory::new()));
    let (_a_dir, a) = project();
    let (_b_dir, b) = project();
    let (s, _) = exchange(&a, None, "one");
    for k in 0..20 {
        exchange(&a, Some(&s), &format!("more {k}"));
    }
    rt.block_on(remote.probe()).unwrap();
    counts.take();
    let first = rt.block_on(remote.push(&a, &s)).unwrap();
    assert!(
        matches!(first, hel_remote::Pushed::Sent { .. }),
        "{first:?}"
    );
    // A first push: no record yet, so one GET of the (absent) ref.
    assert_eq!(counts.take(), [2, 1, 0, 0, 0]);
    let pulled = rt.block_on(remote.pull(&b, &s)).unwrap();
    assert_eq!(pulled.adopted, Adopted::New);
    assert_eq!(b.head(&s).unwrap(), a.head(&s).unwrap());
    assert!(hel_store::fsck::fsck(&b).unwrap().is_sound());
    counts.take();
    // B continues and pushes back: one pack and one ref, nothing else.
    let (_, h2) = exchange(&b, Some(&s), "from b");
    rt.block_on(remote.push(&b, &s)).unwrap();
    assert_eq!(counts.take(), [2, 0, 0, 0, 0], "incremental push");
    // A pulls one checkpoint: the ref and one pack.
    let pulled = rt.block_on(remote.pull(&a, &s)).unwrap();
    assert!(
        matches!(pulled.adopted, Adopted::FastForward { .. }),
        "{pulled:?}"
    );
    assert_eq!(pulled.packs, 1);
    assert_eq!(counts.take(), [0, 2, 0, 0, 0], "incremental pull");
    assert_eq!(a.head(&s).unwrap(), h2);
    assert!(hel_store::fsck::fsck(&a).unwrap().is_sound());
    // Nothing new: a push sends nothing at all.
    assert_eq!(
        rt.block_on(remote.push(&a, &s)).unwrap(),
        hel_remote::Pushed::UpToDate
    );
    assert_eq!(counts.take(), [0, 0, 0, 0, 0]);
    // A continues; its push is again two PUTs, however long the session.
    exchange(&a, Some(&s), "again");
    rt.block_on(remote.push(&a, &s)).unwrap();
    assert_eq!(counts.take(), [2, 0, 0, 0, 0]);
    let listed = rt.block_on(remote.sessions()).unwrap();
    assert_eq!(listed.len(), 1);
    let r = listed[0].r#ref.as_ref().unwrap();
    assert_eq!(r.head, a.head(&s).unwrap());
    assert_eq!(r.summary.messages, 46);
}

#[test]
fn divergence_refuses_one_and_pull_forks() {
    let rt = rt();
    let tmp = tempfile::tempdir().unwrap();
    let remote = Remote::new("shared", "file://x", dir_store(tmp.path()), "");
    rt.block_on(remote.probe()).unwrap();
    let (_a_dir, a) = project();
    let (_b_dir, b) = project();
    let (s, _) = exchange(&a, None, "one");
    rt.block_on(remote.push(&a, &s)).unwrap();
    rt.block_on(remote.pull(&b, &s)).unwrap();
    let (_, ha) = exchange(&a, Some(&s), "a's");
    let (_, hb) = exchange(&b, Some(&s), "b's");
    rt.block_on(remote.push(&b, &s)).unwrap();
    let err = rt.block_on(remote.push(&a, &s)).unwrap_err();
    assert!(matches!(err, RemoteError::Diverged { .. }), "{err}");
    assert!(
        err.to_string().contains("hel pull --remote shared"),
        "{err}"
    );
    let pulled = rt.block_on(remote.pull(&a, &s)).unwrap();
    let Adopted::Forked { session: f, head } = pulled.adopted else {
        panic!("{pulled:?}")
    };
    // Nothing lost: A's line is untouched, B's is the fork's history.
    assert_eq!(a.head(&s).unwrap(), ha);
    assert_eq!(a.head(&f).unwrap(), head);
    assert!(hel_store::transfer::history_holds(&a, &head, &hb).unwrap());
    assert!(hel_store::fsck::fsck(&a).unwrap().is_sound());
    // The fork pushes as a session of its own.
    rt.block_on(remote.push(&a, &f)).unwrap();
    assert_eq!(rt.block_on(remote.sessions()).unwrap().len(), 2);
}

/// Two writers race to move one ref from the same version, 1,000 times;
/// the loser reads again and retries. Every checkpoint must land.
fn races(store: Arc<dyn ObjectStore>) {
    let rt = rt();
    let path = Path::from("sessions/race");
    rt.block_on(store.put(&path, PutPayload::from(b"[]".to_vec())))
        .unwrap();
    let wins = Arc::new(AtomicU64::new(0));
    for round in 0..1000u64 {
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let tasks: Vec<_> = (0..2u64)
            .map(|w| {
                let store = Arc::clone(&store);
                let barrier = Arc::clone(&barrier);
                let wins = Arc::clone(&wins);
                let path = path.clone();
                rt.spawn(async move {
                    let mut first = true;
                    loop {
                        let got = store.get(&path).await.unwrap();
                        let v = object_store::UpdateVersion {
                            e_tag: got.meta.e_tag.clone(),
                            version: got.meta.version.clone(),
                        };
                        let mut list: Vec<u64> =
                            serde_json::from_slice(&got.bytes().await.unwrap()).unwrap();
                        list.push(round * 2 + w);
                        if first {
                            barrier.wait().await;
                            first = false;
                        }
                        let put = store
                            .put_opts(
                                &path,
                                PutPayload::from(serde_json::to_vec(&list).unwrap()),
                                PutMode::Update(v).into(),
                            )
                            .await;
                        match put {
                            Ok(_) => {
                                wins.fetch_add(1, Ordering::SeqCst);
                                return;
                            }
                            Err(object_store::Error::Precondition { .. }) => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            rt.block_on(t).unwrap();
        }
    }
    let got = rt.block_on(async { store.get(&path).await.unwrap().bytes().await.unwrap() });
    let mut list: Vec<u64> = serde_json::from_slice(&got).unwrap();
    assert_eq!(wins.load(Ordering::SeqCst), 2000);
    list.sort();
    assert_eq!(list, (0..2000).collect::<Vec<_>>(), "lost checkpoints");
}

#[test]
fn cas_races_in_memory_lose_nothing() {
    races(Arc::new(InMemory::new()));
}

#[test]
fn cas_races_in_a_directory_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    races(dir_store(tmp.path()));
}

#[test]
fn probe_refuses_a_store_that_ignores_conditions() {
    let rt = rt();
    let store = Arc::new(Wrap {
        inner: Arc::new(InMemory::new()),
        counts: Arc::default(),
        ignore_conditions: true,
    });
    let remote = Remote::new("loose", "mem://y", store, "");
    let err = rt.block_on(remote.probe()).unwrap_err();
    assert!(
        matches!(err, RemoteError::NoConditionalWrites { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("create-only put"), "{err}");
    let tmp = tempfile::tempdir().unwrap();
    let dir = Remote::new("dir", "file://z", dir_store(tmp.path()), "");
    rt.block_on(dir.probe()).unwrap();
}

/// Pull `s` from a remote whose files under `tmp` were changed by `tamper`
/// into a fresh project; the error.
fn pull_tampered(tamper: impl FnOnce(&FsPath, &SessionId, &RemoteRef)) -> String {
    let rt = rt();
    let tmp = tempfile::tempdir().unwrap();
    let remote = Remote::new("evil", "file://e", dir_store(tmp.path()), "");
    let (_a_dir, a) = project();
    let (s, _) = exchange(&a, None, "one");
    rt.block_on(remote.push(&a, &s)).unwrap();
    let (r, _) = rt.block_on(remote.read_ref(&s)).unwrap().unwrap();
    tamper(tmp.path(), &s, &r);
    let (_b_dir, b) = project();
    let err = rt.block_on(remote.pull(&b, &s)).unwrap_err().to_string();
    // Nothing came in.
    assert!(b.head(&s).is_err(), "{err}");
    err
}

fn write_pack(root: &FsPath, name: &str, bytes: &[u8]) {
    std::fs::write(root.join("packs").join(name), bytes).unwrap();
}

/// A pack named right for its bytes, holding `records` (id, stored).
fn pack_of(records: &[(ObjectId, Vec<u8>)]) -> (String, Vec<u8>) {
    let mut bytes = b"HELPACK\0".to_vec();
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&2u32.to_le_bytes());
    for (id, stored) in records {
        let mut h = b"HELR".to_vec();
        h.extend_from_slice(&[1, 0, 0, 0]);
        h.extend_from_slice(id.as_bytes());
        h.extend_from_slice(&(stored.len() as u64).to_le_bytes());
        let mut hasher = blake3::Hasher::new();
        hasher.update(&h);
        hasher.update(stored);
        h.extend_from_slice(&hasher.finalize().as_bytes()[..8]);
        bytes.extend_from_slice(&h);
        bytes.extend_from_slice(stored);
    }
    let name = format!("{}-{}.pack", "0".repeat(32), blake3::hash(&bytes).to_hex());
    (name, bytes)
}

fn set_ref(root: &FsPath, s: &SessionId, r: &RemoteRef) {
    std::fs::write(
        root.join("sessions").join(s.as_str()),
        serde_json::to_vec(r).unwrap(),
    )
    .unwrap();
}

#[test]
fn hostile_remotes_are_refused() {
    // An object whose bytes do not match its id.
    let err = pull_tampered(|root, s, r| {
        let (id, _) = hel_store::testing::encode("blob", b"what it claims");
        let (_, canonical) = hel_store::testing::encode("blob", b"what it holds");
        let stored = zstd_frame(&canonical);
        let (name, bytes) = pack_of(&[(id, stored)]);
        write_pack(root, &name, &bytes);
        let mut r = r.clone();
        r.packs.insert(0, name);
        set_ref(root, s, &r);
    });
    assert!(err.contains("is corrupt"), "{err}");
    // An object declaring more than any object may hold.
    let err = pull_tampered(|root, s, r| {
        let canonical = b"blob 999999999\0abc".to_vec();
        let id = ObjectId::of_canonical(&canonical);
        let (name, bytes) = pack_of(&[(id, zstd_frame(&canonical))]);
        write_pack(root, &name, &bytes);
        let mut r = r.clone();
        r.packs.insert(0, name);
        set_ref(root, s, &r);
    });
    assert!(err.contains("declares 999999999 bytes"), "{err}");
    // A ref naming data the remote does not have.
    let err = pull_tampered(|root, s, r| {
        let mut r = r.clone();
        r.head = ObjectId::of_canonical(b"nothing");
        set_ref(root, s, &r);
    });
    assert!(err.contains("is missing"), "{err}");
    let err = pull_tampered(|root, s, r| {
        let mut r = r.clone();
        r.packs = vec![format!("{}-{}.pack", "1".repeat(32), "2".repeat(64))];
        set_ref(root, s, &r);
    });
    assert!(err.contains("which is missing"), "{err}");
    // A ref that is not a ref.
    let err = pull_tampered(|root, s, _| {
        std::fs::write(root.join("sessions").join(s.as_str()), b"\x00garbage").unwrap();
    });
    assert!(err.contains("not a hel remote ref"), "{err}");
    // A pack whose bytes are not what its name says.
    let err = pull_tampered(|root, _, r| {
        let p = root.join("packs").join(&r.packs[0]);
        let mut bytes = std::fs::read(&p).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&p, bytes).unwrap();
    });
    assert!(err.contains("do not hash to its name"), "{err}");
}

fn zstd_frame(canonical: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(canonical, 3).unwrap()
}

#[test]
fn remote_gc_takes_orphans_in_two_runs_and_never_what_a_ref_names() {
    let rt = rt();
    let tmp = tempfile::tempdir().unwrap();
    let remote = Remote::new("gc", "file://g", dir_store(tmp.path()), "");
    let (_a_dir, a) = project();
    let (s, _) = exchange(&a, None, "one");
    rt.block_on(remote.push(&a, &s)).unwrap();
    // A push that died between its pack and its ref left an orphan.
    let (name, bytes) = pack_of(&[]);
    write_pack(tmp.path(), &name, &bytes);
    let grace = Duration::ZERO;
    let first = rt.block_on(remote.gc(grace, false)).unwrap();
    assert_eq!((first.live, first.candidates, first.deleted), (1, 1, 0));
    // Meanwhile a push lands: its pack is new, not a candidate.
    exchange(&a, Some(&s), "two");
    rt.block_on(remote.push(&a, &s)).unwrap();
    let second = rt.block_on(remote.gc(grace, false)).unwrap();
    assert_eq!((second.live, second.candidates, second.deleted), (2, 0, 1));
    assert!(!tmp.path().join("packs").join(&name).exists());
    // Everything a ref names is there: a fresh pull is sound.
    let (_b_dir, b) = project();
    rt.block_on(remote.pull(&b, &s)).unwrap();
    assert!(hel_store::fsck::fsck(&b).unwrap().is_sound());
    // A deleted session's packs go the same way.
    assert!(rt.block_on(remote.delete_session(Some(&a), &s)).unwrap());
    rt.block_on(remote.gc(grace, false)).unwrap();
    let last = rt.block_on(remote.gc(grace, false)).unwrap();
    assert_eq!((last.refs, last.packs, last.deleted), (0, 2, 2));
    assert_eq!(rt.block_on(remote.gc(grace, false)).unwrap().packs, 0);
}

/// The README's figures (`cargo test -p hel-remote --release --test remote
/// measure -- --ignored --nocapture`): a 10,000-message session pushed and
/// pulled whole, one more checkpoint pushed and pulled, and a listing of
/// 1,000 remote sessions; against the loopback S3 server when
/// `HEL_TEST_S3_ENDPOINT` names one, else in memory.
#[test]
#[ignore]
fn measure() {
    let rt = rt();
    let inner: Arc<dyn ObjectStore> = match std::env::var("HEL_TEST_S3_ENDPOINT") {
        Ok(endpoint) => Arc::new(
            object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(std::env::var("HEL_TEST_S3_BUCKET").unwrap_or("hel-test".into()))
                .with_endpoint(&endpoint)
                .with_allow_http(true)
                .with_region("us-east-1")
                .build()
                .unwrap(),
        ),
        Err(_) => Arc::new(InMemory::new()),
    };
    let (remote, counts) = counted(Arc::clone(&inner));
    let (a_dir, a) = project();
    // 10,000 messages in 50 checkpoints of 200 (tool-sized texts).
    let lease = a.new_session().unwrap();
    let s = lease.session().clone();
    let mut state = Default::default();
    let mut messages: Vec<Value> = Vec::new();
    let mut leaves: Vec<Option<Leaf>> = Vec::new();
    for c in 0..50 {
        for i in 0..100 {
            let n = c * 100 + i;
            // Text that compresses about as well as real transcripts do.
            let noise = |k: u64| blake3::hash(&k.to_le_bytes()).to_hex().to_string();
            messages.push(json!({"role": "user", "content": format!("instruction {n}: look at {} and fix it", noise(n))}));
            messages.push(json!({"role": "assistant", "content": format!("answer {n}: changed {} and {}; the tests pass. {}", noise(n + 1), noise(n + 2), "Done. ".repeat(20))}));
            leaves.extend([None, None]);
        }
        let done = a
            .commit(&lease, &mut state, input(&messages, &leaves))
            .unwrap();
        for (k, l) in done.new_leaves.iter().enumerate() {
            leaves[done.leaves_from + k] = Some(*l);
        }
    }
    drop(lease);
    let local: u64 = walk_size(&a_dir.path().join(".hel/packs"));
    counts.take();
    let bytes_before = local;
    let pushed = rt.block_on(remote.push(&a, &s)).unwrap();
    let push_req = counts.take();
    let hel_remote::Pushed::Sent {
        bytes: sent,
        objects,
    } = pushed
    else {
        panic!()
    };
    println!("push of 10,000 messages: {objects} objects, {sent} bytes sent, local store {bytes_before} bytes ({:.3}x), requests [put, get, head, list, delete] = {push_req:?}", sent as f64 / bytes_before as f64);
    let (_b_dir, b) = project();
    let t = std::time::Instant::now();
    let pulled = rt.block_on(remote.pull(&b, &s)).unwrap();
    println!(
        "pull: {} bytes, {:?}, requests {:?}",
        pulled.bytes,
        t.elapsed(),
        counts.take()
    );
    let (_, _) = exchange(&a, Some(&s), "one more");
    rt.block_on(remote.push(&a, &s)).unwrap();
    println!(
        "incremental push of one checkpoint: requests {:?}",
        counts.take()
    );
    rt.block_on(remote.pull(&b, &s)).unwrap();
    println!(
        "incremental pull of one checkpoint: requests {:?}",
        counts.take()
    );
    // 1,000 remote sessions (refs written directly).
    let (r, _) = rt.block_on(remote.read_ref(&s)).unwrap().unwrap();
    let (lister, lcounts) = counted(inner);
    rt.block_on(async {
        let puts: Vec<_> = (0..1000)
            .map(|_| {
                let mut r = r.clone();
                r.session = SessionId::new_random();
                let path = Path::from(format!("team/hel/sessions/{}", r.session));
                let body = serde_json::to_vec(&r).unwrap();
                let store = Arc::clone(&lister_store(&lister));
                async move { store.put(&path, PutPayload::from(body)).await.unwrap() }
            })
            .collect();
        futures::future::join_all(puts).await;
    });
    lcounts.take();
    let t = std::time::Instant::now();
    let listed = rt.block_on(lister.sessions()).unwrap();
    println!(
        "hel sessions --remote with {} sessions: {:?}, requests {:?}",
        listed.len(),
        t.elapsed(),
        lcounts.take()
    );
}

fn lister_store(r: &Remote) -> Arc<dyn ObjectStore> {
    r.object_store()
}

fn walk_size(p: &FsPath) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        total += if m.is_dir() {
            walk_size(&e.path())
        } else {
            m.len()
        };
    }
    total
}

#[test]
fn a_push_after_the_remote_ref_was_deleted_elsewhere_starts_it_again() {
    let rt = rt();
    let tmp = tempfile::tempdir().unwrap();
    let remote = Remote::new("shared", "file://d", dir_store(tmp.path()), "");
    let (_a_dir, a) = project();
    let (s, _) = exchange(&a, None, "one");
    rt.block_on(remote.push(&a, &s)).unwrap();
    // Another machine deletes it; this project's record is now stale.
    assert!(rt.block_on(remote.delete_session(None, &s)).unwrap());
    let (_, h) = exchange(&a, Some(&s), "two");
    rt.block_on(remote.push(&a, &s)).unwrap();
    let (r, _) = rt.block_on(remote.read_ref(&s)).unwrap().unwrap();
    assert_eq!((r.head, r.packs.len()), (h, 1));
    let (_b_dir, b) = project();
    rt.block_on(remote.pull(&b, &s)).unwrap();
    assert!(hel_store::fsck::fsck(&b).unwrap().is_sound());
}

/// What leaves the store for a remote or a bundle is its objects' stored
/// bytes as the store holds them, snapshots framed with hel's dictionary
/// (objects-spec §2.2); the bundle imports whole into another store, and
/// a pull reads them too.
#[test]
fn sent_packs_keep_dictionary_frames() {
    let (_d, store) = project();
    let (s, _) = exchange(&store, None, "one");
    let (s, head) = exchange(&store, Some(&s), "two");
    let journal = _d
        .path()
        .join(format!(".hel/packs/journals/{}.journal", s.as_str()));
    let dict = hel_store::DICTIONARY_ID;
    let named = |bytes: &[u8]| -> usize {
        // Every record's stored bytes that is a frame naming the dictionary.
        let mut at = 16;
        let mut n = 0;
        while at + 56 <= bytes.len() {
            let len = u64::from_le_bytes(bytes[at + 40..at + 48].try_into().unwrap()) as usize;
            let stored = &bytes[at + 56..at + 56 + len];
            if zstd::zstd_safe::get_dict_id_from_frame(stored).map(|d| d.get()) == Some(dict) {
                n += 1;
            }
            at += 56 + len;
        }
        n
    };
    // Two snapshots and two commit records in the journal.
    assert_eq!(named(&std::fs::read(&journal).unwrap()), 4);
    let out = _d.path().join("s.helbundle");
    hel_remote::bundle::export(&store, &s, &out).unwrap();
    let bytes = std::fs::read(&out).unwrap();
    let m = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let pack = &bytes[16 + m..];
    assert_eq!(&pack[..8], b"HELPACK\0");
    assert_eq!(
        named(pack),
        2,
        "the bundle's two snapshots keep their frames"
    );
    let (_e, other) = project();
    let (got, _) = hel_remote::bundle::import(&other, &out).unwrap();
    assert_eq!(got, s);
    assert_eq!(other.head(&s).unwrap(), head);
    assert_eq!(other.load(&head).unwrap().messages.len(), 4);
    assert!(hel_store::fsck::fsck(&other).unwrap().is_sound());
}

/// Every path that writes a checkpoint (a reply, a fork, a pull, a bundle
/// import; an import is `hel`'s, tested there) refuses one a load would
/// refuse before anything is written, saying what is wrong: here a tool
/// call without its result. The source is a store that holds such a
/// checkpoint as a damaged or hostile store would.
#[test]
fn every_writer_refuses_what_a_load_would_refuse_before_writing() {
    let rt = rt();
    let broken = [
        json!({"role": "system", "content": "s"}),
        json!({"role": "user", "content": "read it"}),
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        ]}),
        json!({"role": "assistant", "content": "done"}),
    ];
    let why = "tool call \"c1\" has no result before message 3";
    let (src_dir, src) = project();
    let lease = src.new_session().unwrap();
    let bad = hel_store::testing::unadmitted(|| {
        src.commit(
            &lease,
            &mut Default::default(),
            input(&broken, &[None, None, None, None]),
        )
        .unwrap()
    });
    let bad_session = lease.session().clone();
    drop(lease);
    let err = src.load(&bad.id).unwrap_err().to_string();
    assert!(err.contains(why), "{err}");

    // A project with a session of its own, which each way in leaves as is.
    let (dst_dir, dst) = project();
    let (mine, _) = exchange(&dst, None, "mine");
    let before = hel_store::testing::files_under(dst_dir.path());

    // A reply: the session's next checkpoint.
    let (lease, head) = dst.resume(&mine).unwrap();
    let mut loaded = dst.load(&head).unwrap();
    let err = dst
        .commit(&lease, &mut loaded.state, input(&broken, &[None; 4]))
        .unwrap_err();
    assert!(
        matches!(err, hel_store::Error::Refused { .. }) && err.to_string().contains(why),
        "{err}"
    );
    drop(lease);
    assert_eq!(
        hel_store::testing::files_under(dst_dir.path()),
        before,
        "a refused reply wrote"
    );

    // A fork of the checkpoint a load refuses.
    let src_before = hel_store::testing::files_under(src_dir.path());
    let err = src.fork(&bad.id).unwrap_err().to_string();
    assert!(err.contains(why), "{err}");
    assert_eq!(
        hel_store::testing::files_under(src_dir.path()),
        src_before,
        "a refused fork wrote"
    );

    // A pull of it.
    let tmp = tempfile::tempdir().unwrap();
    let remote = Remote::new("shared", "file://x", dir_store(tmp.path()), "");
    rt.block_on(remote.push(&src, &bad_session)).unwrap();
    let err = rt
        .block_on(remote.pull(&dst, &bad_session))
        .unwrap_err()
        .to_string();
    assert!(err.contains(why), "{err}");
    assert_eq!(
        hel_store::testing::files_under(dst_dir.path()),
        before,
        "a refused pull wrote"
    );

    // A bundle import of it.
    let bundle = tmp.path().join("bad.helbundle");
    hel_remote::bundle::export(&src, &bad_session, &bundle).unwrap();
    let err = hel_remote::bundle::import(&dst, &bundle)
        .unwrap_err()
        .to_string();
    assert!(err.contains(why), "{err}");
    assert_eq!(
        hel_store::testing::files_under(dst_dir.path()),
        before,
        "a refused bundle import wrote"
    );
    assert!(dst.head(&bad_session).is_err());
}
