//! The workspace's structure, read from its sources: no crate's files
//! import each other in a circle, no function of the product is longer than
//! 150 lines, and hel-store's and hel-object's modules import only their
//! own layer and the ones below (the tables their crate docs give).
//!
//! What is read: every crate the root Cargo.toml lists; for each, every
//! crate root (src/lib.rs, src/main.rs, src/bin/*.rs) and the files its
//! `mod x;` declarations reach. Comments, string and char literals are
//! blanked, and so is every item under `#[cfg(test)]` or the `testing`
//! feature (a test may reach anything), with the files only such items
//! declare.
//!
//! Import circles. A module is its file: an inline `mod x { .. }` counts
//! as the file it is written in. A file imports another when it names
//! something the other holds: a path in code or in a private `use`
//! (`crate::a::b::X`, `super::X`, `self::x::Y`, a child module's `x::Y`,
//! or a name a `use` brought in, as `a::Y` after `use crate::a;`), or a
//! macro the other file defines. A name is the file's of the module the
//! path ends in, including the names that module re-exports (`pub use`):
//! `crate::tools::Decision` names tools/mod.rs, whatever file it takes
//! `Decision` from. Only the crate root is a pure face: a path through its
//! re-exports names the file they come from (`crate::Error`, re-exported
//! by lib.rs from error.rs, names error.rs; `crate::ObjectId`, which
//! hel-store's lib.rs takes from hel-object, names no file of hel-store).
//! `mod` and `pub use` lines are declarations,
//! not imports (a file that also uses a name it re-exports imports it). A
//! circle is a strongly connected component of more than one file; the
//! failure names each with one place (file:line and the path written
//! there) per edge inside it.
//!
//! Long functions. In every crate but hel-bench (its benchmarks are not the
//! product), a function's length is counted from the line of its `fn`
//! keyword to the line of its body's closing brace, both included
//! (attributes and doc comments above it are not counted; a nested
//! function counts in its own length and in the outer's). The failure
//! names each with file:line and length.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest a function of the product may be, in lines.
const MAX_FN_LINES: usize = 150;

