//! Go durations (`cloud_access::go_duration`): `parse`, `parse_non_negative`,
//! `format`, `unix_time`.
//!
//! Properties: what parses to a non-negative duration formats to text that
//! parses back to the same nanoseconds; `format` of any duration parses back
//! to it (below Go's `1<<63` ns); `parse_non_negative` agrees with `parse`.
#![no_main]

use std::time::Duration;

use cloud_access::go_duration::{format, parse, parse_non_negative, unix_time};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() >= 8 {
        let nanos = u64::from_le_bytes(data[..8].try_into().expect("8 bytes")) >> 1;
        let text = format(Duration::from_nanos(nanos));
        assert_eq!(parse(&text), Ok(nanos as i64), "format gave {text:?}");
        let _ = unix_time(f64::from_le_bytes(data[..8].try_into().expect("8 bytes")));
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = parse(text);
    match (&parsed, parse_non_negative(text)) {
        (Ok(n), Ok(d)) => assert_eq!(u128::try_from(*n).ok(), Some(d.as_nanos())),
        (Ok(n), Err(_)) => assert!(*n < 0, "{text:?}: {n} refused as negative"),
        (Err(_), Ok(d)) => panic!("{text:?}: parse refuses what parse_non_negative gives as {d:?}"),
        (Err(_), Err(_)) => {}
    }
    if let Ok(nanos) = parsed
        && nanos >= 0
    {
        let text = format(Duration::from_nanos(nanos as u64));
        assert_eq!(parse(&text), Ok(nanos), "round trip through {text:?}");
    }
});
