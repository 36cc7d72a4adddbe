//! `Store` keeps a small API (issue 21, "Layers"): a newcomer reads its
//! list in one screen. Maintenance and the other parts are functions of
//! their modules, taking `&Store`. Read from the sources: every `pub fn`
//! of an `impl Store` block, wherever it is.

use std::path::Path;

#[test]
fn store_has_at_most_twenty_four_public_methods() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut methods = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut in_impl = false;
        for line in text.lines() {
            if line.starts_with("impl Store {") || line.starts_with("impl crate::Store {") {
                in_impl = true;
            } else if line.starts_with('}') {
                in_impl = false;
            } else if in_impl {
                if let Some(rest) = line.strip_prefix("    pub fn ") {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    methods.push(name);
                }
            }
        }
    }
    methods.sort();
    assert!(methods.len() >= 10, "found only {methods:?}");
    // 20, and the trash's four (trash_session, undelete_session,
    // trash_entries, delete_for_good: named so by the operation log's
    // work, which calls them). Whether they become functions of
    // `hel_store::trash` instead is open.
    assert!(
        methods.len() <= 24,
        "Store has {} public methods: {methods:?}",
        methods.len()
    );
}
