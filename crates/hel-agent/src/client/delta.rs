//! What arrives of a response before it is complete, as the client hands
//! it on.

/// What arrives of a response before it is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delta<'a> {
    /// The first delta of the response (for a whole body: the body).
    First,
    /// A piece of the answer's `content`, as the model sent it.
    Text(&'a str),
    /// A piece of the model's reasoning (`reasoning_content`, or
    /// `reasoning` as some servers name it), as the model sent it.
    Reasoning(&'a str),
}
