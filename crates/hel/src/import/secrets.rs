//! An imported session's secrets: every text an item of the source
//! brings (instructions, answers, tool calls' arguments, tool results,
//! compaction summaries) with its secrets replaced by handles, as hel's
//! own tools' results are (see hel-secrets). The values are not kept: the
//! handles of an import are never substituted.

use hel_secrets::Redactor;
use serde_json::Value;

use super::source::Item;

/// `item` with what `secrets` finds in its texts replaced by handles.
pub(super) fn redact(secrets: &mut Redactor, item: &mut Item) {
    match item {
        Item::User { text: t, .. } => text(secrets, t),
        Item::Assistant { text: t, calls, .. } => {
            if let Some(t) = t {
                text(secrets, t);
            }
            for c in calls {
                arguments(secrets, &mut c.arguments);
            }
        }
        Item::ToolResult { content, .. } => text(secrets, content),
        Item::Compaction { summary, .. } => text(secrets, summary),
        Item::Usage { .. } => {}
    }
}

fn text(secrets: &mut Redactor, s: &mut String) {
    if let std::borrow::Cow::Owned(r) = secrets.redact(s) {
        *s = r;
    }
}

/// A call's JSON arguments with the secrets of their strings replaced
/// (still JSON); arguments that are not JSON, as text.
fn arguments(secrets: &mut Redactor, args: &mut String) {
    match hel_store::json::parse(args.as_bytes(), hel_store::json::Limits::MESSAGE) {
        Ok(mut v) => {
            if strings(secrets, &mut v) {
                *args = v.to_string();
            }
        }
        Err(_) => text(secrets, args),
    }
}

fn strings(secrets: &mut Redactor, v: &mut Value) -> bool {
    match v {
        Value::String(s) => match secrets.redact(s) {
            std::borrow::Cow::Owned(r) => {
                *s = r;
                true
            }
            std::borrow::Cow::Borrowed(_) => false,
        },
        Value::Array(a) => a.iter_mut().fold(false, |c, v| strings(secrets, v) | c),
        Value::Object(o) => o.values_mut().fold(false, |c, v| strings(secrets, v) | c),
        _ => false,
    }
}
