//! AWS access shared by the programs: endpoints and partitions, the
//! standard credential chain, SigV4-signed calls with retries, and the few
//! API operations the suite makes (ECR and ECR Public authorization tokens,
//! STS web-identity role assumption, EC2 volume and instance lookups).
//!
//! Built on the official `aws-sigv4` signer rather than the full SDK; see
//! docs/decisions.md for the measurements behind that choice.

pub mod arn;
pub mod client;
pub mod credentials;
pub mod ec2;
pub mod ecr;
pub mod endpoints;
pub mod sts;

pub use client::{AwsClient, AwsError};
pub use credentials::{AwsCredentials, CredentialsChain, CredentialsError};
pub use endpoints::{EndpointOptions, Service};
