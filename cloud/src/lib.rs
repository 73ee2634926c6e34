//! Cloud access shared by the suite's programs: the HTTP client every
//! outbound call goes through, the policy that decides which endpoints may
//! receive a credential, the clouds' instance metadata services, and the
//! log-line and duration conventions the programs share. No command line:
//! the programs turn their flags into these types.

pub mod api;
pub mod aws;
pub mod azure;
pub mod endpoint;
pub mod files;
pub mod gcfg;
pub mod gcp;
pub mod go_duration;
pub mod http;
pub mod json;
pub mod logging;
pub mod metadata;
pub mod names;
pub mod openstack;
pub mod token;
pub mod vsphere;
pub mod yaml;

pub use endpoint::{EndpointError, SecureEndpoint};
pub use http::{
    HttpClientError, Trust as TlsTrust, http_client, http_client_trusting, http_client_with_tls, read_ca_file,
};
