//! What the store commands share: the project they look at, and how
//! they print.

use std::io::Write;
use std::path::PathBuf;

use serde_json::ser::{Formatter, PrettyFormatter};

use crate::exit::Exit;

/// Print a line of a report for people. What it shows came from the store
/// (instructions, messages, paths), so control characters are escaped.
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", hel_agent::terminal::escape_text(&format!($($arg)*)))
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

/// The project: the current directory.
pub(super) fn project() -> Result<PathBuf, Exit> {
    std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| Exit::refused(format!("cannot use the current directory: {e}")))
}
