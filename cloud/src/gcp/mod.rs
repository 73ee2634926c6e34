//! Google Cloud access shared by the programs: the GCE metadata server (the
//! node's project, service account, token, scopes and attributes), cached
//! access tokens, the Compute Engine calls the webhook makes (`disks.get`,
//! `regionDisks.get`) and the workload-identity exchanges the credential
//! provider makes (STS, IAM Credentials).
//!
//! Every call goes through the crate's HTTP plumbing: the metadata server
//! through [`crate::metadata::MetadataClient`] (never proxied, bounded
//! answers), the APIs through a client from [`crate::http::http_client`]
//! with bounded bodies and the caller's deadline. Endpoints are
//! [`SecureEndpoint`]s, so a bearer token is only ever sent over TLS (or
//! plain HTTP on loopback, for tests). Errors name the URL, the HTTP status
//! and Google's own error reason and message, cleaned of every secret the
//! call held.

type Call = crate::api::Calls<GcpError>;
pub mod compute;
pub mod error;
pub mod iam;
pub mod metadata;
pub mod sts;
pub mod token;

pub use compute::{COMPUTE_ENDPOINT, ComputeClient, Disk, MAX_REGION_ZONES, region_of_zone};
pub use error::{ErrorDetail, GcpError};
pub use iam::{IAM_CREDENTIALS_ENDPOINT, IamCredentialsClient};
pub use metadata::{DEFAULT_METADATA_BASE, GceMetadata, METADATA_HOST_ENV, metadata_base};
pub use sts::{CLOUD_PLATFORM_SCOPE, STS_ENDPOINT, StsClient, workload_identity_audience};
pub use token::{AccessToken, CachedTokenSource, TokenFuture, TokenSource};

use crate::api::InvalidName;
use crate::endpoint::{EndpointError, SecureEndpoint};

/// The endpoint a program was given (`given`, from a flag or variable that
/// `what` names), else Google's `default`: https, or plain http on loopback
/// only, since a bearer token travels with every call.
pub fn endpoint(what: &str, given: Option<&str>, default: &str) -> Result<SecureEndpoint, EndpointError> {
    SecureEndpoint::parse(what, given.filter(|g| !g.trim().is_empty()).unwrap_or(default))
}

/// `endpoint` as a base URL that relative API paths join under: the path
/// ends with `/` (so `…/compute/v1` keeps its `v1`), without query or
/// fragment.
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

/// Checks that `value` can stand as one segment of an API path (a project,
/// zone, region, disk or service account): what Google's names are made of
/// (letters, digits, `-`, `_`, `.`, `:` for domain-scoped projects, `@` and
/// `+` in e-mail addresses), never `/`, `?`, `%`, `.` or `..`, so a name from
/// a PersistentVolume or an annotation cannot reach another resource.
pub(crate) fn check_name<'a>(what: &'static str, value: &'a str) -> Result<&'a str, GcpError> {
    let invalid = |problem| GcpError::InvalidName(InvalidName::new(what, value, problem));
    if value.is_empty() {
        return Err(invalid("it is empty"));
    }
    if value.len() > 253 {
        return Err(invalid("it is longer than 253 characters"));
    }
    if value == "." || value == ".." {
        return Err(invalid("it is a relative path"));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@' | '+');
    if !value.chars().all(allowed) {
        return Err(invalid(
            "only letters, digits and '-', '_', '.', ':', '@', '+' may appear in it",
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_single_path_segments() {
        for ok in [
            "my-project",
            "example.com:legacy-project",
            "us-central1-a",
            "pvc-0a1b2c3d",
            "app@my-project.iam.gserviceaccount.com",
        ] {
            assert_eq!(check_name("disk", ok).unwrap(), ok);
        }
        for bad in [
            "", ".", "..", "a/b", "../x", "d?x=1", "d#f", "d%2F", "d e", "dé", "a\nb",
        ] {
            let error = check_name("disk", bad).unwrap_err().to_string();
            assert!(error.starts_with("disk "), "{bad:?}: {error}");
            assert!(!error.contains('\n'), "{error}");
        }
    }

    #[test]
    fn bases_end_with_a_slash() {
        let given = endpoint(
            "--compute-endpoint",
            Some("http://127.0.0.1:9/compute/v1?x=1"),
            COMPUTE_ENDPOINT,
        )
        .unwrap();
        assert_eq!(base_url(&given).as_str(), "http://127.0.0.1:9/compute/v1/");
        let default = endpoint("--compute-endpoint", Some(" "), COMPUTE_ENDPOINT).unwrap();
        assert_eq!(base_url(&default).as_str(), COMPUTE_ENDPOINT);
        assert!(endpoint("--compute-endpoint", Some("http://10.0.0.1/"), COMPUTE_ENDPOINT).is_err());
    }
}
