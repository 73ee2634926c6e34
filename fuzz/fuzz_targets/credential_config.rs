//! kubelet's CredentialProviderConfig (JSON or YAML: one decoder reads both)
//! -> the `check-config` logic: `kubelet_config::decode`, then `validate`.
//!
//! Property: a refused config always names a field path (each `FieldError`
//! and each `ConfigError::Field` has a non-empty field), and the report of
//! each problem carries it.
#![no_main]

use std::path::{Path, PathBuf};

use credential_provider::kubelet_config::{ConfigError, CredentialProviderConfig, decode, validate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz-config.yaml");
    match decode(path, text) {
        Ok(providers) => {
            let sources = vec![PathBuf::from(path); providers.len()];
            let config = CredentialProviderConfig {
                providers,
                sources,
                files: Vec::new(),
                directory: false,
            };
            for problem in validate(&config) {
                assert!(!problem.field.is_empty(), "a problem without a field path: {problem:?}");
                assert!(problem.to_string().starts_with(&problem.field));
            }
        }
        Err(ConfigError::Field { field, reason, .. }) => {
            assert!(!field.is_empty(), "a refusal without a field path: {reason}");
        }
        Err(_) => {}
    }
});
