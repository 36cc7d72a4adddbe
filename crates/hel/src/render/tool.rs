//! How a finished tool call reads in the live view: an edit as its file
//! name and a diff, a command as its exit status and its last lines.
//! Everything here comes from outside hel (the model's arguments, a file's
//! text, a command's output): each line is stripped or escaped before it
//! is shown.

use std::sync::Mutex;

use hel_agent::text::{count, escape_line};

/// Diff lines shown of an edit before the rest is folded.
pub const DIFF_LINES: usize = 20;

/// Lines shown of each of a command's streams.
pub const OUTPUT_LINES: usize = 6;

/// Bytes of an edit's text diffed: past this the edit is not shown as a
/// diff (its result line says what happened).
const DIFF_BYTES: usize = 1 << 20;

/// The edit call running (id, name, arguments), for its diff when it ends.
static EDIT: Mutex<Option<(String, String, String)>> = Mutex::new(None);

/// One line of a diff or of a command's output, as shown.
#[derive(Debug, PartialEq, Eq)]
pub enum Shown {
    /// A removed line (red on a coloured terminal).
    Removed(String),
    /// An added line (green).
    Added(String),
    /// An unchanged line, a label or a count (dim).
    Plain(String),
    /// A line of output, as it is.
    Output(String),
}

/// The arguments of an edit (`write_file`, `search_replace`), parsed with
/// bounds; None for another tool or arguments that do not parse.
fn edit_args(name: &str, arguments: &str) -> Option<serde_json::Value> {
    if !matches!(name, "write_file" | "search_replace") || arguments.len() > 2 * DIFF_BYTES {
        return None;
    }
    let v = hel_store::json::parse(arguments.as_bytes(), hel_store::json::Limits::SMALL).ok()?;
    v.get("path")?.as_str()?;
    Some(v)
}

/// The line of a call starting: `hel: search_replace calc.py` for an edit
/// (None for another tool, shown as its arguments). The call is kept for
/// its diff when it ends.
pub fn started(id: &str, name: &str, arguments: &str) -> Option<String> {
    let args = edit_args(name, arguments);
    let mut edit = EDIT.lock().unwrap_or_else(|e| e.into_inner());
    *edit = args
        .is_some()
        .then(|| (id.to_owned(), name.to_owned(), arguments.to_owned()));
    let path = args?.get("path")?.as_str()?.to_owned();
    Some(format!("hel: {name} {path}"))
}

/// The diff of the edit `id` that ended well, if it was one (taken: asked
/// once).
pub fn finished_edit(id: &str) -> Option<Vec<Shown>> {
    let (eid, name, arguments) = EDIT.lock().unwrap_or_else(|e| e.into_inner()).take()?;
    if eid != id {
        return None;
    }
    let args = edit_args(&name, &arguments)?;
    let text = |k: &str| args.get(k).and_then(|v| v.as_str());
    let (old, new) = match name.as_str() {
        "search_replace" => (text("search")?, text("replace")?),
        _ => ("", text("content")?),
    };
    Some(diff(old, new))
}

/// The lines of `old` changed into `new`: each line marked ` `, `-` or
/// `+`, escaped, folded after [`DIFF_LINES`] with a count of the rest.
pub fn diff(old: &str, new: &str) -> Vec<Shown> {
    if old.len() > DIFF_BYTES || new.len() > DIFF_BYTES {
        return vec![Shown::Plain("  (too large to show as a diff)".to_owned())];
    }
    let d = similar::TextDiff::from_lines(old, new);
    let mut lines: Vec<Shown> = d
        .iter_all_changes()
        .map(|c| {
            let t = c.value();
            let t = t.strip_suffix('\n').unwrap_or(t);
            let t = t.strip_suffix('\r').unwrap_or(t);
            let t = escape_line(t);
            match c.tag() {
                similar::ChangeTag::Delete => Shown::Removed(format!("  -{t}")),
                similar::ChangeTag::Insert => Shown::Added(format!("  +{t}")),
                similar::ChangeTag::Equal => Shown::Plain(format!("   {t}")),
            }
        })
        .collect();
    if lines.len() > DIFF_LINES {
        let more = lines.len() - DIFF_LINES;
        lines.truncate(DIFF_LINES);
        lines.push(Shown::Plain(format!(
            "  … {}",
            count(more as u64, "more line", "more lines")
        )));
    }
    lines
}

/// A bash result (`exit=N\nstdout:\n…\nstderr:\n…`) as its status line
/// (`exit N`) and the last lines of each stream, stderr under a label of
/// its own; None when it is not shaped so.
pub fn command(content: &str) -> Option<(String, Vec<Shown>)> {
    let (first, rest) = content.split_once('\n')?;
    let status = first.strip_prefix("exit=")?;
    let rest = rest.strip_prefix("stdout:\n")?;
    let (out, err) = match rest.split_once("\nstderr:\n") {
        Some(parts) => parts,
        None => (rest.strip_suffix("\nstderr:").unwrap_or(rest), ""),
    };
    let mut lines = Vec::new();
    for (label, text) in [("stdout:", out), ("stderr:", err)] {
        let (earlier, last) = last_lines(text, OUTPUT_LINES);
        if last.is_empty() {
            continue;
        }
        lines.push(Shown::Plain(format!("  {label}")));
        if earlier > 0 {
            lines.push(Shown::Plain(format!(
                "    … {}",
                count(earlier as u64, "earlier line", "earlier lines")
            )));
        }
        lines.extend(last.into_iter().map(|l| Shown::Output(format!("    {l}"))));
    }
    Some((format!("exit {}", strip(status)), lines))
}

