//! `MetadataClient::from_documents` (what the fuzz targets read metadata
//! through) reads each scenario of tests/data/node-ip-helper/metadata/ as
//! the client does over HTTP from tests/fakes/metadata_server.py serving it:
//! the same instance, or an error both ways.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use cloud_access::metadata::{MetadataClient, Provider};
use serde_json::Value;

#[tokio::test]
async fn in_memory_trees_read_as_the_fake_serves_them() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/node-ip-helper/metadata");
    let mut compared = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let scenario: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        // Modes (slow, refused token) are the fake's, not the tree's.
        if scenario.get("mode").is_some_and(|m| m != "normal") {
            continue;
        }
        let provider = Provider::parse(scenario["provider"].as_str().unwrap()).unwrap();
        let tree: BTreeMap<String, String> = scenario["tree"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
            .collect();
        let in_memory = MetadataClient::from_documents(provider, tree).unwrap().instance().await;
        let fake = test_fakes::MetadataFake::start(&path);
        let client = MetadataClient::new(provider, fake.base().parse().unwrap(), Duration::from_secs(5)).unwrap();
        let over_http = client.instance().await;
        match (&in_memory, &over_http) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{}", path.display()),
            (Err(_), Err(_)) => {}
            _ => panic!("{}: in memory {in_memory:?}, over HTTP {over_http:?}", path.display()),
        }
        compared += 1;
    }
    assert!(compared >= 8, "{compared} scenarios compared");
}
