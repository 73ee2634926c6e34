//! OpenStack Cinder `GET /volumes/{id}` answers (JSON) ->
//! `cloud_access::openstack::cinder::parse_volume`.
//!
//! Property: a zone read is never empty.
#![no_main]

use cloud_access::openstack::cinder::parse_volume;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let url = url::Url::parse("https://cinder.example/v3/p/volumes/fuzz").expect("a URL");
    if let Ok(volume) = parse_volume(&url, &json) {
        assert!(
            volume.availability_zone.as_ref().is_none_or(|z| !z.is_empty()),
            "{volume:?}"
        );
    }
});
