//! Azure ARM `Disks.Get` answers (JSON) -> `cloud_access::azure::arm::parse_disk`,
//! then `zone_label` of each zone and `is_zone_redundant`.
//!
//! Properties: a disk read has a name and a location, both trimmed; each
//! zone label is `location-zone`, lower case.
#![no_main]

use cloud_access::azure::arm::{parse_disk, zone_label};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let url = url::Url::parse("https://management.azure.com/fuzz").expect("a URL");
    let Ok(disk) = parse_disk(&url, &json) else {
        return;
    };
    assert!(!disk.name.is_empty() && !disk.location.is_empty(), "{disk:?}");
    let _ = disk.is_zone_redundant();
    for zone in &disk.zones {
        if let Some(label) = zone_label(&disk.location, zone) {
            assert!(label.ends_with(&format!("-{}", zone.trim())), "{label:?}");
            assert_eq!(label, label.to_lowercase());
        }
    }
});
