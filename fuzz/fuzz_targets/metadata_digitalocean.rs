//! The DigitalOcean instance metadata reader (cloud/src/metadata/digitalocean.rs) on a tree of
//! documents from the fuzz input, answered from memory; properties in
//! `fuzz::metadata_target`.
#![no_main]

use cloud_access::metadata::Provider;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fuzz::metadata_target(Provider::DigitalOcean, data));
