//! The one bounded JSON parse for every JSON hel reads from outside the
//! process: model replies, MCP messages, import files, bundles, pulls,
//! files under `.hel/`.
//!
//! Bytes are bounded by each reader; what they parse to is bounded here:
//! a reply of 66 MB holding an array of 33 million zeros is 66 MB of
//! bytes but over a gigabyte of `serde_json::Value`. [`check`] walks the
//! text once without building anything and refuses
//!
//! - more than [`Limits::max_values`] values (every scalar, array and
//!   object counts one);
//! - nesting deeper than [`Limits::max_depth`];
//! - an object holding a key twice: two readers of such a text can see
//!   different values under one key (serde_json keeps the last, a
//!   confirm prompt would show the first), so none of hel's readers
//!   accepts it (objects-spec §3.1 says the same of stored JSON).
//!
//! [`parse`] and [`from_slice`] check first and only then build, so what
//! they build is at most `max_values` values. The walk holds one key set
//! per open object: its memory is bounded by the input's length.

use serde::de::{DeserializeOwned, DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::fmt;

/// What one parse may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Values in the whole text (scalars, arrays and objects, each one).
    pub max_values: u64,
    /// Arrays and objects open at once. serde_json stops at 128 on its
    /// own; a limit above that is that limit.
    pub max_depth: u32,
}

impl Limits {
    /// For texts that are a message or a request: a model reply, an MCP
    /// message, a line of an import file. Two million values is far more
    /// than a conversation's message holds (the store caps a message at
    /// 16 MiB of canonical JSON) and under 100 MiB as `Value`s.
    pub const MESSAGE: Limits = Limits {
        max_values: 2_000_000,
        max_depth: 64,
    };
    /// For JSON stored under `.hel/` (a message blob, a config or record
    /// blob): as many values as a message may hold, and the depth serde_json
    /// itself stops at, so that no store written before these limits is
    /// refused for its depth alone.
    pub const STORED: Limits = Limits {
        max_values: 2_000_000,
        max_depth: 128,
    };
    /// For small control files (configs, the format file, a remote's
    /// listing): 100,000 values.
    pub const SMALL: Limits = Limits {
        max_values: 100_000,
        max_depth: 32,
    };
}

/// Why a text was refused: serde_json's own error (with its line and
/// column) or one of the limits.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct JsonError(serde_json::Error);

impl From<JsonError> for serde_json::Error {
    fn from(e: JsonError) -> serde_json::Error {
        e.0
    }
}

impl JsonError {
    /// True when the text is well-formed JSON that a limit refused
    /// (values, depth) or that repeats a key, rather than a syntax error.
    pub fn is_limit(&self) -> bool {
        self.0.is_data()
    }
}

/// Check `bytes` against `limits` without building a value.
pub fn check(bytes: &[u8], limits: Limits) -> Result<(), JsonError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let mut walk = Walk {
        limits,
        values: 0,
        depth: 0,
    };
    Node(&mut walk)
        .deserialize(&mut de)
        .and_then(|()| de.end())
        .map_err(JsonError)
}

/// Check, then parse to a `Value` of at most `limits.max_values` values.
pub fn parse(bytes: &[u8], limits: Limits) -> Result<serde_json::Value, JsonError> {
    from_slice(bytes, limits)
}

/// Check, then deserialize into `T`.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8], limits: Limits) -> Result<T, JsonError> {
    check(bytes, limits)?;
    serde_json::from_slice(bytes).map_err(JsonError)
}

/// [`from_slice`] of a `str`.
pub fn from_str<T: DeserializeOwned>(text: &str, limits: Limits) -> Result<T, JsonError> {
    from_slice(text.as_bytes(), limits)
}

struct Walk {
    limits: Limits,
    values: u64,
    depth: u32,
}

impl Walk {
    fn count<E: serde::de::Error>(&mut self) -> Result<(), E> {
        self.values += 1;
        if self.values > self.limits.max_values {
            return Err(E::custom(format_args!(
                "more than {} JSON values",
                self.limits.max_values
            )));
        }
        Ok(())
    }

    fn open<E: serde::de::Error>(&mut self) -> Result<(), E> {
        self.count()?;
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(E::custom(format_args!(
                "JSON nested deeper than {}",
                self.limits.max_depth
            )));
        }
        Ok(())
    }
}

