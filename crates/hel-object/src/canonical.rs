//! Canonical JSON: exactly one byte sequence per JSON value, so that equal
//! messages get equal ids.
//!
//! Rules (objects-spec/README.md, "Canonical JSON"): object keys sorted by
//! their UTF-8 bytes, no whitespace, strings escaped as serde_json escapes
//! them (`"` `\\` and control characters; everything else as UTF-8), numbers
//! as serde_json prints them.

use serde_json::Value;

/// `Ok` when no object of the JSON text `bytes` holds a key twice, at any
/// depth (objects-spec §3, "Repeated keys"): what every reader of stored
/// JSON asks before it parses, since serde keeps the last value of a
/// repeated key (a map, a `Value`) or refuses it (a struct), and another
/// reader may take the first. The text is walked once without building
/// anything ([`crate::json::check`]); its size is bounded by the cap of
/// what it is read as, so no count of values is imposed here. The error
/// says where, as serde's do.
pub fn no_repeated_key(bytes: &[u8]) -> Result<(), serde_json::Error> {
    const STORED: crate::json::Limits = crate::json::Limits {
        max_values: u64::MAX,
        max_depth: 128,
    };
    crate::json::check(bytes, STORED).map_err(<serde_json::Error as serde::de::Error>::custom)
}

/// Serialize `value` canonically.
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    write(value, &mut out);
    out
}

/// Append `value` canonically to `out` (what [`to_vec`] returns, without
/// a buffer of its own: a list node embeds its messages this way).
pub fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(k, out);
                out.push(b':');
                write(&map[k], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(v, out);
            }
            out.push(b']');
        }
        Value::String(s) => write_str(s, out),
        // Null, booleans and numbers have a single serde_json spelling
        // (serde_json's compact writer, straight into `out`).
        other => write_scalar(other, out),
    }
}

/// Append `s` as a JSON string. serde_json's string escaping is already
/// canonical (shortest escapes); its writer appends without a copy of `s`.
pub fn write_str(s: &str, out: &mut Vec<u8>) {
    write_scalar(s, out)
}

fn write_scalar<T: serde::Serialize + ?Sized>(v: &T, out: &mut Vec<u8>) {
    // Writing a string, number, boolean or null into a Vec cannot fail
    // (serde_json fails only on I/O errors and non-string map keys).
    let _ = serde_json::to_writer(&mut *out, v);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorted_and_compact() {
        let v = json!({"b": 1, "a": [true, null, "x\n\"y"], "A": {"z": 1.5, "c": -2}});
        assert_eq!(
            String::from_utf8(to_vec(&v)).unwrap(),
            r#"{"A":{"c":-2,"z":1.5},"a":[true,null,"x\n\"y"],"b":1}"#
        );
    }

    #[test]
    fn unicode_is_raw_utf8() {
        let v = json!({"k": "한글 é \u{1}"});
        assert_eq!(
            String::from_utf8(to_vec(&v)).unwrap(),
            "{\"k\":\"한글 é \\u0001\"}"
        );
    }
}
