//! Opening a store by its format, and the way from one format to the next.
//!
//! A store's `format` file names its format (`hel-store-format 6`). This
//! hel reads and writes format [`FORMAT_VERSION`] only. A store of any
//! other format (an earlier one, which only pre-release hels wrote; a
//! newer one; a `format` file that names none) is refused when it is
//! opened, with one line naming what was found and what to do, before
//! anything is written ([`open`]).
//!
//! The next format comes with a [`Step`] from this one in [`STEPS`], run
//! when this hel opens a store of the step's format ([`run`]): under the
//! store lock held exclusively (no other hel writes meanwhile), refused
//! while any session's lease is held (a hel at work would go on writing
//! by the old rules), the step's writes made durable before the `format`
//! file is renamed to the new number ([`Layout::publish_format`]: a new
//! file under `tmp/`, synced, renamed over `format`, `.hel/` synced). The
//! rename is the moment the store changes format: a kill before it leaves
//! a store of the old format, which the next open upgrades again, so every
//! step must be safe to run again from its start.
//!
//! **A format change needs a figure a user would notice.** Every format
//! costs readers, writers, tests and a step here for as long as stores of
//! it exist. A new format is made only when a measurement at a realistic
//! size shows a difference a person would notice (a listing, resume or
//! commit faster by 100 ms or more, a store a tenth smaller, damage that
//! could not be detected before), and the change that makes it states
//! that figure. Formats 1 to 5 were pre-release layouts, each replaced
//! within days; format 6 is the first that a release reads.

use crate::dir::Dir;
use crate::format::FORMAT_VERSION;
use crate::layout::{Layout, StoreFormat};
use crate::lock::{self, Exclusive};
use crate::odb::Odb;
use crate::{Error, Result, SessionId};

pub use crate::error::UpgradeError;

