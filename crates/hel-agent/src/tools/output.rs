//! What a command prints, also sent to the observer as it arrives
//! ([`Event::ToolOutput`]); what is kept of it is bounded by the sandbox
//! crate's [`Kept`](hel_sandbox::Kept).

use std::rc::Rc;
use std::sync::Arc;

use hel_secrets::Detector;

use hel_sandbox::Tap;

use crate::event::{Event, Observer};

/// The most bytes one [`Event::ToolOutput`] carries: a live view shows
/// only the last lines, so of a larger read only its end is sent.
pub(crate) const LIVE_CHUNK: usize = 4096;

/// A tap sending the end of each read (at most [`LIVE_CHUNK`] bytes) to
/// `observer`, what `secrets` finds in it masked.
pub(crate) fn tap(observer: Rc<dyn Observer>, secrets: Arc<Detector>) -> Tap {
    Tap(Rc::new(move |data: &[u8]| {
        if data.is_empty() {
            return;
        }
        observer.printed(data);
        let start = data.len().saturating_sub(LIVE_CHUNK);
        let shown = super::secret::mask(&secrets, &data[start..]);
        observer.event(Event::ToolOutput(shown));
    }))
}
