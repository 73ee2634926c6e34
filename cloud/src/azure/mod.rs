//! Azure access shared by the programs: the `azure.json` cloud config
//! ([`config`]), the clouds' endpoints ([`environment`]), Entra ID tokens
//! from IMDS managed identity ([`identity`]), a client secret or a
//! federated client assertion ([`entra`]), kept and refreshed by the crate's one token
//! cache ([`token`]), ARM `Disks.Get` and managed disk URIs ([`arm`], for
//! the webhook), and ACR's token exchange ([`acr`], for the credential
//! provider).
//!
//! Every call goes through the crate's HTTP plumbing: IMDS through the
//! metadata client (never proxied, no redirects, bounded answers), the rest
//! through a client from [`crate::http::http_client`] with bounded bodies
//! and a deadline. Endpoints that receive a credential are
//! [`SecureEndpoint`]s: https, or plain http on loopback only (tests).
//! Errors name the URL, the HTTP status and Azure's own code and message,
//! cleaned of every secret the call held.
//!
//! Upstream facts (cloud-provider-azure, azidentity, MSAL): the names of
//! the config's fields and how they are decoded, the clouds' endpoints, the
//! IMDS and Entra requests, the ACR challenge and exchange, the managed disk
//! URI format. Where this module departs from upstream, its doc says so.

pub mod acr;
pub mod arm;
type Call = crate::api::Calls<AzureError>;
pub mod config;
pub mod entra;
pub mod environment;
pub mod error;
pub mod identity;
pub mod token;

pub use acr::{ACR_USERNAME, AcrChallenge, AcrClient, AcrRefreshToken};
pub use arm::{DISKS_API_VERSION, Disk, DiskUriError, DisksClient, ManagedDiskUri, zone_label};
pub use config::{AuthMethod, AzureConfig, AzureConfigError, UserAssignedIdentity};
pub use entra::{Assertion, ClientAssertionCredential, ClientSecretCredential};
pub use environment::{ACR_AUDIENCE, AzureCloud, CloudEndpoints, scope_for};
pub use error::{AzureError, ErrorDetail};
pub use identity::{IMDS_ENDPOINT, ManagedIdentityCredential, credential_from_config, imds_base};
pub use token::{AccessToken, CachedTokenSource, TokenFuture, TokenSource};

use crate::api::InvalidName;
use crate::endpoint::SecureEndpoint;

/// `endpoint` as a base URL that relative paths join under: the path ends
/// with `/`, without query or fragment.
pub(crate) fn base_url(endpoint: &SecureEndpoint) -> url::Url {
    let mut base = endpoint.url().clone();
    base.set_query(None);
    base.set_fragment(None);
    if !base.path().ends_with('/') {
        let path = format!("{}/", base.path());
        base.set_path(&path);
    }
    base
}

/// Checks that `value` can stand as one segment of a URL path (a tenant,
/// subscription, resource group or disk name): not empty, not `.` or `..`,
/// at most 253 characters, and none of `/ \ ? # %`, spaces or control
/// characters, so a name from a PersistentVolume or a config cannot reach
/// another resource. (Azure's names allow more than Google's: parentheses
/// and non-ASCII letters in resource groups; those are percent-encoded.)
pub(crate) fn check_segment<'a>(what: &'static str, value: &'a str) -> Result<&'a str, AzureError> {
    if value.is_empty() {
        return Err(AzureError::InvalidName(InvalidName::new(what, value, "it is empty")));
    }
    if value.chars().count() > 253 {
        return Err(AzureError::InvalidName(InvalidName::new(
            what,
            value,
            "it is longer than 253 characters",
        )));
    }
    if value == "." || value == ".." {
        return Err(AzureError::InvalidName(InvalidName::new(
            what,
            value,
            "it is a relative path",
        )));
    }
    if value
        .chars()
        .any(|c| matches!(c, '/' | '\\' | '?' | '#' | '%') || c.is_whitespace() || c.is_control())
    {
        return Err(AzureError::InvalidName(InvalidName::new(
            what,
            value,
            "'/', '\\', '?', '#', '%', spaces and control characters may not appear in it",
        )));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_single_names() {
        for ok in [
            "MC_rg_aks_eastus",
            "rg(prod).1",
            "pvc-0a1b",
            "grüppe",
            "contoso.onmicrosoft.com",
        ] {
            assert_eq!(check_segment("name", ok).unwrap(), ok);
        }
        // The value quoted once, a control character escaped once.
        let error = check_segment("disk", "d\u{1b}[31m").unwrap_err().to_string();
        assert!(error.starts_with(r#"disk "d\u{1b}[31m" is not valid"#), "{error}");
        for bad in ["", ".", "..", "a/b", "a\\b", "d?x", "d#f", "d%2F", "d e", "a\nb"] {
            let error = check_segment("name", bad).unwrap_err().to_string();
            assert!(error.starts_with("name "), "{bad:?}: {error}");
            assert!(!error.contains('\n'), "{error}");
        }
    }
}
