//! What a command prints, also sent to the observer as it arrives
//! ([`Event::ToolOutput`]); what is kept of it is bounded by the sandbox
//! crate's [`Kept`](hel_sandbox::Kept).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use hel_secrets::Detector;

use hel_sandbox::Tap;

use crate::event::{Event, Observer};

/// The most bytes one [`Event::ToolOutput`] carries: a live view shows
/// only the last lines, so of a larger read only its end is sent.
pub(crate) const LIVE_CHUNK: usize = 4096;

/// How much of an unfinished line is kept to find, in the next read, a
/// secret that the edge between two reads cuts: the line's end, enough
/// for a token and the name it is assigned to.
const LINE_REACH: usize = 1024;

/// A tap sending the end of each read (at most [`LIVE_CHUNK`] bytes) to
/// `observer`, what `secrets` finds in it masked, found with the
/// unfinished line before it (a secret that two reads cut is masked in
/// the second; what the first showed of it is too little to match).
pub(crate) fn tap(observer: Rc<dyn Observer>, secrets: Arc<Detector>) -> Tap {
    let line = RefCell::new(Vec::new());
    Tap(Rc::new(move |data: &[u8]| {
        if data.is_empty() {
            return;
        }
        observer.printed(data);
        let start = data.len().saturating_sub(LIVE_CHUNK);
        let mut line = line.borrow_mut();
        keep_line(&mut line, &data[..start]);
        let shown = super::secret::mask(&secrets, &line, &data[start..]);
        keep_line(&mut line, &data[start..]);
        observer.event(Event::ToolOutput(shown));
    }))
}

/// `line` (the unfinished line so far) followed by `data`: from its last
/// newline on, at most [`LINE_REACH`] bytes.
fn keep_line(line: &mut Vec<u8>, mut data: &[u8]) {
    if let Some(i) = memchr::memrchr(b'\n', data) {
        line.clear();
        data = &data[i + 1..];
    }
    line.extend_from_slice(&data[data.len().saturating_sub(LINE_REACH)..]);
    if line.len() > LINE_REACH {
        line.drain(..line.len() - LINE_REACH);
    }
}
