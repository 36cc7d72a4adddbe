//! The storage crates' modules must not import each other in a cycle
//! (issue 21, "Layers"): each layer imports only the ones below it. Checked
//! for each storage crate (hel-fs, hel-object, hel-store; cargo refuses a
//! cycle between crates), and for hel-object and hel-store against the
//! layer tables their crate docs give.
//!
//! The check reads the sources, not the compiled crate: every `crate::x`
//! path (in `use` items and in code, test code and the `testing` feature
//! left out) is an edge from the file's top-level module to `x`, or to the
//! module a name the crate root re-exports comes from. The cycles are the
//! strongly connected components of that graph with more than one module;
//! the failure lists each, with one place per edge inside it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// An edge's first reference: file and line.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

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
            b'r' if matches!(b.get(i + 1), Some(b'#') | Some(b'"'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let mut close = vec![b'"'];
                close.extend(std::iter::repeat_n(b'#', hashes));
                let start = i + 2 + hashes;
                let end = b[start..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(b.len(), |p| start + p + close.len());
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

/// Blank the items under `#[cfg(test)]`, `#[cfg(feature = "testing")]`
/// and the like (not `cfg(not(..))`): tests may reach anything. `code`
/// is `original` blanked (the attribute's string is read from `original`).
fn drop_test_items(original: &str, code: &mut [u8]) {
    let text = String::from_utf8_lossy(code).into_owned();
    let mut from = 0;
    while let Some(p) = text[from..].find("#[cfg(") {
        let start = from + p;
        let Some(close) = text[start..].find(']').map(|c| start + c) else {
            break;
        };
        let attr = &original[start..close];
        from = close + 1;
        if attr.contains("not(") || !(attr.contains("test") || attr.contains("\"testing\"")) {
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

fn ident_at(b: &[u8], mut i: usize) -> (String, usize) {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    let s = i;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
        i += 1;
    }
    (String::from_utf8_lossy(&b[s..i]).into_owned(), i)
}

/// The first segments of the paths after each `crate::` in `code`, with
/// their offsets: `crate::a::b` gives `a`, `crate::{a::b, c}` gives `a`
/// and `c`.
fn crate_refs(code: &[u8]) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = code[i..].windows(5).position(|w| w == b"crate") {
        let at = i + p;
        i = at + 5;
        if at > 0
            && (code[at - 1].is_ascii_alphanumeric()
                || code[at - 1] == b'_'
                || code[at - 1] == b'$')
        {
            continue;
        }
        let mut j = i;
        while j < code.len() && code[j].is_ascii_whitespace() {
            j += 1;
        }
        if !code[j..].starts_with(b"::") {
            continue;
        }
        j += 2;
        while j < code.len() && code[j].is_ascii_whitespace() {
            j += 1;
        }
        if code.get(j) == Some(&b'{') {
            // Each top-level item of the group.
            let mut depth = 0;
            let mut expect = true;
            let mut k = j + 1;
            while k < code.len() {
                match code[k] {
                    b'{' => depth += 1,
                    b'}' if depth == 0 => break,
                    b'}' => depth -= 1,
                    b',' if depth == 0 => expect = true,
                    c if expect && (c.is_ascii_alphabetic() || c == b'_') => {
                        let (name, end) = ident_at(code, k);
                        out.push((name, k));
                        expect = false;
                        k = end;
                        continue;
                    }
                    _ => {}
                }
                k += 1;
            }
            i = k;
        } else {
            let (name, _) = ident_at(code, j);
            if !name.is_empty() {
                out.push((name, at));
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module graph of the crate whose sources are `src`: top-level
/// modules (and `lib`, the crate root's own items) and, for each edge, its
/// first reference.
fn graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let module_of = |p: &Path| -> String {
        let rel = p.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .into_owned();
        first.trim_end_matches(".rs").to_owned()
    };
    let modules: BTreeSet<String> = files.iter().map(|p| module_of(p)).collect();
    // What the crate root re-exports, and from where; and what it defines.
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let mut lib_code = blank(&lib);
    drop_test_items(&lib, &mut lib_code);
    let lib_text = String::from_utf8_lossy(&lib_code).into_owned();
    // A name the root takes from another crate (`pub use hel_object::id`,
    // `pub(crate) use ...`) is that crate's: no edge inside this one (the
    // crates' own graph has no cycle: cargo refuses one).
    let mut reexport: BTreeMap<String, String> = BTreeMap::new();
    let mut external: BTreeSet<String> = BTreeSet::new();
    for line_start in std::iter::once(0).chain(lib_text.match_indices('\n').map(|(i, _)| i + 1)) {
        let t = lib_text[line_start..].trim_start_matches([' ', '\t']);
        let Some(after) = ["pub use ", "pub(crate) use ", "use "]
            .iter()
            .find_map(|p| t.strip_prefix(p))
        else {
            continue;
        };
        let end = after.find(';').unwrap();
        let item: String = after[..end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let Some((m, names)) = item.split_once("::") else {
            continue;
        };
        let from_here = modules.contains(m);
        if !from_here && matches!(m, "crate" | "self" | "super" | "std") {
            continue;
        }
        for n in names.trim_matches(|c| c == '{' || c == '}').split(',') {
            let n = n.trim();
            let n = n.rsplit(" as ").next().unwrap().trim();
            let n = n
                .rsplit("::")
                .next()
                .unwrap()
                .trim_matches(|c| c == '{' || c == '}');
            if n.is_empty() {
                continue;
            }
            if from_here {
                reexport.insert(n.to_owned(), m.to_owned());
            } else {
                external.insert(n.to_owned());
            }
        }
    }
    let mut g = Graph::new();
    for path in &files {
        let from = module_of(path);
        let src_text = std::fs::read_to_string(path).unwrap();
        let mut code = blank(&src_text);
        drop_test_items(&src_text, &mut code);
        let is_root = path == &src.join("lib.rs");
        let mut refs = crate_refs(&code);
        if is_root {
            // The crate root names its modules without `crate::`; its
            // `mod` and `pub use` lines are declarations, not uses.
            let text = String::from_utf8_lossy(&code).into_owned();
            for line_start in text.match_indices('\n').map(|(i, _)| i + 1) {
                let line = &text[line_start..];
                let line = &line[..line.find('\n').unwrap_or(line.len())];
                let t = line.trim_start();
                if t.starts_with("mod ")
                    || t.starts_with("pub mod ")
                    || t.starts_with("pub use ")
                    || t.starts_with("pub(crate) use ")
                    || t.starts_with("use ")
                {
                    continue;
                }
                for m in &modules {
                    for (q, _) in line.match_indices(&format!("{m}::")) {
                        let before = line[..q].chars().last();
                        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                            refs.push((m.clone(), line_start + q));
                        }
                    }
                }
            }
        }
        for (name, at) in refs {
            if external.contains(&name) && !modules.contains(&name) {
                continue;
            }
            let to = if modules.contains(&name) {
                name.clone()
            } else if let Some(m) = reexport.get(&name) {
                m.clone()
            } else {
                "lib".to_owned()
            };
            let to = if to == "lib" && is_root {
                from.clone()
            } else {
                to
            };
            if to == from || name == "self" {
                continue;
            }
            let line = code[..at].iter().filter(|&&c| c == b'\n').count() + 1;
            let file = path
                .strip_prefix(src.parent().unwrap())
                .unwrap()
                .display()
                .to_string();
            g.entry(from.clone())
                .or_default()
                .entry(to)
                .or_insert_with(|| format!("{file}:{line} (crate::{name})"));
        }
        g.entry(from).or_default();
    }
    g
}

/// The strongly connected components of `g` with more than one module
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

fn report(g: &Graph, found: &[Vec<String>]) -> String {
    let mut s = String::new();
    for scc in found {
        s += &format!("cycle of {} modules: {}\n", scc.len(), scc.join(", "));
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

fn check(crate_dir: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("src");
    let g = graph(&src);
    let found = cycles(&g);
    // The crate-wide `Error` names every module's error type, so it joins
    // any cycle: what is left without it shows the cycles of the code.
    let mut without_error = g.clone();
    without_error.remove("error");
    for edges in without_error.values_mut() {
        edges.remove("error");
    }
    let core = cycles(&without_error);
    assert!(
        found.is_empty(),
        "{crate_dir}: its modules import each other in a cycle:\n{}\
         without the edges to and from `error`:\n{}",
        report(&g, &found),
        report(&without_error, &core)
    );
}

#[test]
fn hel_fs_modules_import_no_cycle() {
    check("hel-fs");
}

#[test]
fn hel_object_modules_import_no_cycle() {
    check("hel-object");
}

#[test]
fn hel_store_modules_import_no_cycle() {
    check("hel-store");
}

/// The checker itself: it finds a cycle that is there, through a
/// re-export, and ignores tests, comments and strings.
#[test]
fn the_checker_sees_cycles_and_only_real_references() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let w = |name: &str, text: &str| std::fs::write(src.join(name), text).unwrap();
    w(
        "lib.rs",
        "mod a;\nmod b;\nmod c;\npub use b::Thing;\npub fn top() { c::f() }\n",
    );
    w(
        "a.rs",
        "use crate::{Thing, c::{x, y}};\n// crate::b::z\nfn f() { let _ = \"crate::c\"; }\n",
    );
    w(
        "b.rs",
        "pub struct Thing;\nfn g() { crate::a::f() }\n#[cfg(test)]\nmod tests { use crate::c; }\n",
    );
    w("c.rs", "fn h() { let _ = '{'; crate::top() }\n#[cfg(feature = \"testing\")]\npub fn t() { crate::a::f() }\n");
    let g = graph(&src);
    let found = cycles(&g);
    // a -> b (Thing), a -> c, b -> a; c -> lib -> c; not c -> a (testing),
    // nor b -> c (tests), nor the comment's or the string's.
    assert_eq!(
        found,
        vec![
            vec!["a".to_owned(), "b".to_owned()],
            vec!["c".to_owned(), "lib".to_owned()]
        ]
    );
    assert_eq!(g["a"].keys().collect::<Vec<_>>(), ["b", "c"]);
    assert_eq!(g["b"].keys().collect::<Vec<_>>(), ["a"]);
}

/// Every edge of `crate_dir`'s graph goes to a module of its own layer or
/// one below (`layers`, bottom first, as the crate doc lists them), and
/// every module is in a layer.
fn check_layers(crate_dir: &str, layers: &[&[&str]]) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("src");
    let g = graph(&src);
    let layer_of = |m: &str| layers.iter().position(|l| l.contains(&m));
    let mut wrong = String::new();
    for (from, edges) in &g {
        let Some(lf) = layer_of(from) else {
            wrong += &format!("{from} is in no layer\n");
            continue;
        };
        for (to, at) in edges {
            match layer_of(to) {
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
            &["dir", "pack", "journal", "layout", "refs", "lock"],
            &["odb", "read", "write", "repack", "list", "dependents"],
            &[
                "heads",
                "upgrade",
                "summaries",
                "store",
                "admit",
                "commit",
                "names",
                "spill",
                "workspace",
                "log",
            ],
            // fork: a fork of a deleted session's checkpoint walks what
            // it reaches (gc's mark) to learn what it depends on.
            &["gc", "fork", "fsck", "scan", "search", "transfer"],
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
            &["id", "canonical", "time", "format"],
            &["message", "object"],
            &["list", "session", "snapshot", "tree"],
            &["lib"],
        ],
    );
}
