//! The fake of Google's APIs (`test_fakes::GcpFake`: tests/fakes/gcp_server.py
//! on loopback, with tests/data/gcp/scenario.json edited per test) seen
//! through cloud-access's types, for the gcp_* tests, which include this file
//! with `#[path]`. Nothing here ever reaches a real Google address: every
//! client is pointed at the fake.
#![allow(dead_code)]

use std::time::Duration;

use cloud_access::SecureEndpoint;
use cloud_access::gcp::{GceMetadata, metadata_base};
pub use test_fakes::GcpFake as Fake;

/// The fake as cloud-access's clients find it.
pub trait FakeExt {
    /// `http://127.0.0.1:PORT/{path}` as an endpoint credentials may be sent to.
    fn endpoint(&self, path: &str) -> SecureEndpoint;
    /// A metadata client of the fake, found as `GCE_METADATA_HOST=127.0.0.1:PORT` would.
    fn metadata(&self) -> GceMetadata;
}

impl FakeExt for Fake {
    fn endpoint(&self, path: &str) -> SecureEndpoint {
        SecureEndpoint::parse("test endpoint", &format!("{}{path}", self.base())).unwrap()
    }

    fn metadata(&self) -> GceMetadata {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let base = metadata_base(Some(&self.host())).unwrap();
        GceMetadata::new(base, Duration::from_secs(5)).unwrap()
    }
}

/// The suite's HTTP client, as the programs build it.
pub fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    cloud_access::http_client("cloud-access-tests", Duration::from_secs(10)).unwrap()
}