/// The way from store format `from` to `to`: `apply` makes every change
/// the new format needs (durably, and safe to run again from its start);
/// [`run`] holds the locks and renames the `format` file after it.
pub(crate) struct Step {
    pub from: u64,
    pub to: u64,
    pub apply: fn(&Exclusive<'_, Odb>) -> Result<()>,
}

/// The steps this hel knows, the last one's `to` [`FORMAT_VERSION`]:
/// none, since format 6 is the first released format.
const STEPS: &[Step] = &[];

/// The store of the project open as `project`, if it has one: of this
/// build's format (or being made, its `format` file not yet written),
/// upgraded by [`STEPS`] if it has a step, else refused ([`refusal`])
/// with nothing written.
pub(crate) fn open(project: &Dir) -> Result<Option<Odb>> {
    let Some((layout, found)) = Layout::open(project)? else {
        return Ok(None);
    };
    let layout = Odb::new(layout);
    accept(&layout, found, STEPS)?;
    Ok(Some(layout))
}

/// `Ok` when a store whose `format` file says `found` is of this build's
/// format, after running the `steps` that lead there from `found`.
fn accept(layout: &Odb, mut found: StoreFormat, steps: &[Step]) -> Result<()> {
    loop {
        match found {
            StoreFormat::Absent => return Ok(()),
            StoreFormat::Number(FORMAT_VERSION) => return Ok(()),
            StoreFormat::Number(n) => match steps.iter().find(|s| s.from == n) {
                Some(step) => {
                    run(layout, step)?;
                    found = StoreFormat::Number(step.to);
                }
                None => return Err(refusal(layout, &found)),
            },
            StoreFormat::Garbled(_) | StoreFormat::Missing(_) => {
                return Err(refusal(layout, &found))
            }
        }
    }
}

/// The one-line refusal of a store whose `format` file says `found`.
fn refusal(layout: &Layout, found: &StoreFormat) -> Error {
    let path = layout.root().path().to_owned();
    match found {
        StoreFormat::Number(n) if *n > FORMAT_VERSION => Error::NewerStore {
            path,
            found: *n,
            supported: FORMAT_VERSION,
        },
        StoreFormat::Number(n) => Error::OlderStore { path, found: *n },
        StoreFormat::Garbled(found) => Error::UnknownFormat {
            path,
            found: found.clone(),
        },
        StoreFormat::Missing(found) => Error::FormatMissing {
            path,
            found: found.clone(),
        },
        StoreFormat::Absent => Error::Internal(format!(
            "{} was refused for having no format file",
            path.display()
        )),
    }
}

/// Create the store of `project` (mode 0700, `.gitignore` of `*`, and
/// its subdirectories) where absent, and open it.
pub(crate) fn create(project: &Dir) -> Result<Odb> {
    let layout = Odb::new(Layout::create(project)?);
    init(&layout, project)?;
    Ok(layout)
}

/// Make what a store holds where absent ([`Layout::init`]), its format
/// settled by [`write_format`]; a store being made gets its identity
/// first (`identity.rs`).
pub(crate) fn init(layout: &Odb, project: &Dir) -> Result<()> {
    layout.init(|| {
        if layout.read_format()? == StoreFormat::Absent {
            crate::place::made(layout, project)?;
        }
        write_format(layout)
    })
}

/// Write the `format` file of a store being made, last; a store whose
/// file another process wrote meanwhile is judged as an open judges it.
pub(crate) fn write_format(layout: &Odb) -> Result<()> {
    match layout.read_format()? {
        StoreFormat::Absent => layout.publish_format(FORMAT_VERSION),
        found => accept(layout, found, STEPS),
    }
}

/// Upgrade the store open as `layout` by `step` (see the module doc).
/// `Ok` when the store is of format `step.to` now (another process may
/// have upgraded it meanwhile); an error leaves it of format `step.from`.
pub(crate) fn run(layout: &Odb, step: &Step) -> Result<()> {
    let failed = |source: Error| -> Error {
        match source {
            Error::Upgrade(_) => source,
            source => Error::Upgrade(Box::new(UpgradeError::Failed {
                store: layout.root().path().to_owned(),
                found: step.from,
                to: step.to,
                source,
            })),
        }
    };
    let lock = Exclusive::take(layout).map_err(failed)?;
    // As the format file says now that no writer is at work.
    match layout.read_format()? {
        StoreFormat::Number(n) if n == step.to => return Ok(()),
        StoreFormat::Number(n) if n == step.from => {}
        other => return Err(refusal(layout, &other)),
    }
    refuse_if_busy(layout, step)?;
    crate::failpoint::kill("upgrade-locked");
    (step.apply)(&lock).map_err(failed)?;
    layout.publish_format(step.to).map_err(failed)
}

/// `Err` naming the first session whose lease is held.
fn refuse_if_busy(layout: &Odb, step: &Step) -> Result<()> {
    let Some(dir) = layout.sessions()? else {
        return Ok(());
    };
    for e in dir.entries()? {
        let Some(Ok(session)) = e.name.to_str().map(str::parse::<SessionId>) else {
            continue;
        };
        if lock::is_busy(layout, &session)? {
            return Err(Error::Upgrade(Box::new(UpgradeError::Busy {
                store: layout.root().path().to_owned(),
                found: step.from,
                to: step.to,
                holder: lock::holder_of(layout, &session),
                session,
            })));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The mechanism on a synthetic next format: a step from this format
    //! to a made-up one, one past it.
    use super::*;
    use crate::lock::SessionLease;

    const NEXT: u64 = FORMAT_VERSION + 1;

    /// The made-up step: checks that no one else can take the store lock
    /// while it runs, and leaves a mark.
    fn step_to_next(lock: &Exclusive<'_, Odb>) -> Result<()> {
        let root = lock.layout.root();
        let other = std::fs::File::open(root.path().join(".store.lock/lock")).unwrap();
        assert!(
            other.try_lock_shared().is_err(),
            "the step runs under the store lock held exclusively"
        );
        root.create_new("step-ran", 0o600)?;
        Ok(())
    }

    const STEP: Step = Step {
        from: FORMAT_VERSION,
        to: NEXT,
        apply: step_to_next,
    };

    #[test]
    fn a_step_to_the_next_format_runs_locked_refuses_while_a_lease_is_held_and_renames_format_last()
    {
        let dir = tempfile::tempdir().unwrap();
        let project = Dir::open_path(dir.path()).unwrap();
        let layout = create(&project).unwrap();
        let root = dir.path().join(".hel");
        let format = || std::fs::read_to_string(root.join("format")).unwrap();
        assert_eq!(format(), format!("hel-store-format {FORMAT_VERSION}\n"));

        // A session in use: refused, nothing written.
        let sid = SessionId::new_random();
        let lease = SessionLease::acquire(&layout, &sid, true).unwrap();
        let e = run(&layout, &STEP).unwrap_err();
        assert!(
            matches!(&e, Error::Upgrade(u) if matches!(**u, UpgradeError::Busy { ref session, .. } if *session == sid)),
            "{e}"
        );
        assert!(e.to_string().contains(&format!(
            "is a store of format {FORMAT_VERSION}: this hel upgrades it to format {NEXT} before using it, which it cannot do while session {sid} is in use"
        )));
        assert_eq!(format(), format!("hel-store-format {FORMAT_VERSION}\n"));
        assert!(!root.join("step-ran").exists());
        drop(lease);

        // Free: the step runs, then `format` names the next format, its
        // temporary file renamed away.
        run(&layout, &STEP).unwrap();
        assert!(root.join("step-ran").exists());
        assert_eq!(format(), format!("hel-store-format {NEXT}\n"));
        assert_eq!(layout.format(), NEXT);
        assert_eq!(std::fs::read_dir(root.join("tmp")).unwrap().count(), 0);
        // Run again (another process got there first): nothing to do.
        run(&layout, &STEP).unwrap();

        // This build, which has no such step, refuses the store now.
        let e = open(&project).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{} is a store of format {NEXT}, written by a newer hel; this hel reads format {FORMAT_VERSION} only: upgrade hel",
                root.display()
            )
        );
    }
}
