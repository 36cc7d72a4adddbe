//! Parsers of untrusted bytes, exposed for property tests: each must
//! return an error, never panic, on any input. Only with the `testing`
//! feature.

/// Parse a ref file's bytes.
pub fn ref_file(bytes: &[u8]) -> Result<crate::ObjectId, crate::RefError> {
    crate::refs::parse(bytes)
}

/// Parse a snapshot payload.
pub fn snapshot(payload: &[u8]) -> bool {
    crate::snapshot::Checkpoint::parse(payload).is_ok()
}

/// Parse a list node payload fully (every item) and by shape; the two
/// must agree on everything but inline messages' content.
pub fn list_node(payload: &[u8]) -> (bool, bool) {
    let full = crate::list::RawNode::parse(payload).is_ok_and(|raw| {
        raw.items
            .iter()
            .all(|(a, b)| crate::list::parse_item(&payload[*a..*b]).is_ok())
    });
    (full, crate::list::Shape::parse(payload).is_ok())
}

/// Decode an object file's bytes that should hold `id`, under `cap`.
pub fn object(id: &crate::ObjectId, data: &[u8], cap: crate::Cap) -> bool {
    crate::object::decode(id, std::path::Path::new("x"), data, cap).is_ok()
}
