//! Secrets in text.
//!
//! [`Detector`] finds them: the values of the user's environment
//! variables whose names mark them secret ([`is_secret_name`]), the token
//! and key formats of gitleaks' rule set (vendored, see
//! `rules/PROVENANCE.md`), and high-entropy values assigned to
//! secret-looking names (dotenv, shell, YAML, JSON, TOML, code), and the
//! passwords of URLs (`scheme://user:PASSWORD@host`).
//! [`Detector::detect`] gives each as a [`Finding`]: its kind and byte
//! range. It runs in time and memory linear in the text: the patterns run
//! in linear time (`regex`), one chunk of at most [`CHUNK`] bytes at a
//! time, each only when one of its keywords is in the chunk.
//!
//! [`Redactor`] is a session's: it replaces what the detector finds (and
//! every value it already holds) by a handle such as
//! `‹secret:aws-access-token:2›`, the same value always by the same
//! handle, and substitutes the values back into what the model asks a
//! tool to do. It holds the values in memory only.

mod assign;
mod detect;
mod finding;
mod names;
mod pem;
mod redact;
mod rules;
mod url;

pub use detect::{Detector, CHUNK, OVERLAP};
pub use finding::{Finding, MIN_VALUE};
pub use names::is_secret_name;
pub use redact::{handle_ranges, Redactor, UnknownHandle, HANDLE_OPEN};

#[cfg(test)]
mod tests;
