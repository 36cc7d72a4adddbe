//! Ids: [`ObjectId`], the BLAKE3-256 of an object's canonical bytes shown
//! as 64 lowercase hex digits, and [`SessionId`], a session's UUID.

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
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }

    /// Append the id's 64 lowercase hex digits to `out`: [`ObjectId::to_hex`]
    /// without a `String` of its own (list nodes spell their ids this way).
    pub fn push_hex(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(blake3::Hash::from_bytes(self.0).to_hex().as_bytes());
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
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
        // blake3's parser also takes uppercase: the format is lowercase only.
        if s.len() != 64 || s.bytes().any(|c| c.is_ascii_uppercase()) {
            return Err(ParseIdError);
        }
        blake3::Hash::from_hex(s)
            .map(|h| ObjectId(*h.as_bytes()))
            .map_err(|_| ParseIdError)
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

/// A session's id: a UUID in its lowercase hyphenated form
/// (`0c9e6f1a-1b2c-4d3e-8f40-123456789abc`). It can only be built from a
/// valid id, so every path made from one stays a single component.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(String);

impl SessionId {
    /// A new random (version 4) id.
    pub fn new_random() -> SessionId {
        SessionId(uuid::Uuid::new_v4().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A string that is not a session id (what was given, cut to 80 chars).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a session id (expected a lowercase UUID such as 0c9e6f1a-1b2c-4d3e-8f40-123456789abc)")]
pub struct BadSessionId(pub String);

impl FromStr for SessionId {
    type Err = BadSessionId;

    /// Parse an id, which must be in the lowercase hyphenated form the
    /// format uses (uuid's parser alone also takes uppercase, braced and
    /// URN forms).
    fn from_str(s: &str) -> Result<SessionId, BadSessionId> {
        match uuid::Uuid::try_parse(s) {
            Ok(u) if u.hyphenated().to_string() == s => Ok(SessionId(s.to_owned())),
            _ => Err(BadSessionId(s.chars().take(80).collect())),
        }
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionId({})", self.0)
    }
}

impl AsRef<str> for SessionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl serde::Serialize for SessionId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for SessionId {
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

    #[test]
    fn session_ids() {
        let ok = "0c9e6f1a-1b2c-4d3e-8f40-123456789abc";
        assert_eq!(ok.parse::<SessionId>().unwrap().as_str(), ok);
        for bad in [
            "../x",
            "/etc",
            "0C9E6F1A-1B2C-4D3E-8F40-123456789ABC",
            "{0c9e6f1a-1b2c-4d3e-8f40-123456789abc}",
            "urn:uuid:0c9e6f1a-1b2c-4d3e-8f40-123456789abc",
            "0c9e6f1a1b2c4d3e8f40123456789abc",
            "abcd",
            "",
        ] {
            assert!(bad.parse::<SessionId>().is_err(), "{bad}");
        }
        let fresh = SessionId::new_random();
        assert_eq!(fresh.as_str().parse::<SessionId>().unwrap(), fresh);
    }
}
