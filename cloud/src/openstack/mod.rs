//! OpenStack access for the webhook's Cinder lookup: the operator's `cloud.conf` or
//! `clouds.yaml` ([`config`]), Keystone v3 tokens and the service catalog's
//! block-storage endpoint ([`keystone`]), kept and refreshed by the crate's one token
//! cache, and Cinder's `GET /volumes/{id}` ([`cinder`]).
//!
//! Every call goes through the crate's HTTP plumbing ([`crate::api`]: bounded answers,
//! the caller's deadline, errors naming the URL, the status and OpenStack's own
//! message, cleaned of the password, secret and token). Keystone's URL and the
//! catalog's endpoint are [`SecureEndpoint`]s: https, or plain http on loopback only
//! (tests).
//!
//! Upstream facts (cloud-provider-openstack `pkg/client`, gophercloud): the config's
//! field names, the auth request bodies, the catalog types and their order, the
//! microversion header. Where this module departs from upstream, its doc says so.

type Call = crate::api::Calls<OpenStackError>;
pub mod cinder;
pub mod config;
pub mod error;
pub mod keystone;

use std::sync::Arc;
use std::time::Duration;

pub use cinder::{CINDER, VOLUME_API_VERSION, Volume, VolumesClient, check_volume_id};
pub use config::{Credential, Domain, Interface, Named, OpenStackConfig, OpenStackConfigError, Scope};
pub use error::{ErrorDetail, OpenStackError};
pub use keystone::{BLOCK_STORAGE_TYPES, KEYSTONE, KeystoneAuth, Selection, select_endpoint, tokens_url};

pub use crate::endpoint::SecureEndpoint;
use crate::token::CachedTokenSource;

/// Cinder calls as `config` describes them: its CA file (or the system's roots),
/// tokens from its credential kept until shortly before they expire; each request
/// within `timeout`.
pub fn volumes_client(
    config: &OpenStackConfig,
    user_agent: &str,
    timeout: Duration,
) -> Result<VolumesClient, OpenStackError> {
    let http = config.http_client(user_agent, timeout)?;
    let auth = KeystoneAuth::new(http.clone(), config, timeout);
    Ok(VolumesClient::new(http, Arc::new(CachedTokenSource::new(auth))))
}

impl OpenStackConfig {
    /// A client for Keystone and Cinder: the CA file's roots when given (else the
    /// system's), `timeout` for each whole request.
    pub fn http_client(
        &self,
        user_agent: &str,
        timeout: std::time::Duration,
    ) -> Result<reqwest::Client, crate::http::HttpClientError> {
        let trust = if self.insecure {
            crate::http::Trust::Insecure
        } else if self.ca_roots.is_empty() {
            crate::http::Trust::System
        } else {
            crate::http::Trust::Roots(self.ca_roots.clone())
        };
        crate::http::http_client_trusting(user_agent, timeout, trust)
    }
}
