//! Keystone v3 token answers (JSON): `token.expires_at`
//! (`keystone::token_expires_at`) and the block-storage endpoint of
//! `token.catalog` (`select_endpoint`) for each interface, in the region of
//! tests/data/openstack/ and in every region the catalog names, then
//! `SecureEndpoint::parse` as the token source does.
//!
//! Property: an endpoint selected is the `url` of an endpoint of the catalog
//! in that region and interface.
#![no_main]

use cloud_access::SecureEndpoint;
use cloud_access::openstack::keystone::token_expires_at;
use cloud_access::openstack::{Interface, select_endpoint};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(json) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let _ = token_expires_at(&json);
    let catalog = &json["token"]["catalog"];
    let endpoints: Vec<&Value> = catalog
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["endpoints"].as_array().into_iter().flatten())
        .collect();
    let mut regions: Vec<&str> = endpoints.iter().filter_map(|e| e["region"].as_str()).collect();
    regions.push("RegionOne");
    regions.truncate(8);
    for region in regions {
        for interface in [Interface::Public, Interface::Internal, Interface::Admin] {
            if let Ok(url) = select_endpoint(catalog, region, interface) {
                // A field the endpoint lacks reads as "" (as `select_endpoint` reads it).
                let text = |e: &Value, key: &str| e[key].as_str().unwrap_or_default().to_owned();
                assert!(
                    endpoints.iter().any(|e| text(e, "url") == url
                        && text(e, "interface") == interface.as_str()
                        && (text(e, "region") == region || text(e, "region_id") == region)),
                    "{url:?} is not in the catalog for {region:?} {interface:?}"
                );
                let _ = SecureEndpoint::parse("the block-storage endpoint", url);
            }
        }
    }
});
