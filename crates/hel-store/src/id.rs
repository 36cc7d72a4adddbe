//! Object ids: BLAKE3-256 of an object's canonical bytes, shown as 64
//! lowercase hex digits.

use std::fmt;
use std::str::FromStr;

/// The name of an immutable object.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId([u8; 32]);

impl ObjectId {
    /// The id of the given canonical bytes (header included).
    pub fn of_canonical(bytes: &[u8]) -> Self {
        ObjectId(*blake3::hash(bytes).as_bytes())
    }

    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        ObjectId(bytes)
    }

    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push(char::from_digit((b >> 4) as u32, 16).unwrap_or('0'));
            s.push(char::from_digit((b & 15) as u32, 16).unwrap_or('0'));
        }
        s
    }

    /// The all-zero id, used in the ref log for "no previous value".
    pub const ZERO: ObjectId = ObjectId([0; 32]);
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({})", self.to_hex())
    }
}

/// Why a string is not an object id.
#[derive(Debug, PartialEq, Eq)]
pub struct ParseIdError;

impl fmt::Display for ParseIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("expected 64 lowercase hex digits")
    }
}

impl std::error::Error for ParseIdError {}

impl FromStr for ObjectId {
    type Err = ParseIdError;

    fn from_str(s: &str) -> Result<Self, ParseIdError> {
        let b = s.as_bytes();
        if b.len() != 64 {
            return Err(ParseIdError);
        }
        let mut out = [0u8; 32];
        for (i, pair) in b.chunks(2).enumerate() {
            let hi = hex_val(pair[0]).ok_or(ParseIdError)?;
            let lo = hex_val(pair[1]).ok_or(ParseIdError)?;
            out[i] = hi << 4 | lo;
        }
        Ok(ObjectId(out))
    }
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

impl serde::Serialize for ObjectId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> serde::Deserialize<'de> for ObjectId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let id = ObjectId::of_canonical(b"blob 0\0");
        let parsed: ObjectId = id.to_hex().parse().unwrap();
        assert_eq!(parsed, id);
        assert!("ABC".parse::<ObjectId>().is_err());
        assert!(id.to_hex().to_uppercase().parse::<ObjectId>().is_err());
    }
}
