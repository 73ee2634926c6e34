//! Amazon ECR registry hosts and authorization tokens (private ECR in
//! every partition, FIPS and dual-stack hosts, and ECR Public).

use std::time::{Instant, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use secrecy::SecretString;

use super::client::AwsClient;
use super::credentials::AwsCredentials;
use super::endpoints::{ECR, ECR_PUBLIC};
use super::error::AwsError;

/// What a registry host says about where its API lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registry {
    Private {
        account: String,
        region: String,
        fips: bool,
        dual_stack: bool,
    },
    /// ECR Public (`public.ecr.aws`, or `ecr-public.aws.com` over dual stack).
    Public { dual_stack: bool },
}

/// ECR Public's API is in us-east-1 only.
pub const PUBLIC_REGION: &str = "us-east-1";

const PRIVATE_SUFFIXES: &[&str] = &[
    "amazonaws.com",
    "amazonaws.com.cn",
    "c2s.ic.gov",
    "sc2s.sgov.gov",
    "cloud.adc-e.uk",
    "csp.hci.ic.gov",
];

/// Parses a registry host (with or without a port or path): `None` when it
/// is not ECR's.
pub fn parse_registry(host: &str) -> Option<Registry> {
    let host = host.split('/').next()?.split(':').next()?.to_ascii_lowercase();
    match host.as_str() {
        "public.ecr.aws" => return Some(Registry::Public { dual_stack: false }),
        "ecr-public.aws.com" => return Some(Registry::Public { dual_stack: true }),
        _ => {}
    }
    let (account, rest) = host.split_once('.')?;
    if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (kind, rest) = rest.split_once('.')?;
    let (region, suffix) = rest.split_once('.')?;
    let (fips, dual_stack) = match (kind, suffix) {
        ("dkr", _) => {
            let (service, suffix) = (region, suffix);
            let (region, suffix) = suffix.split_once('.')?;
            let fips = match service {
                "ecr" => false,
                "ecr-fips" => true,
                _ => return None,
            };
            if !PRIVATE_SUFFIXES.contains(&suffix) || !super::endpoints::valid_region(region) {
                return None;
            }
            return Some(Registry::Private {
                account: account.to_owned(),
                region: region.to_owned(),
                fips,
                dual_stack: false,
            });
        }
        ("dkr-ecr", "on.aws") => (false, true),
        ("dkr-ecr-fips", "on.aws") => (true, true),
        _ => return None,
    };
    if !super::endpoints::valid_region(region) {
        return None;
    }
    Some(Registry::Private {
        account: account.to_owned(),
        region: region.to_owned(),
        fips,
        dual_stack,
    })
}

/// A registry login.
#[derive(Debug)]
pub struct AuthorizationToken {
    pub username: String,
    pub password: SecretString,
    pub expires_at: Option<SystemTime>,
}

/// `GetAuthorizationToken` of private ECR (`client` in the registry's
/// region and endpoint flavour) or of ECR Public.
pub async fn authorization_token(
    client: &AwsClient,
    public: bool,
    credentials: &AwsCredentials,
    deadline: Instant,
) -> Result<AuthorizationToken, AwsError> {
    const ACTION: &str = "GetAuthorizationToken";
    let (service, prefix) = if public {
        (ECR_PUBLIC, "SpencerFrontendService")
    } else {
        (ECR, "AmazonEC2ContainerRegistry_V20150921")
    };
    let answer = client
        .json(service, prefix, ACTION, &serde_json::json!({}), credentials, deadline)
        .await?;
    parse_authorization_answer(&answer).map_err(|problem| AwsError::garbage(service.signing_name, ACTION, problem))
}

/// A `GetAuthorizationToken` answer: private ECR's `authorizationData` list
/// (its first entry) or ECR Public's single object, whose
/// `authorizationToken` is base64 of `user:password`. A problem names what
/// is wrong and never quotes the answer (it holds the password).
pub fn parse_authorization_answer(answer: &serde_json::Value) -> Result<AuthorizationToken, &'static str> {
    // Private ECR answers a list, ECR Public a single object.
    let data = match &answer["authorizationData"] {
        serde_json::Value::Array(list) => list.first(),
        object @ serde_json::Value::Object(_) => Some(object),
        _ => None,
    }
    .ok_or("no authorizationData")?;
    let token = data["authorizationToken"].as_str().ok_or("no authorizationToken")?;
    let decoded = STANDARD
        .decode(token)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or("authorizationToken is not base64 text")?;
    let (username, password) = decoded
        .split_once(':')
        .ok_or("authorizationToken is not user:password")?;
    // An expiry out of range is unknown: the token is then not cached.
    let expires_at = data["expiresAt"].as_f64().and_then(crate::go_duration::unix_time);
    Ok(AuthorizationToken {
        username: username.to_owned(),
        password: SecretString::from(password.to_owned()),
        expires_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn private(account: &str, region: &str, fips: bool, dual_stack: bool) -> Option<Registry> {
        Some(Registry::Private {
            account: account.into(),
            region: region.into(),
            fips,
            dual_stack,
        })
    }

    #[test]
    fn registry_hosts_in_every_partition_and_flavour() {
        let a = "123456789012";
        assert_eq!(
            parse_registry("123456789012.dkr.ecr.eu-west-1.amazonaws.com"),
            private(a, "eu-west-1", false, false)
        );
        assert_eq!(
            parse_registry("123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/app"),
            private(a, "cn-north-1", false, false)
        );
        assert_eq!(
            parse_registry("123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com"),
            private(a, "us-gov-west-1", true, false)
        );
        assert_eq!(
            parse_registry("123456789012.dkr-ecr.eu-west-1.on.aws"),
            private(a, "eu-west-1", false, true)
        );
        assert_eq!(
            parse_registry("123456789012.dkr-ecr-fips.us-east-1.on.aws"),
            private(a, "us-east-1", true, true)
        );
        assert_eq!(
            parse_registry("123456789012.dkr.ecr.us-iso-east-1.c2s.ic.gov"),
            private(a, "us-iso-east-1", false, false)
        );
        assert_eq!(
            parse_registry("123456789012.dkr.ecr.us-west-2.amazonaws.com:443"),
            private(a, "us-west-2", false, false)
        );
        assert_eq!(
            parse_registry("public.ecr.aws"),
            Some(Registry::Public { dual_stack: false })
        );
        assert_eq!(
            parse_registry("ecr-public.aws.com"),
            Some(Registry::Public { dual_stack: true })
        );
        for other in [
            "docker.io",
            "12345.dkr.ecr.eu-west-1.amazonaws.com",
            "123456789012.dkr.ecr.eu-west-1.example.com",
            "123456789012.dkr.ecr.amazonaws.com",
            "123456789012.dkr.notecr.eu-west-1.amazonaws.com",
            "123456789012.dkr-ecr.eu-west-1.amazonaws.com",
        ] {
            assert_eq!(parse_registry(other), None, "{other}");
        }
    }
}