/// `src` with comments, string and char literals blanked (newlines kept,
/// so offsets keep their line numbers).
fn blank(src: &str) -> Vec<u8> {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let wipe = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |p| i + p);
                wipe(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let (mut depth, mut j) = (1, i + 2);
                while j < b.len() && depth > 0 {
                    if b[j..].starts_with(b"/*") {
                        depth += 1;
                        j += 2;
                    } else if b[j..].starts_with(b"*/") {
                        depth -= 1;
                        j += 2;
                    } else {
                        j += 1;
                    }
                }
                wipe(&mut out, i, j);
                i = j;
            }
            b'r' | b'b'
                if (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
                    && raw_string_at(b, i).is_some() =>
            {
                let end = raw_string_at(b, i).unwrap_or(b.len());
                wipe(&mut out, i, end);
                i = end;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                wipe(&mut out, i, j + 1);
                i = j + 1;
            }
            // A char literal ('x', '\n', '\u{7f}'), not a lifetime ('a).
            b'\'' => {
                let end = if b.get(i + 1) == Some(&b'\\') {
                    b[i + 2..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .map(|p| i + 2 + p + 1)
                } else {
                    let ch = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                    (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 2 + ch)
                };
                match end {
                    Some(end) => {
                        wipe(&mut out, i, end);
                        i = end;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// The end of the raw string (`r"…"`, `r#"…"#`, `br"…"`) starting at `i`.
fn raw_string_at(b: &[u8], i: usize) -> Option<usize> {
    let r = if b[i] == b'b' { i + 1 } else { i };
    if b.get(r) != Some(&b'r') {
        return None;
    }
    let hashes = b[r + 1..].iter().take_while(|&&c| c == b'#').count();
    if b.get(r + 1 + hashes) != Some(&b'"') {
        return None;
    }
    let mut close = vec![b'"'];
    close.extend(std::iter::repeat_n(b'#', hashes));
    let start = r + 2 + hashes;
    Some(
        b[start..]
            .windows(close.len())
            .position(|w| w == close.as_slice())
            .map_or(b.len(), |p| start + p + close.len()),
    )
}

/// Blank the items under `#[cfg(test)]`, `#[cfg(feature = "testing")]`
/// and the like (not `cfg(not(..))`), and `#[test]` functions. `code` is
/// `original` blanked (the attribute's string is read from `original`).
fn drop_test_items(original: &str, code: &mut [u8]) {
    let text = String::from_utf8_lossy(code).into_owned();
    let mut from = 0;
    loop {
        let next = ["#[cfg(", "#[test]"]
            .iter()
            .filter_map(|pat| text[from..].find(pat).map(|p| from + p))
            .min();
        let Some(start) = next else {
            break;
        };
        let Some(close) = text[start..].find(']').map(|c| start + c) else {
            break;
        };
        let attr = &original[start..close];
        from = close + 1;
        let test_only = attr == "#[test"
            || (!attr.contains("not(") && (attr.contains("test") || attr.contains("\"testing\"")));
        if !test_only {
            continue;
        }
        // The item: up to a `;` or `,` at its depth, or through the
        // matching `}` of the first `{` at its depth.
        let mut depth = 0i64;
        let mut end = code.len();
        for (j, &c) in code.iter().enumerate().skip(close + 1) {
            match c {
                b'{' | b'(' | b'[' => depth += 1,
                b'}' | b')' | b']' => {
                    depth -= 1;
                    if depth < 0 {
                        end = j;
                        break;
                    }
                    if depth == 0 && c == b'}' {
                        end = j + 1;
                        break;
                    }
                }
                b';' | b',' if depth == 0 => {
                    end = j + 1;
                    break;
                }
                _ => {}
            }
        }
        for c in &mut code[start..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = end.max(from);
    }
}

/// A token of blanked code: an identifier, `::`, or one other character.
#[derive(Debug)]
struct Tok {
    text: String,
    at: usize,
}

fn tokens(code: &[u8]) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let c = code[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80 {
            let s = i;
            while i < code.len()
                && (code[i].is_ascii_alphanumeric() || code[i] == b'_' || code[i] >= 0x80)
            {
                i += 1;
            }
            out.push(Tok {
                text: String::from_utf8_lossy(&code[s..i]).into_owned(),
                at: s,
            });
        } else if code[i..].starts_with(b"::") {
            out.push(Tok {
                text: "::".into(),
                at: i,
            });
            i += 2;
        } else {
            out.push(Tok {
                text: (c as char).to_string(),
                at: i,
            });
            i += 1;
        }
    }
    out
}

fn is_ident(t: &str) -> bool {
    t.starts_with(|c: char| c.is_alphabetic() || c == '_')
}

/// Module paths, from the crate root (`[]`).
type ModPath = Vec<String>;

/// One name a `use` item brings in: `name` (None for `_` and globs) for
/// `path`, as written (relative to the module the `use` is in).
#[derive(Debug, Clone)]
struct UseEntry {
    name: Option<String>,
    path: Vec<String>,
    glob: bool,
}

/// What a file declares and names, each with its module (the file's own,
/// or an inline module inside it) and offset.
#[derive(Debug, Default)]
struct FileFacts {
    /// `mod x;` and `mod x { .. }` declarations: (module, child, inline).
    mods: Vec<(ModPath, String, bool)>,
    /// `use` items: (module, public, entry, offset).
    uses: Vec<(ModPath, bool, UseEntry, usize)>,
    /// Paths of two or more segments in code: (module, segments, offset).
    paths: Vec<(ModPath, Vec<String>, usize)>,
    /// Identifiers outside `use` items, with their first offset per module.
    idents: BTreeMap<(ModPath, String), usize>,
    /// `macro_rules!` definitions.
    macros_defined: BTreeSet<String>,
    /// Macro invocations `name!` with their first offset.
    macros_used: BTreeMap<String, usize>,
}

/// Parse a use tree at `toks[i..]`, prefix `prefix`; returns the index
/// after it.
fn use_tree(toks: &[Tok], mut i: usize, prefix: Vec<String>, out: &mut Vec<UseEntry>) -> usize {
    let mut segs = prefix;
    if toks.get(i).is_some_and(|t| t.text == "::") {
        // `::name`: an external crate.
        segs.push("::".into());
        i += 1;
    }
    while i < toks.len() {
        let t = toks[i].text.as_str();
        if t == "{" {
            i += 1;
            while i < toks.len() && toks[i].text != "}" {
                if toks[i].text == "," {
                    i += 1;
                    continue;
                }
                i = use_tree(toks, i, segs.clone(), out);
            }
            return i + 1;
        }
        if t == "*" {
            out.push(UseEntry {
                name: None,
                path: segs,
                glob: true,
            });
            return i + 1;
        }
        if !is_ident(t) {
            return i;
        }
        segs.push(t.to_owned());
        i += 1;
        if toks.get(i).is_some_and(|t| t.text == "::") {
            i += 1;
            continue;
        }
        let mut name = segs.last().cloned();
        if toks.get(i).is_some_and(|t| t.text == "as") {
            name = toks.get(i + 1).map(|t| t.text.clone());
            i += 2;
        }
        if segs.last().is_some_and(|s| s == "self") {
            segs.pop();
            if name.as_deref() == Some("self") {
                name = segs.last().cloned();
            }
        }
        if name.as_deref() == Some("_") {
            name = None;
        }
        out.push(UseEntry {
            name,
            path: segs,
            glob: false,
        });
        return i;
    }
    i
}

/// Read one file's blanked code, whose own module is `module`.
fn facts(code: &[u8], module: &ModPath) -> FileFacts {
    let toks = tokens(code);
    let mut f = FileFacts::default();
    // Inline modules open: (brace depth inside them, module).
    let mut scopes: Vec<(usize, ModPath)> = Vec::new();
    let mut depth = 0usize;
    let mut pending_mod: Option<ModPath> = None;
    let mut i = 0;
    while i < toks.len() {
        let cur = scopes.last().map_or(module, |s| &s.1).clone();
        let t = toks[i].text.as_str();
        match t {
            "{" => {
                depth += 1;
                if let Some(m) = pending_mod.take() {
                    scopes.push((depth, m));
                }
            }
            "}" => {
                if scopes.last().is_some_and(|s| s.0 == depth) {
                    scopes.pop();
                }
                depth = depth.saturating_sub(1);
            }
            "mod" if toks.get(i + 1).is_some_and(|n| is_ident(&n.text)) => {
                let name = toks[i + 1].text.clone();
                match toks.get(i + 2).map(|t| t.text.as_str()) {
                    Some(";") => f.mods.push((cur.clone(), name, false)),
                    Some("{") => {
                        f.mods.push((cur.clone(), name.clone(), true));
                        let mut m = cur.clone();
                        m.push(name);
                        pending_mod = Some(m);
                    }
                    _ => {}
                }
                i += 2;
                continue;
            }
            "use" if i == 0 || toks[i - 1].text != "::" => {
                let public = i > 0
                    && (toks[i - 1].text == "pub"
                        || (toks[i - 1].text == ")"
                            && toks[..i - 1]
                                .iter()
                                .rev()
                                .position(|t| t.text == "(")
                                .is_some_and(|p| {
                                    let open = i - 2 - p;
                                    open > 0 && toks[open - 1].text == "pub"
                                })));
                let at = toks[i].at;
                let mut entries = Vec::new();
                let mut j = use_tree(&toks, i + 1, Vec::new(), &mut entries);
                while j < toks.len() && toks[j].text != ";" {
                    j += 1;
                }
                for e in entries {
                    f.uses.push((cur.clone(), public, e, at));
                }
                i = j + 1;
                continue;
            }
            "macro_rules" if toks.get(i + 1).is_some_and(|t| t.text == "!") => {
                if let Some(n) = toks.get(i + 2) {
                    f.macros_defined.insert(n.text.clone());
                }
                i += 3;
                continue;
            }
            _ if is_ident(t) => {
                let after_sep = i > 0 && toks[i - 1].text == "::";
                if toks.get(i + 1).is_some_and(|n| n.text == "!") && !after_sep {
                    f.macros_used.entry(t.to_owned()).or_insert(toks[i].at);
                }
                f.idents
                    .entry((cur.clone(), t.to_owned()))
                    .or_insert(toks[i].at);
                if !after_sep && toks.get(i + 1).is_some_and(|n| n.text == "::") {
                    let start = toks[i].at;
                    let mut segs = vec![t.to_owned()];
                    let mut j = i + 1;
                    while j + 1 < toks.len() && toks[j].text == "::" && is_ident(&toks[j + 1].text)
                    {
                        segs.push(toks[j + 1].text.clone());
                        j += 2;
                    }
                    if segs.len() > 1 {
                        f.paths.push((cur.clone(), segs, start));
                    }
                    i = j;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    f
}

/// What one module is and holds.
#[derive(Debug, Default)]
struct Module {
    /// The file it is written in (relative to the crate directory).
    file: String,
    children: BTreeSet<String>,
    /// The names its `use` items bring in, each with its path as written.
    /// A path through a name the crate root re-exports follows it there.
    uses: BTreeMap<String, Vec<String>>,
}

/// One crate target's modules and files.
struct CrateGraph {
    modules: BTreeMap<ModPath, Module>,
    /// Per file (relative to the crate directory): its facts.
    files: BTreeMap<String, FileFacts>,
    /// Per file: its code, blanked, for line numbers.
    code: BTreeMap<String, Vec<u8>>,
    /// The macros defined (`macro_rules!`), each with its file's module.
    macros: BTreeMap<String, ModPath>,
}

/// The file a module declared by `mod name;` in `decl_file` (whose own
/// module is `file_mod`), inside module `in_mod`, is read from.
fn child_file(
    crate_dir: &Path,
    decl_file: &str,
    file_mod: &ModPath,
    in_mod: &ModPath,
    name: &str,
) -> Option<String> {
    let decl = Path::new(decl_file);
    let stem = decl.file_stem()?.to_string_lossy().into_owned();
    let parent = decl.parent().unwrap_or(Path::new(""));
    let mut dir = if matches!(stem.as_str(), "mod" | "lib" | "main") || file_mod.is_empty() {
        parent.to_path_buf()
    } else {
        parent.join(&stem)
    };
    for inline in &in_mod[file_mod.len()..] {
        dir.push(inline);
    }
    [
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| crate_dir.join(p).is_file())
    .map(|p| p.to_string_lossy().into_owned())
}

/// Read the crate target whose root is `root` (relative to `crate_dir`).
fn read_crate(crate_dir: &Path, root: &str) -> CrateGraph {
    let mut g = CrateGraph {
        modules: BTreeMap::new(),
        files: BTreeMap::new(),
        code: BTreeMap::new(),
        macros: BTreeMap::new(),
    };
    let mut todo = vec![(root.to_owned(), ModPath::new())];
    while let Some((file, module)) = todo.pop() {
        let text = std::fs::read_to_string(crate_dir.join(&file))
            .unwrap_or_else(|e| panic!("{}: {e}", crate_dir.join(&file).display()));
        let mut code = blank(&text);
        drop_test_items(&text, &mut code);
        let f = facts(&code, &module);
        g.modules.entry(module.clone()).or_default().file = file.clone();
        for (in_mod, name, inline) in &f.mods {
            let mut child = in_mod.clone();
            child.push(name.clone());
            g.modules
                .entry(in_mod.clone())
                .or_default()
                .children
                .insert(name.clone());
            if *inline {
                g.modules.entry(child).or_default().file = file.clone();
            } else if let Some(path) = child_file(crate_dir, &file, &module, in_mod, name) {
                todo.push((path, child));
            }
        }
        for (in_mod, _, e, _) in &f.uses {
            if let Some(name) = &e.name {
                g.modules
                    .entry(in_mod.clone())
                    .or_default()
                    .uses
                    .insert(name.clone(), e.path.clone());
            }
        }
        for m in &f.macros_defined {
            g.macros.insert(m.clone(), module.clone());
        }
        g.code.insert(file.clone(), code);
        g.files.insert(file, f);
    }
    g
}

/// Where a path leads.
#[derive(Debug, PartialEq)]
enum Target {
    /// Outside the crate, or not a path to a module or item of it.
    Outside,
    /// A module itself.
    Module(ModPath),
    /// An item of a module.
    Item(ModPath),
}

impl CrateGraph {
    /// Where `segs`, written in module `scope`, leads: followed through
    /// child modules, `use` names and `pub use` re-exports.
    fn resolve(&self, scope: &ModPath, segs: &[String], hops: usize) -> Target {
        if hops > 16 || segs.is_empty() {
            return Target::Outside;
        }
        let mut rest = segs;
        let mut cur = match segs[0].as_str() {
            "crate" => {
                rest = &segs[1..];
                ModPath::new()
            }
            "self" | "super" => {
                let mut m = scope.clone();
                while let Some(s) = rest.first().filter(|s| *s == "self" || *s == "super") {
                    if s == "super" && m.pop().is_none() {
                        return Target::Outside;
                    }
                    rest = &rest[1..];
                }
                m
            }
            first => {
                let here = &self.modules[scope];
                if here.children.contains(first) {
                    let mut m = scope.clone();
                    m.push(first.to_owned());
                    rest = &segs[1..];
                    m
                } else if let Some(path) = here.uses.get(first) {
                    let mut full = path.clone();
                    full.extend(segs[1..].iter().cloned());
                    return self.resolve(scope, &full, hops + 1);
                } else {
                    return Target::Outside;
                }
            }
        };
        for (k, seg) in rest.iter().enumerate() {
            let Some(m) = self.modules.get(&cur) else {
                return Target::Outside;
            };
            if m.children.contains(seg) {
                cur.push(seg.clone());
                continue;
            }
            // An item of `cur`; at the root, an exported macro's file, or
            // where the root takes it from.
            if cur.is_empty() {
                if let Some(home) = self.macros.get(seg) {
                    return Target::Item(home.clone());
                }
            }
            if let Some(path) = m.uses.get(seg).filter(|_| cur.is_empty()) {
                let mut full = path.clone();
                full.extend(rest[k + 1..].iter().cloned());
                // Another crate's item the root re-exports: that crate's.
                return self.resolve(&cur, &full, hops + 1);
            }
            return Target::Item(cur);
        }
        Target::Module(cur)
    }

    fn line(&self, file: &str, at: usize) -> usize {
        self.code[file][..at]
            .iter()
            .filter(|&&c| c == b'\n')
            .count()
            + 1
    }

    /// The import graph between files: for each edge, its first place.
    fn imports(&self) -> Graph {
        let mut g = Graph::new();
        let mut defined_in: BTreeMap<&str, &str> = BTreeMap::new();
        for (file, f) in &self.files {
            g.entry(file.clone()).or_default();
            for m in &f.macros_defined {
                defined_in.insert(m, file);
            }
        }
        for (file, f) in &self.files {
            let mut edge = |to: &str, at: usize, what: String| {
                if to != file {
                    let line = self.line(file, at);
                    g.entry(file.clone())
                        .or_default()
                        .entry(to.to_owned())
                        .or_insert_with(|| format!("{file}:{line} ({what})"));
                }
            };
            let file_of = |t: &Target| match t {
                Target::Item(m) => self.modules.get(m).map(|m| m.file.clone()),
                _ => None,
            };
            for (scope, public, e, at) in &f.uses {
                if e.glob {
                    if let Target::Module(m) = self.resolve(scope, &e.path, 0) {
                        if !*public {
                            edge(
                                &self.modules[&m].file,
                                *at,
                                format!("use {}::*", e.path.join("::")),
                            );
                        }
                    }
                    continue;
                }
                let target = self.resolve(scope, &e.path, 0);
                let Some(to) = file_of(&target) else {
                    continue;
                };
                let what = format!("use {}", e.path.join("::"));
                if !*public {
                    edge(&to, *at, what);
                } else if let Some(name) = &e.name {
                    // A re-export is an import where the file names it.
                    if let Some(&at) = f.idents.get(&(scope.clone(), name.clone())) {
                        edge(
                            &to,
                            at,
                            format!("{name}, re-exported from {}", e.path.join("::")),
                        );
                    }
                }
            }
            for (scope, segs, at) in &f.paths {
                let segs: Vec<String> = segs.clone();
                if let Some(to) = file_of(&self.resolve(scope, &segs, 0)) {
                    edge(&to, *at, segs.join("::"));
                }
            }
            for (name, at) in &f.macros_used {
                if let Some(to) = defined_in.get(name.as_str()) {
                    edge(to, *at, format!("{name}!"));
                }
            }
        }
        g
    }
}

/// An edge's first place, per file and file it imports.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// The strongly connected components of `g` with more than one file
/// (Tarjan's, iterative over an explicit stack).
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    let names: Vec<&String> = g.keys().collect();
    let index_of: BTreeMap<&String, usize> =
        names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let adj: Vec<Vec<usize>> = names
        .iter()
        .map(|n| {
            g[*n]
                .keys()
                .filter_map(|t| index_of.get(t).copied())
                .collect()
        })
        .collect();
    let n = names.len();
    let (mut index, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut next, mut out) = (Vec::new(), 0, Vec::new());
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on[root] = true;
        while let Some(&mut (v, ref mut e)) = work.last_mut() {
            if let Some(&w) = adj[v].get(*e) {
                *e += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on[w] = true;
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut scc = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    scc.push(names[w].clone());
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    out.push(scc);
                }
            }
        }
    }
    out.sort();
    out
}

/// Each circle with its edges, one place each.
fn report(label: &str, g: &Graph, found: &[Vec<String>]) -> String {
    let mut s = String::new();
    for scc in found {
        s += &format!(
            "{label}: a circle of {} files: {}\n",
            scc.len(),
            scc.join(", ")
        );
        for from in scc {
            for (to, at) in &g[from] {
                if scc.contains(to) {
                    s += &format!("  {from} -> {to}  at {at}\n");
                }
            }
        }
    }
    s
}

/// The functions of blanked `code` longer than `max` lines: (line of the
/// `fn`, name, length).
fn long_functions(code: &[u8], max: usize) -> Vec<(usize, String, usize)> {
    let toks = tokens(code);
    let line = |at: usize| code[..at].iter().filter(|&&c| c == b'\n').count() + 1;
    let mut out = Vec::new();
    for i in 0..toks.len() {
        if toks[i].text != "fn" || !toks.get(i + 1).is_some_and(|t| is_ident(&t.text)) {
            continue;
        }
        // The body: the first `{` outside parentheses and brackets, unless
        // a `;` ends a declaration first.
        let mut nest = 0i64;
        let mut j = i + 2;
        let mut open = None;
        while j < toks.len() {
            match toks[j].text.as_str() {
                "(" | "[" => nest += 1,
                ")" | "]" => nest -= 1,
                ";" if nest == 0 => break,
                "{" if nest == 0 => {
                    open = Some(j);
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        let Some(open) = open else {
            continue;
        };
        let mut depth = 0i64;
        let close = toks[open..].iter().position(|t| {
            match t.text.as_str() {
                "{" => depth += 1,
                "}" => depth -= 1,
                _ => {}
            }
            depth == 0
        });
        let Some(close) = close else {
            continue;
        };
        let len = line(toks[open + close].at) - line(toks[i].at) + 1;
        if len > max {
            out.push((line(toks[i].at), toks[i + 1].text.clone(), len));
        }
    }
    out
}

/// The workspace's root directory.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The member crates the root Cargo.toml lists (directories).
fn members() -> Vec<String> {
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    let start = manifest.find("members").expect("a members list");
    let list = &manifest[start..];
    let list = &list[list.find('[').unwrap() + 1..list.find(']').unwrap()];
    list.split(',')
        .map(|s| s.trim().trim_matches('"').to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// A crate's targets: (label, root file relative to the crate).
fn targets(crate_dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for root in ["src/lib.rs", "src/main.rs"] {
        if crate_dir.join(root).is_file() {
            out.push(root.to_owned());
        }
    }
    if let Ok(dir) = std::fs::read_dir(crate_dir.join("src/bin")) {
        let mut bins: Vec<String> = dir
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.ends_with(".rs") {
                    Some(format!("src/bin/{name}"))
                } else if e.path().join("main.rs").is_file() {
                    Some(format!("src/bin/{name}/main.rs"))
                } else {
                    None
                }
            })
            .collect();
        bins.sort();
        out.extend(bins);
    }
    out
}

#[test]
fn no_crate_imports_in_a_circle_and_no_function_is_over_150_lines() {
    let mut circles = String::new();
    let mut long = String::new();
    let mut read = 0;
    for member in members() {
        let krate = member.rsplit('/').next().unwrap().to_owned();
        let dir = workspace().join(&member);
        let mut seen_files = BTreeSet::new();
        for root in targets(&dir) {
            let g = read_crate(&dir, &root);
            let imports = g.imports();
            for circle in cycles(&imports) {
                circles += &report(
                    &format!("{krate} ({root})"),
                    &imports,
                    std::slice::from_ref(&circle),
                );
            }
            if krate == "hel-bench" {
                continue;
            }
            for (file, code) in &g.code {
                if !seen_files.insert(file.clone()) {
                    continue;
                }
                read += 1;
                for (line, name, len) in long_functions(code, MAX_FN_LINES) {
                    long += &format!("  {member}/{file}:{line} fn {name}: {len} lines\n");
                }
            }
        }
    }
    assert!(
        read > 100,
        "read only {read} files: is the workspace there?"
    );
    assert!(
        circles.is_empty() && long.is_empty(),
        "import circles:\n{circles}\nfunctions over {MAX_FN_LINES} lines (from the `fn` line to its closing brace):\n{long}"
    );
}

/// The checker itself, on a crate written for it: it follows `crate::`,
/// `super::`, child modules, `use` names and re-exports to the file they
/// name, counts an inline module as its file and a macro as its file's,
/// leaves out tests, comments and strings, and counts a function's lines
/// from its `fn` to its closing brace.
#[test]
fn the_checker_sees_circles_and_only_real_references() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("x")).unwrap();
    let w = |name: &str, text: &str| std::fs::write(src.join(name), text).unwrap();
    // lib re-exports Thing from b; a names it through the root.
    w(
        "lib.rs",
        "mod a;\nmod b;\nmod c;\nmod x;\npub use b::Thing;\npub use std::collections::BTreeMap as Map;\npub fn top() { c::f() }\n",
    );
    w(
        "a.rs",
        "use crate::Thing;\n// crate::c::f\nfn f() { let _ = \"crate::c::f\"; }\n#[cfg(test)]\nmod tests { use crate::c; }\n",
    );
    // b -> a through an inline module's `super::super`.
    w(
        "b.rs",
        "pub struct Thing;\nmod inner { fn g() { super::super::a::f() } }\n#[test]\nfn t() { crate::c::f() }\n",
    );
    // c -> lib (top), a circle of two.
    w("c.rs", "pub fn f() { let _ = '{'; crate::top() }\n#[cfg(feature = \"testing\")]\npub fn t() { crate::a::f() }\n");
    // x/mod.rs re-exports and uses p's item, and p uses mod.rs's: a circle;
    // q only declares a macro that p uses; r names p's module (no edge),
    // p's P through it, x's re-export of P (x/mod.rs's) and another
    // crate's item through the root (no edge).
    w(
        "x/mod.rs",
        "mod p;\nmod q;\nmod r;\npub use p::P;\npub struct M;\nfn m() -> P { P }\n",
    );
    w(
        "x/p.rs",
        "pub struct P;\nfn p() { let _ = say!(); let _: super::M; }\n",
    );
    w("x/q.rs", "macro_rules! say { () => { 1 } }\n");
    w(
        "x/r.rs",
        "use crate::x::p;\nuse std::fmt;\nfn r() { p::P; fmt::Debug; }\nfn s(_: crate::x::P, _: crate::Map<u8, u8>) {}\n",
    );
    let g = read_crate(dir.path(), "src/lib.rs");
    let imports = g.imports();
    let found = cycles(&imports);
    assert_eq!(
        found,
        vec![
            vec!["src/a.rs".to_owned(), "src/b.rs".to_owned()],
            vec!["src/c.rs".to_owned(), "src/lib.rs".to_owned()],
            vec!["src/x/mod.rs".to_owned(), "src/x/p.rs".to_owned()],
        ],
        "{imports:#?}"
    );
    let to = |f: &str| imports[f].keys().cloned().collect::<Vec<_>>();
    assert_eq!(to("src/a.rs"), ["src/b.rs"]);
    assert_eq!(to("src/b.rs"), ["src/a.rs"]);
    assert_eq!(to("src/lib.rs"), ["src/c.rs"]);
    assert_eq!(to("src/x/p.rs"), ["src/x/mod.rs", "src/x/q.rs"]);
    assert_eq!(to("src/x/r.rs"), ["src/x/mod.rs", "src/x/p.rs"]);
    assert_eq!(
        imports["src/b.rs"]["src/a.rs"],
        "src/b.rs:2 (super::super::a::f)"
    );
    assert!(report("t", &imports, &found)
        .contains("src/x/mod.rs -> src/x/p.rs  at src/x/mod.rs:6 (P, re-exported from p::P)"));

    // 3 lines from `fn` to `}`; a declaration without a body is no function.
    let code =
        blank("trait T { fn d(&self); }\n/// doc\nfn f(a: [u8; 2]) {\n    let s = \"}\";\n}\n");
    assert_eq!(long_functions(&code, 2), [(3, "f".to_owned(), 3)]);
    assert!(long_functions(&code, 3).is_empty());
}

/// Every edge of `crate_dir`'s graph, between its top-level modules (a
/// file's top-level module: `lib` for the root), goes to a module of its
/// own layer or one below (`layers`, bottom first, as the crate doc lists
/// them), and every module is in a layer.
fn check_layers(crate_dir: &str, layers: &[&[&str]]) {
    let g = read_crate(&workspace().join("crates").join(crate_dir), "src/lib.rs");
    let top = |file: &str| -> String {
        let rel = file.strip_prefix("src/").unwrap_or(file);
        let first = rel.split('/').next().unwrap_or(rel);
        first.trim_end_matches(".rs").to_owned()
    };
    let layer_of = |m: &str| layers.iter().position(|l| l.contains(&m));
    let mut wrong = String::new();
    for (from, edges) in &g.imports() {
        let from = top(from);
        let Some(lf) = layer_of(&from) else {
            wrong += &format!("{from} is in no layer\n");
            continue;
        };
        for (to, at) in edges {
            let to = top(to);
            match layer_of(&to) {
                Some(lt) if lt <= lf => {}
                _ => wrong += &format!("{from} (layer {lf}) -> {to}  at {at}\n"),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{crate_dir}: imports against its layers:\n{wrong}"
    );
}
/// hel-store's layers, as its crate doc (src/lib.rs) lists them.
#[test]
fn hel_store_modules_import_only_their_layer_and_below() {
    check_layers(
        "hel-store",
        &[
            // Without I/O (with hel-object below them all).
            &["error", "failpoint", "par"],
            &[
                "dir", "pack", "journal", "layout", "refs", "lock", "trashed",
            ],
            &[
                "odb",
                "read",
                "write",
                "repack",
                "list",
                "dependents",
                "place",
            ],
            &[
                "heads",
                "upgrade",
                "summaries",
                "identity",
                "store",
                "admit",
                "commit",
                "names",
                "spill",
                "workspace",
                "log",
                "rounds",
                "oplog",
            ],
            // fork: a fork of a deleted session's checkpoint walks what
            // it reaches (gc's mark) to learn what it depends on.
            &[
                "gc", "fork", "fsck", "scan", "search", "transfer", "trash", "opundo", "purge",
            ],
            // The root, and the test-only modules (the `testing` feature's
            // `parse` and `testing`, the unit tests' `pack_vectors`).
            &["lib", "parse", "testing", "pack_vectors"],
        ],
    );
}

/// hel-object's layers, as its crate doc (hel-object/src/lib.rs) lists
/// its modules.
#[test]
fn hel_object_modules_import_only_their_layer_and_below() {
    check_layers(
        "hel-object",
        &[
            &["id", "canonical", "json", "time", "format"],
            &["message", "object"],
            &["list", "session", "snapshot", "tree"],
            &["lib"],
        ],
    );
}
