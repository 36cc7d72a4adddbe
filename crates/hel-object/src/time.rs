//! Wall-clock times as the store records them: milliseconds since the Unix
//! epoch, shown as RFC 3339 in UTC.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The last millisecond RFC 3339 can write (its years have four digits).
pub const LAST_MS: u64 = 253_402_300_800_000 - 1;

/// `ms` as RFC 3339 in UTC with millisecond precision, such as
/// `2026-11-30T01:36:32.123Z`. Instants after the year 9999, which only a
/// hostile store records, show as its last millisecond.
pub fn rfc3339(ms: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ms.min(LAST_MS));
    humantime::format_rfc3339_millis(t).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_known_instants() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(
            super::rfc3339(1_796_002_592_000),
            "2026-11-30T01:36:32.000Z"
        );
        assert_eq!(super::rfc3339(u64::MAX), "9999-12-31T23:59:59.999Z");
        assert_eq!(super::rfc3339(super::LAST_MS), "9999-12-31T23:59:59.999Z");
    }
}
