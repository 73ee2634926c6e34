//! OpenStack Cinder `GET /volumes/{id}` answers (JSON) ->
//! `cloud_access::openstack::cinder::parse_volume`, then the topology the
//! webhook makes of it (`pv_topology_webhook::lookup::cinder::topology_of`).
//!
//! Properties: refused exactly when the answer has no `volume` object or its
//! `availability_zone` is neither text nor null, the refusal naming that field
//! and the answer's URL. Read, the zone is the input's `availability_zone`
//! trimmed (none when absent, null or blank), exactly so when that is printable
//! ASCII within 255 characters, and so is the ID; the topology's zone is the
//! input's exactly when it is a usable label value, and otherwise the topology
//! is refused (never a zone Cinder did not give). Written back as a Cinder
//! answer, a volume read within 255 characters reads the same.
#![no_main]

use cloud_access::openstack::cinder::parse_volume;
use libfuzzer_sys::fuzz_target;
use pv_topology_webhook::lookup::cinder::topology_of;
use serde_json::{Value, json};

const URL: &str = "https://cinder.example/v3/p/volumes/fuzz";

/// Text no cleaning changes: printable ASCII, within the 255 characters kept.
fn plain(text: &str) -> bool {
    text.len() <= 255 && text.bytes().all(|b| (b' '..=b'~').contains(&b))
}

/// A zone the topology can hold: a label value without the zones' delimiter.
fn usable(zone: &str) -> bool {
    !zone.is_empty() && fuzz::valid_label_value(zone) && !zone.contains("__")
}

fuzz_target!(|data: &[u8]| {
    let Ok(json) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let url = url::Url::parse(URL).expect("a URL");
    let given = json.get("volume").filter(|v| v.is_object());
    let zone_given = given.and_then(|v| v.get("availability_zone"));
    let volume = match parse_volume(&url, &json) {
        Ok(volume) => volume,
        Err(error) => {
            let text = error.to_string();
            assert!(text.contains(URL), "{text}");
            match given {
                None => assert!(text.contains("no volume"), "{text}"),
                Some(_) => {
                    assert!(
                        zone_given.is_some_and(|z| !z.is_null() && !z.is_string()),
                        "refused a volume with a text or no zone: {text}"
                    );
                    assert!(text.contains("availability_zone"), "{text}");
                }
            }
            return;
        }
    };
    assert!(given.is_some(), "read a volume from an answer without one: {volume:?}");
    assert!(
        zone_given.is_none_or(|z| z.is_null() || z.is_string()),
        "read a zone that is not text: {volume:?}"
    );
    let zone = zone_given
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|z| !z.is_empty());
    assert_eq!(volume.availability_zone.is_some(), zone.is_some(), "{volume:?}");
    if let Some(zone) = zone.filter(|z| plain(z)) {
        assert_eq!(volume.availability_zone.as_deref(), Some(zone));
    }
    let id = given.and_then(|v| v["id"].as_str()).map(str::trim).unwrap_or_default();
    if plain(id) {
        assert_eq!(volume.id, id);
    }

    match (topology_of(&volume, "RegionOne", false), zone) {
        (Ok(topology), Some(zone)) => {
            assert!(usable(zone), "zone {zone:?} used: {topology:?}");
            assert_eq!(topology.zones(), [zone]);
        }
        (Ok(topology), None) => assert!(topology.zones().is_empty(), "{topology:?}"),
        (Err(error), zone) => assert!(zone.is_some_and(|z| !usable(z)), "{zone:?} refused: {error}"),
    }

    let within = |text: &str| text.chars().count() <= 255;
    if within(&volume.id) && volume.availability_zone.as_deref().is_none_or(within) {
        let written = json!({"volume": {"id": volume.id, "availability_zone": volume.availability_zone}});
        let again = parse_volume(&url, &written).expect("a volume read is a volume");
        assert_eq!(again, volume, "written back: {written}");
    }
});
