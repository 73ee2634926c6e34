//! AWS access shared by the programs: the settings read from the
//! environment, endpoints and partitions, the standard credential chain,
//! SigV4-signed calls with retries, and the few API operations the suite
//! makes (ECR and ECR Public authorization tokens, STS web-identity role
//! assumption, EC2 volume and instance lookups).
//!
//! Built on the official `aws-sigv4` signer rather than the full SDK; see
//! docs/decisions.md for the measurements behind that choice. Layers, each
//! importing only those before it: `endpoints` and `config`; `credentials`
//! (the value); `error`; `client` and `sts`; `chain`; the API operations.

pub mod arn;
pub mod chain;
pub mod client;
pub mod config;
pub mod credentials;
pub mod ec2;
pub mod ecr;
pub mod endpoints;
pub mod error;
pub mod sts;

pub use chain::CredentialsChain;
pub use client::AwsClient;
pub use config::{AwsConfig, AwsConfigError};
pub use credentials::{AwsCredentials, CredentialsError};
pub use endpoints::{EndpointOptions, Service};
pub use error::{AwsDetail, AwsError};
