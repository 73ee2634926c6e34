//! Cloud access shared by the suite's programs: the HTTP client every
//! outbound call goes through, and the policy that decides which endpoints
//! may receive a credential.

pub mod endpoint;
pub mod go_duration;
pub mod http;
pub mod logging;

pub use endpoint::{EndpointError, SecureEndpoint};
pub use http::{HttpClientError, http_client};