/// One value of the walk: counts itself, recurses through serde's seeds
/// (serde_json's own recursion limit and ours bound the depth).
struct Node<'w>(&'w mut Walk);

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.0.count()
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.0.count()
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.0.count()
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.0.count()
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.0.count()
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.0.count()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.open()?;
        while seq.next_element_seed(Node(&mut *self.0))?.is_some() {}
        self.0.depth -= 1;
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.open()?;
        // Keys borrowed from the text where they can be (no escapes), looked
        // for among the first few one by one, in a set past them: most
        // objects have a handful of keys, and a set and a `String` per key
        // cost more than the rest of the walk.
        let mut few: Vec<Key<'de>> = Vec::new();
        let mut many: HashSet<Key<'de>> = HashSet::new();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            self.0.count()?;
            let repeated = if few.len() < FEW_KEYS {
                let seen = few.contains(&key);
                few.push(key);
                seen
            } else {
                if many.is_empty() {
                    many.extend(few.drain(..));
                }
                !many.insert(key)
            };
            if repeated {
                // The key is not echoed: it came from outside and may hold
                // anything; the line and column serde_json adds say where.
                return Err(A::Error::custom("a key repeated in one object"));
            }
            map.next_value_seed(Node(&mut *self.0))?;
        }
        self.0.depth -= 1;
        Ok(())
    }
}

/// Keys of one object compared one by one before they go to a set.
const FEW_KEYS: usize = 16;

/// An object's key, borrowed from the text when it holds no escape.
#[derive(PartialEq, Eq, Hash)]
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Key<'de>, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: Limits = Limits {
        max_values: 5,
        max_depth: 2,
    };

    #[test]
    fn counts_every_value_and_refuses_past_the_limit() {
        assert!(check(b"[1,2,3,4]", TINY).is_ok()); // 5 values
        let e = check(b"[1,2,3,4,5]", TINY).unwrap_err();
        assert!(e.is_limit());
        assert!(e.to_string().contains("more than 5 JSON values"), "{e}");
        // Keys count too: {"a":1,"b":2} is 1 + 2 keys + 2 values.
        assert!(check(br#"{"a":1,"b":2}"#, TINY).is_ok());
        assert!(check(br#"{"a":1,"b":2,"c":3}"#, TINY).is_err());
    }

    #[test]
    fn refuses_depth_past_the_limit() {
        assert!(check(b"[[1]]", TINY).is_ok());
        let e = check(b"[[[1]]]", TINY).unwrap_err();
        assert!(e.to_string().contains("nested deeper than 2"), "{e}");
        // Far past serde_json's own limit: an error, not a stack overflow.
        let deep = "[".repeat(100_000);
        assert!(check(deep.as_bytes(), Limits::MESSAGE).is_err());
    }

    #[test]
    fn refuses_a_repeated_key_at_any_depth() {
        let e = check(
            br#"{"path":"a","x":{"path":"b"},"path":"c"}"#,
            Limits::SMALL,
        )
        .unwrap_err();
        assert!(e.to_string().contains("a key repeated"), "{e}");
        let e = check(br#"[{"k":1,"k":1}]"#, Limits::SMALL).unwrap_err();
        assert!(e.to_string().contains("a key repeated"), "{e}");
        // The same key in sibling objects is fine.
        assert!(check(br#"[{"k":1},{"k":2}]"#, Limits::SMALL).is_ok());
        // Escaped spellings of one key are one key.
        assert!(check(br#"{"a":1,"\u0061":2}"#, Limits::SMALL).is_err());
    }

    #[test]
    fn parse_builds_what_serde_json_builds_and_refuses_trailing_bytes() {
        let text = br#"{"a":[1,"x",null,true,2.5],"b":{}}"#;
        let v = parse(text, Limits::SMALL).unwrap();
        assert_eq!(
            v,
            serde_json::from_slice::<serde_json::Value>(text).unwrap()
        );
        assert!(check(b"[1] [2]", Limits::SMALL).is_err());
        assert!(check(b"[1,", Limits::SMALL).is_err());
        assert!(!check(b"[1,", Limits::SMALL).unwrap_err().is_limit());
    }

    #[test]
    fn a_wide_array_is_refused_without_building_it() {
        // 3 million zeros: refused by count, never built (a Value of this
        // would be ~100 MB; the walk holds nothing per element).
        let mut text = Vec::with_capacity(6_000_002);
        text.push(b'[');
        for i in 0..3_000_000 {
            if i > 0 {
                text.push(b',');
            }
            text.push(b'0');
        }
        text.push(b']');
        let e = check(&text, Limits::MESSAGE).unwrap_err();
        assert!(
            e.to_string().contains("more than 2000000 JSON values"),
            "{e}"
        );
    }

    #[test]
    fn a_key_repeated_is_found_among_many_and_through_an_escape() {
        let keys: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
        let wide = format!("{{{}}}", keys.join(","));
        assert!(check(wide.as_bytes(), Limits::SMALL).is_ok());
        for twice in [
            format!("{{{},\"k3\":0}}", keys.join(",")),
            format!("{{{},\"k39\":0}}", keys.join(",")),
            format!("{{{},\"k1\":0}}", keys[..5].join(",")),
            // The same key spelled with an escape.
            r#"{"a":1,"\u0061":2}"#.to_owned(),
        ] {
            let e = check(twice.as_bytes(), Limits::SMALL).unwrap_err();
            assert!(
                e.to_string().contains("a key repeated in one object"),
                "{e}"
            );
        }
    }
}