/// The last `n` lines of `text` with something to show, stripped (a line
/// redrawn with CR shows what it was last redrawn to), and how many such
/// lines came before them.
fn last_lines(text: &str, n: usize) -> (usize, Vec<String>) {
    let all: Vec<String> = text
        .split('\n')
        .map(|l| {
            let l = l.strip_suffix('\r').unwrap_or(l);
            strip(l.rsplit('\r').next().unwrap_or(l))
        })
        .filter(|l| !l.trim().is_empty())
        .collect();
    let earlier = all.len().saturating_sub(n);
    (earlier, all.into_iter().skip(earlier).collect())
}

/// `text` without escape sequences (CSI, OSC, DCS and the like, whole)
/// and without any other control character or bidi override; a tab is a
/// space.
pub fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\t' => out.push(' '),
            // ESC [ … final, or CSI (U+009B) … final.
            '\u{1b}' if chars.peek() == Some(&'[') => {
                chars.next();
                skip_csi(&mut chars);
            }
            '\u{9b}' => skip_csi(&mut chars),
            // OSC, DCS, SOS, PM, APC: up to BEL or ST (ESC \ or U+009C).
            '\u{1b}' if matches!(chars.peek(), Some(']' | 'P' | 'X' | '^' | '_')) => {
                chars.next();
                skip_string(&mut chars);
            }
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            // Any other escape: ESC and the character after it.
            '\u{1b}' => {
                chars.next();
            }
            '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => {}
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {}
            c => out.push(c),
        }
    }
    out
}

/// Skip a CSI's parameters and its final byte (`@`–`~`).
fn skip_csi(chars: &mut impl Iterator<Item = char>) {
    for c in chars.by_ref() {
        if ('\u{40}'..='\u{7e}').contains(&c) {
            break;
        }
    }
}

/// Skip a control string up to its end (BEL, ST or ESC \).
fn skip_string(chars: &mut std::iter::Peekable<impl Iterator<Item = char>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => break,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                break;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[Shown]) -> Vec<&str> {
        lines
            .iter()
            .map(|l| match l {
                Shown::Removed(t) | Shown::Added(t) | Shown::Plain(t) | Shown::Output(t) => {
                    t.as_str()
                }
            })
            .collect()
    }

    #[test]
    fn escape_sequences_and_controls_are_stripped() {
        assert_eq!(strip("\x1b[2J\x1b[1;1Hred\x1b[31m!\x1b[0m"), "red!");
        assert_eq!(strip("a\x1b]0;title\x07b\x1b]52;c;aGk=\x1b\\c"), "abc");
        assert_eq!(strip("a\u{9b}2Jb\u{9d}0;t\u{9c}c"), "abc");
        assert_eq!(strip("x\x1bPq#0\x1b\\y\x1b7z"), "xyz");
        assert_eq!(strip("t\tu\x08v\x00w\x7f\u{202e}é한"), "t uvwé한");
    }

    #[test]
    fn an_edit_shows_its_file_and_diff_escaped_and_folded() {
        let args = r#"{"path":"calc.py","search":"def add(a, b):\n    return a - b\n","replace":"def add(a, b):\n    return a + b\u001b[2J\n"}"#;
        assert_eq!(
            started("c1", "search_replace", args).as_deref(),
            Some("hel: search_replace calc.py")
        );
        let d = finished_edit("c1").unwrap();
        assert_eq!(
            texts(&d),
            [
                "   def add(a, b):",
                "  -    return a - b",
                "  +    return a + b^[[2J"
            ]
        );
        assert!(matches!(d[1], Shown::Removed(_)) && matches!(d[2], Shown::Added(_)));
        // Asked once; another tool is shown as its arguments.
        assert!(finished_edit("c1").is_none());
        assert!(started("c2", "bash", r#"{"command":"ls"}"#).is_none());
        assert!(finished_edit("c2").is_none());
        // A long new file is folded with a count.
        let content: String = (0..50).map(|i| format!("line {i}\n")).collect();
        let d = diff("", &content);
        assert_eq!(d.len(), DIFF_LINES + 1);
        assert_eq!(texts(&d)[DIFF_LINES], "  … 30 more lines");
        // Arguments that do not parse (a repeated key) show no diff.
        assert!(started(
            "c3",
            "write_file",
            r#"{"path":"a","path":"b","content":""}"#
        )
        .is_none());
    }

    #[test]
    fn a_command_shows_its_status_and_last_lines_apart() {
        let stderr: String = (1..=9).map(|i| format!("err {i}\n")).collect();
        let content =
            format!("exit=1\nstdout:\nok\x1b]0;t\x07 \n\nstderr:\n{stderr}AssertionError\n");
        let (status, lines) = command(&content).unwrap();
        assert_eq!(status, "exit 1");
        assert_eq!(
            texts(&lines),
            [
                "  stdout:",
                "    ok ",
                "  stderr:",
                "    … 4 earlier lines",
                "    err 5",
                "    err 6",
                "    err 7",
                "    err 8",
                "    err 9",
                "    AssertionError",
            ]
        );
        let (status, lines) = command("exit=0\nstdout:\n\nstderr:\n").unwrap();
        assert_eq!((status.as_str(), lines.len()), ("exit 0", 0));
        assert!(command("denied: no").is_none());
    }
}
