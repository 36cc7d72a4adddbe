//! A remote: its keys (objects-spec §12), and push, pull, listing, delete
//! and gc over them.
//!
//! Requests grow with packs, not with messages: a push uploads one pack
//! of what the remote lacks and moves the session's ref by compare-and-
//! swap (2 PUTs when this project knows the ref's version); a pull reads
//! the ref and the packs it has not got (2 GETs for one new checkpoint).
//! What this project last knew of each remote session (the head, the ref's
//! ETag/version, the packs) is recorded in `.hel/remotes/` through
//! hel-store, written crash-safely; a stale record only costs one GET.

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use hel_store::transfer::{Adopted, Received};
use hel_store::{json, ObjectId, SessionId, Store, Summary};
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};

use crate::error::{RemoteError, Result};

/// What a remote ref's `format` says.
pub const REF_FORMAT: &str = "hel-remote-ref 1";
/// The marker object's content.
pub const MARKER: &[u8] = b"hel-remote 1\n";
/// The most bytes a remote ref may hold.
pub const REF_MAX: u64 = 1 << 20;
/// The most packs a ref names; a push that would name more sends the
/// session's whole history as one pack instead.
pub const REF_PACKS_MAX: usize = 4096;
/// The most bytes one pack may hold.
pub const PACK_MAX: u64 = 1 << 30;
/// The most pack bytes one pull of one session takes in.
pub const PULL_MAX: u64 = 4 << 30;
/// The longest a push may take between starting its pack's upload and
/// its ref write; remote gc's grace period must be longer.
pub const PUSH_WINDOW: Duration = Duration::from_secs(30 * 60);
/// The shortest grace period the CLI accepts (twice [`PUSH_WINDOW`]).
pub const GRACE_MIN: Duration = Duration::from_secs(60 * 60);

/// A remote session's ref: `sessions/<uuid>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteRef {
    pub format: String,
    pub session: SessionId,
    pub head: ObjectId,
    /// Pack names (`packs/<name>`) that together hold everything `head`
    /// reaches.
    pub packs: Vec<String>,
    /// The head's summary (what listings show).
    pub summary: Summary,
    /// When the head was written (ms since the epoch).
    pub updated_ms: u64,
}

/// What this project last knew of a remote session.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct State {
    head: Option<ObjectId>,
    e_tag: Option<String>,
    version: Option<String>,
    packs: Vec<String>,
}

/// A remote session as listed.
#[derive(Debug, Clone)]
pub struct Listed {
    pub session: SessionId,
    /// The ref, or why it could not be read (shared: a listing is cloned).
    pub r#ref: std::result::Result<RemoteRef, std::sync::Arc<RemoteError>>,
}

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    UpToDate,
    /// The check of [`Remote::push_checked`] refused what would be sent:
    /// nothing was.
    Held,
    /// `objects` objects in `bytes` bytes were sent (one pack, or none).
    Sent {
        objects: u64,
        bytes: u64,
    },
}

/// What a pull did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    pub adopted: Adopted,
    pub packs: u64,
    pub bytes: u64,
}

/// What a remote gc did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    pub refs: u64,
    pub packs: u64,
    pub live: u64,
    /// Packs recorded as candidates for the next run.
    pub candidates: u64,
    pub deleted: u64,
    pub bytes_deleted: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Candidates {
    /// The server's time when they were recorded (ms since the epoch).
    recorded_ms: i64,
    packs: Vec<String>,
}

/// An open remote.
pub struct Remote {
    name: String,
    store: Arc<dyn ObjectStore>,
    prefix: String,
    /// Names this remote's records in `.hel/remotes/`.
    key: String,
}

