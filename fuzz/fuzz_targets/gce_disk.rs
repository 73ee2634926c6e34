//! GCE Compute `disks.get` / `regionDisks.get` answers (JSON) ->
//! `cloud_access::gcp::compute::parse_disk`.
//!
//! Properties: a disk read has a name; its zone, region and replica zones
//! are last path components (no `/`), not empty; a zonal disk's derived
//! region is what `region_of_zone` says.
#![no_main]

use cloud_access::gcp::compute::parse_disk;
use cloud_access::gcp::region_of_zone;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let url = url::Url::parse("https://compute.googleapis.com/compute/v1/fuzz").expect("a URL");
    let Ok(disk) = parse_disk(&url, &json) else {
        return;
    };
    assert!(!disk.name.is_empty());
    let names = disk.zone.iter().chain(&disk.region).chain(&disk.replica_zones);
    for name in names {
        assert!(!name.is_empty() && !name.contains('/'), "{name:?} in {disk:?}");
    }
    if json.get("region").is_none()
        && let Some(zone) = &disk.zone
    {
        assert_eq!(disk.region.as_deref(), region_of_zone(zone));
    }
});
