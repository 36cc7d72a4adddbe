//! What the store commands share: the project they look at, and how
//! they print.

use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

use hel_agent::Project;

use serde_json::ser::{Formatter, PrettyFormatter};

use crate::exit::Exit;

/// Print a line of a report for people. What it shows came from the store
/// (instructions, messages, paths), so control characters are escaped.
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", hel_agent::text::escape_text(&format!($($arg)*)))
    };
}
pub(crate) use say;

/// A report as JSON.
pub(super) fn print_json<T: serde::Serialize>(v: &T) {
    let mut out = std::io::stdout().lock();
    let _ = write_json(&mut out, v).and_then(|()| writeln!(out).map_err(serde_json::Error::io));
}

/// `v` as pretty JSON into `w`, safe on a terminal: JSON escapes C0
/// controls itself; C1 controls, DEL and the bidi embeddings, overrides
/// and isolates that stored text may hold are written as `\uXXXX` escapes
/// too (the same JSON value, nothing a terminal acts on).
pub(super) fn write_json<W: Write, T: serde::Serialize>(
    w: &mut W,
    v: &T,
) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(w, TerminalSafe(PrettyFormatter::new()));
    v.serialize(&mut ser)
}

/// [`PrettyFormatter`], with the characters `write_json` names escaped.
struct TerminalSafe(PrettyFormatter<'static>);

macro_rules! delegate {
    ($($name:ident($($arg:ident: $t:ty),*);)*) => {$(
        fn $name<W: ?Sized + Write>(&mut self, w: &mut W $(, $arg: $t)*) -> std::io::Result<()> {
            self.0.$name(w $(, $arg)*)
        }
    )*};
}

impl Formatter for TerminalSafe {
    delegate! {
        begin_array();
        end_array();
        begin_array_value(first: bool);
        end_array_value();
        begin_object();
        end_object();
        begin_object_key(first: bool);
        begin_object_value();
        end_object_value();
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let unsafe_char = |c: char| matches!(c, '\u{7f}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        let mut rest = fragment;
        while let Some(at) = rest.find(unsafe_char) {
            let c = rest[at..].chars().next().unwrap_or_default();
            w.write_all(&rest.as_bytes()[..at])?;
            write!(w, "\\u{:04x}", c as u32)?;
            rest = &rest[at + c.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }
}

/// `--project DIR`, set once by `main` before any command runs.
static GIVEN: OnceLock<Option<PathBuf>> = OnceLock::new();
/// The project, found at its first use.
static FOUND: OnceLock<Project> = OnceLock::new();

/// Take `--project DIR` (None: find the project from the current
/// directory). Only the first call counts.
pub fn set_project(dir: Option<PathBuf>) {
    let _ = GIVEN.set(dir);
}

/// The project the commands work on ([`Project::find`]), found once; its
/// root is said on stderr when it is not the current directory.
pub(super) fn here() -> Result<&'static Project, Exit> {
    if let Some(p) = FOUND.get() {
        return Ok(p);
    }
    let found = Project::find(GIVEN.get().and_then(|d| d.as_deref()))?;
    let root = (found.root != found.cwd).then_some(found.root.as_path());
    if let Some(text) = crate::render::project_line(root, found.found, &[]) {
        crate::render::line(&text);
    }
    Ok(FOUND.get_or_init(|| found))
}

/// The project's root: where `.hel/` is, and what sessions record.
pub(super) fn project() -> Result<PathBuf, Exit> {
    here().map(|p| p.root.clone())
}