/// Is `name` a pack name hel writes: 32 hex digits, `-`, the 64-digit
/// BLAKE3 of its bytes, `.pack`? Returns that hash.
fn pack_hash(name: &str) -> Option<&str> {
    let stem = name.strip_suffix(".pack")?;
    let (nonce, hash) = stem.split_once('-')?;
    let hex = |s: &str, n: usize| {
        s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    (hex(nonce, 32) && hex(hash, 64)).then_some(hash)
}

impl Remote {
    /// A remote over `store`, its keys under `prefix`. `url` (with the
    /// endpoint) identifies it in this project's records.
    pub fn new(name: &str, url: &str, store: Arc<dyn ObjectStore>, prefix: &str) -> Remote {
        let key = blake3::hash(url.as_bytes()).to_hex()[..16].to_owned();
        Remote {
            name: name.to_owned(),
            store,
            prefix: prefix.trim_matches('/').to_owned(),
            key,
        }
    }

    /// Open the remote `name` of `config`.
    pub fn open(name: &str, config: &crate::config::RemoteConfig, create: bool) -> Result<Remote> {
        let b = crate::backend::open(name, config, create)?;
        let id = format!(
            "{}\n{}",
            config.url,
            config.endpoint.as_deref().unwrap_or_default()
        );
        Ok(Remote::new(name, &id, b.store, &b.prefix))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The object store under this remote (for tools and tests).
    pub fn object_store(&self) -> Arc<dyn ObjectStore> {
        Arc::clone(&self.store)
    }

    fn path(&self, rel: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(rel)
        } else {
            Path::from(format!("{}/{rel}", self.prefix))
        }
    }

    fn err(&self, source: object_store::Error) -> RemoteError {
        RemoteError::Store {
            remote: self.name.clone(),
            source,
        }
    }

    fn hostile(&self, key: &str, reason: impl Into<String>) -> RemoteError {
        RemoteError::Hostile {
            remote: self.name.clone(),
            key: key.to_owned(),
            reason: reason.into(),
        }
    }

    fn state_key(&self, session: &SessionId) -> String {
        format!("{}-{}", self.key, session)
    }

    fn state(&self, store: &Store, session: &SessionId) -> Result<Option<State>> {
        Ok(
            hel_store::transfer::remote_state(store, &self.state_key(session))?
                .and_then(|b| json::from_slice(&b, json::Limits::SMALL).ok()),
        )
    }

    fn set_state(&self, store: &Store, session: &SessionId, state: &State) -> Result<()> {
        let bytes = serde_json::to_vec(state).unwrap_or_default();
        Ok(hel_store::transfer::set_remote_state(
            store,
            &self.state_key(session),
            &bytes,
        )?)
    }

    /// GET `rel` whole, refusing more than `max` bytes (checked against the
    /// size the server declares and again while reading). `None` if absent.
    async fn get_bounded(
        &self,
        rel: &str,
        max: u64,
    ) -> Result<Option<(bytes::Bytes, object_store::ObjectMeta)>> {
        let got = match self.store.get(&self.path(rel)).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.err(e)),
        };
        if got.meta.size > max {
            return Err(self.hostile(
                rel,
                format!("{} bytes, over the {max} it may have", got.meta.size),
            ));
        }
        let meta = got.meta.clone();
        let mut out = Vec::with_capacity(meta.size as usize);
        let mut stream = got.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.err(e))?;
            if out.len() as u64 + chunk.len() as u64 > max {
                return Err(self.hostile(rel, format!("over the {max} bytes it may have")));
            }
            out.extend_from_slice(&chunk);
        }
        Ok(Some((bytes::Bytes::from(out), meta)))
    }

    /// Check the backend honours conditional writes (and leave the marker
    /// object): a create-only put of an existing key must fail, and so
    /// must a put with a wrong ETag.
    pub async fn probe(&self) -> Result<()> {
        let marker = self.path("hel-remote");
        match self
            .store
            .put_opts(
                &marker,
                PutPayload::from_static(MARKER),
                PutMode::Create.into(),
            )
            .await
        {
            Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => {}
            Err(e) => return Err(self.err(e)),
        }
        let probe = self.path(&format!("probe/{}", uuid::Uuid::new_v4().simple()));
        let first = self
            .store
            .put_opts(
                &probe,
                PutPayload::from_static(b"1"),
                PutMode::Create.into(),
            )
            .await
            .map_err(|e| self.err(e))?;
        let again = self
            .store
            .put_opts(
                &probe,
                PutPayload::from_static(b"2"),
                PutMode::Create.into(),
            )
            .await;
        let wrong = UpdateVersion {
            e_tag: Some("\"00000000000000000000000000000000\"".into()),
            version: None,
        };
        let wrong_tag = self
            .store
            .put_opts(
                &probe,
                PutPayload::from_static(b"3"),
                PutMode::Update(wrong).into(),
            )
            .await;
        let right = self
            .store
            .put_opts(
                &probe,
                PutPayload::from_static(b"4"),
                PutMode::Update(first.into()).into(),
            )
            .await;
        let _ = self.store.delete(&probe).await;
        let refused = |r: &object_store::Result<_>| {
            matches!(
                r,
                Err(object_store::Error::AlreadyExists { .. })
                    | Err(object_store::Error::Precondition { .. })
            )
        };
        if !refused(&again) {
            return Err(RemoteError::NoConditionalWrites {
                remote: self.name.clone(),
                what: "a create-only put of an existing key succeeded",
            });
        }
        if !refused(&wrong_tag) {
            return Err(RemoteError::NoConditionalWrites {
                remote: self.name.clone(),
                what: "a put with a wrong ETag succeeded",
            });
        }
        if right.is_err() {
            return Err(RemoteError::NoConditionalWrites {
                remote: self.name.clone(),
                what: "a put with the right ETag failed",
            });
        }
        Ok(())
    }

    /// Read and check session `session`'s ref; `None` when there is none.
    pub async fn read_ref(
        &self,
        session: &SessionId,
    ) -> Result<Option<(RemoteRef, UpdateVersion)>> {
        let rel = format!("sessions/{session}");
        let Some((bytes, meta)) = self.get_bounded(&rel, REF_MAX).await? else {
            return Ok(None);
        };
        let r = self.parse_ref(&rel, &bytes, session)?;
        Ok(Some((
            r,
            UpdateVersion {
                e_tag: meta.e_tag,
                version: meta.version,
            },
        )))
    }

    fn parse_ref(&self, rel: &str, bytes: &[u8], session: &SessionId) -> Result<RemoteRef> {
        let r: RemoteRef = json::from_slice(bytes, json::Limits::MESSAGE)
            .map_err(|e| self.hostile(rel, format!("not a hel remote ref: {e}")))?;
        if r.format != REF_FORMAT {
            return Err(self.hostile(
                rel,
                format!("a ref of unknown format {:?}: upgrade hel", r.format),
            ));
        }
        if r.session != *session {
            return Err(self.hostile(rel, format!("the ref names session {}", r.session)));
        }
        if r.packs.len() > REF_PACKS_MAX {
            return Err(self.hostile(
                rel,
                format!("names {} packs, over {REF_PACKS_MAX}", r.packs.len()),
            ));
        }
        if let Some(p) = r.packs.iter().find(|p| pack_hash(p).is_none()) {
            return Err(self.hostile(rel, format!("names {p:?}, not a pack name")));
        }
        Ok(r)
    }

    /// Push `session`'s head (see the module doc). Refused with
    /// [`RemoteError::Diverged`] when the remote's head is not in the
    /// local history.
    pub async fn push(&self, store: &Store, session: &SessionId) -> Result<Pushed> {
        self.push_checked(store, session, &mut |_, _| true).await
    }

    /// As [`Remote::push`], asking `check` first with the head and the
    /// pack it would send (the objects the remote lacks); when `check`
    /// says no, nothing is sent and the push is [`Pushed::Held`].
    pub async fn push_checked(
        &self,
        store: &Store,
        session: &SessionId,
        check: &mut dyn FnMut(&ObjectId, &hel_store::transfer::OutPack) -> bool,
    ) -> Result<Pushed> {
        let head = store.head(session)?;
        let mut known = self.state(store, session)?;
        for _ in 0..4 {
            // What the remote has: from this project's record, or its ref.
            let (base, packs, mode) = match known.take() {
                Some(State {
                    head: Some(h),
                    e_tag,
                    version,
                    packs,
                }) if hel_store::transfer::history_holds(store, &head, &h)? => (
                    Some(h),
                    packs,
                    PutMode::Update(UpdateVersion { e_tag, version }),
                ),
                _ => self.remote_base(store, session, &head).await?,
            };
            if base == Some(head) {
                if let PutMode::Update(v) = &mode {
                    self.set_state(
                        store,
                        session,
                        &State {
                            head: Some(head),
                            e_tag: v.e_tag.clone(),
                            version: v.version.clone(),
                            packs: packs.clone(),
                        },
                    )?;
                }
                return Ok(Pushed::UpToDate);
            }
            let started = Instant::now();
            let (out, mut packs) = if packs.len() >= REF_PACKS_MAX {
                (
                    hel_store::transfer::pack_between(store, &head, None)?,
                    Vec::new(),
                )
            } else {
                (
                    hel_store::transfer::pack_between(store, &head, base.as_ref())?,
                    packs,
                )
            };
            if !check(&head, &out) {
                return Ok(Pushed::Held);
            }
            let bytes = out.bytes.len() as u64;
            if out.objects > 0 {
                let name = format!(
                    "{}-{}.pack",
                    uuid::Uuid::new_v4().simple(),
                    blake3::hash(&out.bytes).to_hex()
                );
                self.store
                    .put_opts(
                        &self.path(&format!("packs/{name}")),
                        PutPayload::from(out.bytes),
                        PutMode::Create.into(),
                    )
                    .await
                    .map_err(|e| self.err(e))?;
                packs.push(name);
            }
            hel_fs::failpoint::kill("push-after-pack");
            if started.elapsed() > PUSH_WINDOW {
                return Err(RemoteError::TooSlow {
                    remote: self.name.clone(),
                    session: session.to_string(),
                    secs: PUSH_WINDOW.as_secs(),
                });
            }
            let cp = store.checkpoint(&head)?;
            let r = RemoteRef {
                format: REF_FORMAT.into(),
                session: session.clone(),
                head,
                packs: packs.clone(),
                summary: cp.summary,
                updated_ms: cp.created_at_ms,
            };
            let body = serde_json::to_vec(&r).unwrap_or_default();
            let put = self
                .store
                .put_opts(
                    &self.path(&format!("sessions/{session}")),
                    PutPayload::from(body),
                    PutOptions::from(mode),
                )
                .await;
            match put {
                Ok(res) => {
                    hel_fs::failpoint::kill("push-after-ref");
                    self.set_state(
                        store,
                        session,
                        &State {
                            head: Some(head),
                            e_tag: res.e_tag,
                            version: res.version,
                            packs,
                        },
                    )?;
                    return Ok(Pushed::Sent {
                        objects: out.objects,
                        bytes,
                    });
                }
                // Someone moved the ref (or made it, or deleted it) since:
                // look again. The pack just sent stays unreferenced until
                // remote gc.
                Err(object_store::Error::Precondition { .. })
                | Err(object_store::Error::AlreadyExists { .. })
                | Err(object_store::Error::NotFound { .. }) => {
                    known = None;
                }
                Err(e) => return Err(self.err(e)),
            }
        }
        Err(self.hostile(
            &format!("sessions/{session}"),
            "the ref keeps moving; try again",
        ))
    }

    /// What the remote has of `session` by its ref (the base a push of
    /// `head` sends from, the packs its ref names, how the ref is put):
    /// refused as a divergence when its head is not in `head`'s history,
    /// unless a purge here replaced it (objects-spec §8.3): then the ref
    /// is replaced, naming only a pack of everything `head` reaches, so
    /// remote gc takes the old packs.
    async fn remote_base(
        &self,
        store: &Store,
        session: &SessionId,
        head: &ObjectId,
    ) -> Result<(Option<ObjectId>, Vec<String>, PutMode)> {
        Ok(match self.read_ref(session).await? {
            None => (None, Vec::new(), PutMode::Create),
            Some((r, v)) if hel_store::purge::replaced(store, session)?.contains(&r.head) => {
                (None, Vec::new(), PutMode::Update(v))
            }
            Some((r, v)) => {
                if !hel_store::transfer::has_object(store, &r.head)?
                    || !hel_store::transfer::history_holds(store, head, &r.head)?
                {
                    return Err(RemoteError::Diverged {
                        remote: self.name.clone(),
                        session: session.to_string(),
                    });
                }
                (Some(r.head), r.packs, PutMode::Update(v))
            }
        })
    }

    /// Pull `session` (see [`hel_store::transfer::adopt`] for what moves).
    pub async fn pull(&self, store: &Store, session: &SessionId) -> Result<Pulled> {
        let Some((r, v)) = self.read_ref(session).await? else {
            return Err(RemoteError::NoRemoteSession {
                remote: self.name.clone(),
                session: session.to_string(),
            });
        };
        // The history a purge here replaced is not brought back: the
        // next push replaces it on the remote.
        if hel_store::purge::replaced(store, session)?.contains(&r.head) {
            return Err(RemoteError::Purged {
                remote: self.name.clone(),
                session: session.to_string(),
            });
        }
        let known = self.state(store, session)?.unwrap_or_default();
        // Packs this project already has the objects of (it pushed or
        // pulled them).
        let have: HashSet<&String> = known.packs.iter().collect();
        let mut attempt = 0;
        let (adopted, packs, bytes) = loop {
            let mut received = Vec::new();
            let mut bytes = 0u64;
            let want: Vec<&String> = r
                .packs
                .iter()
                .filter(|p| attempt > 0 || !have.contains(p))
                .collect();
            for p in &want {
                let got = self.fetch_pack(p).await?;
                bytes += got.1;
                if bytes > PULL_MAX {
                    return Err(self.hostile(
                        &format!("sessions/{session}"),
                        format!("its packs hold over {PULL_MAX} bytes, more than one pull takes"),
                    ));
                }
                received.push(got.0);
            }
            match hel_store::transfer::adopt(store, session, &r.head, &received) {
                Ok(a) => break (a, want.len() as u64, bytes),
                // A pack this project had from before went with a session
                // deleted here since: fetch them all, once.
                Err(hel_store::Error::Missing { .. })
                    if attempt == 0 && want.len() < r.packs.len() =>
                {
                    attempt += 1;
                }
                Err(e) => return Err(e.into()),
            }
        };
        let from = match &adopted {
            hel_store::transfer::Adopted::New => Some(None),
            hel_store::transfer::Adopted::FastForward { from } => Some(Some(*from)),
            _ => None,
        };
        if let Some(from) = from {
            let kind = hel_store::oplog::Kind::Pull;
            hel_store::oplog::record_adopted(store, kind, session, from, r.head)?;
        }
        self.set_state(
            store,
            session,
            &State {
                head: Some(r.head),
                e_tag: v.e_tag,
                version: v.version,
                packs: r.packs.clone(),
            },
        )?;
        Ok(Pulled {
            adopted,
            packs,
            bytes,
        })
    }

    async fn fetch_pack(&self, name: &str) -> Result<(Received, u64)> {
        let rel = format!("packs/{name}");
        let Some((bytes, _)) = self.get_bounded(&rel, PACK_MAX).await? else {
            return Err(self.hostile(&rel, "the ref names this pack, which is missing"));
        };
        let want = pack_hash(name).unwrap_or_default();
        if blake3::hash(&bytes).to_hex().as_str() != want {
            return Err(self.hostile(&rel, "its bytes do not hash to its name"));
        }
        let source = PathBuf::from(format!("remote {}: {rel}", self.name));
        let received = hel_store::transfer::receive_pack(&bytes, &source)?;
        Ok((received, bytes.len() as u64))
    }

    /// Every session on the remote, from its ref (no conversation is read).
    pub async fn sessions(&self) -> Result<Vec<Listed>> {
        let metas: Vec<_> = self
            .store
            .list(Some(&self.path("sessions")))
            .try_collect()
            .await
            .map_err(|e| self.err(e))?;
        let mut ids = Vec::new();
        for m in metas {
            if let Some(Ok(id)) = m.location.filename().map(str::parse::<SessionId>) {
                ids.push(id);
            }
        }
        let mut out: Vec<Listed> = futures::stream::iter(ids)
            .map(|id| async move {
                let r = match self.read_ref(&id).await {
                    Ok(Some((r, _))) => Ok(r),
                    // Deleted while listing.
                    Ok(None) => Err(std::sync::Arc::new(RemoteError::NoRemoteSession {
                        remote: self.name.clone(),
                        session: id.to_string(),
                    })),
                    Err(e) => Err(std::sync::Arc::new(e)),
                };
                Listed {
                    session: id,
                    r#ref: r,
                }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        out.sort_by(|a, b| {
            let t = |l: &Listed| l.r#ref.as_ref().map(|r| r.updated_ms).unwrap_or(0);
            t(b).cmp(&t(a)).then(a.session.cmp(&b.session))
        });
        Ok(out)
    }

    /// Remove `session`'s ref (its packs go at a later remote gc). Returns
    /// whether there was one.
    pub async fn delete_session(&self, store: Option<&Store>, session: &SessionId) -> Result<bool> {
        let path = self.path(&format!("sessions/{session}"));
        let existed = match self.store.head(&path).await {
            Ok(_) => true,
            Err(object_store::Error::NotFound { .. }) => false,
            Err(e) => return Err(self.err(e)),
        };
        if existed {
            self.store.delete(&path).await.map_err(|e| self.err(e))?;
        }
        if let Some(s) = store {
            hel_store::transfer::remove_remote_state(s, &self.state_key(session))?;
        }
        Ok(existed)
    }

    /// The server's time now: written, then read back.
    async fn server_now(&self) -> Result<i64> {
        let p = self.path("gc/clock");
        self.store
            .put(&p, PutPayload::from_static(b"clock\n"))
            .await
            .map_err(|e| self.err(e))?;
        let m = self.store.head(&p).await.map_err(|e| self.err(e))?;
        Ok(m.last_modified.timestamp_millis())
    }

    /// Remote gc (objects-spec §12.6): packs no ref names are recorded as
    /// candidates; a candidate of an earlier run is deleted when no ref
    /// names it still and it was uploaded at least `grace` ago by the
    /// server's clock.
    pub async fn gc(&self, grace: Duration, dry_run: bool) -> Result<GcReport> {
        let mut report = GcReport::default();
        // The clock first, the refs after: see objects-spec for why.
        let now = self.server_now().await?;
        let listed = self.sessions().await?;
        let mut live: HashSet<String> = HashSet::new();
        for l in &listed {
            match &l.r#ref {
                Ok(r) => live.extend(r.packs.iter().cloned()),
                Err(e) => {
                    return Err(self.hostile(
                        &format!("sessions/{}", l.session),
                        format!("{e}; remote gc cannot know what is live, nothing was deleted"),
                    ))
                }
            }
        }
        report.refs = listed.len() as u64;
        let packs: Vec<_> = self
            .store
            .list(Some(&self.path("packs")))
            .try_collect()
            .await
            .map_err(|e| self.err(e))?;
        report.packs = packs.len() as u64;
        let previous: Candidates = match self.get_bounded("gc/candidates", 64 << 20).await? {
            Some((b, _)) => json::from_slice(&b, json::Limits::MESSAGE).unwrap_or_default(),
            None => Candidates::default(),
        };
        let before: BTreeSet<&String> = previous.packs.iter().collect();
        let grace_ms = grace.as_millis() as i64;
        let mut next = Vec::new();
        for m in &packs {
            let Some(name) = m.location.filename() else {
                continue;
            };
            if live.contains(name) {
                report.live += 1;
                continue;
            }
            let old = now - m.last_modified.timestamp_millis() >= grace_ms;
            if before.contains(&name.to_owned()) && old {
                if !dry_run {
                    match self.store.delete(&m.location).await {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                        Err(e) => return Err(self.err(e)),
                    }
                }
                report.deleted += 1;
                report.bytes_deleted += m.size;
            } else {
                next.push(name.to_owned());
            }
        }
        report.candidates = next.len() as u64;
        if !dry_run {
            let c = Candidates {
                recorded_ms: now,
                packs: next,
            };
            self.store
                .put(
                    &self.path("gc/candidates"),
                    PutPayload::from(serde_json::to_vec(&c).unwrap_or_default()),
                )
                .await
                .map_err(|e| self.err(e))?;
        }
        Ok(report)
    }

    /// Does `session` have checkpoints this project has not pushed here?
    pub fn changed_since_push(&self, store: &Store, session: &SessionId) -> Result<bool> {
        let head = match store.head(session) {
            Ok(h) => h,
            Err(hel_store::Error::NoCheckpoint { .. }) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        Ok(self.state(store, session)?.and_then(|s| s.head) != Some(head))
    }
}
