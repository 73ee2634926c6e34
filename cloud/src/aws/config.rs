//! The AWS settings a program takes from its environment, read in one
//! place with the names and precedence the AWS SDKs use: the region, the
//! endpoints, and the variables the credential chain reads. Programs build
//! one [`AwsConfig`] at start-up (from the process environment, or from
//! given variables in tests) and hand it to the client and the chain.

use std::fmt;

use url::Url;

use super::endpoints::{self, EndpointOptions};
use crate::metadata::aws::IPV6_ENDPOINT;

/// IMDS's documented IPv4 address.
pub const IMDS_ENDPOINT: &str = "http://169.254.169.254/";

/// AWS settings from the environment. Its `Debug` shows variable names,
/// never their values (some are secrets).
#[derive(Clone, Default)]
pub struct AwsConfig {
    /// The non-empty `AWS_*` variables, as read once.
    variables: Vec<(String, String)>,
    endpoints: EndpointOptions,
}

/// A setting that cannot be used as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AwsConfigError {
    #[error("{variable}={value:?} is not an AWS region: use a name such as us-east-1")]
    Region { variable: &'static str, value: String },
    #[error("{variable}={value:?} is not a URL ({reason}): use for example http://169.254.169.254/")]
    ImdsEndpoint {
        variable: &'static str,
        value: String,
        reason: String,
    },
}

impl fmt::Debug for AwsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsConfig")
            .field("variables", &self.variables.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("endpoints", &self.endpoints)
            .finish()
    }
}

impl AwsConfig {
    /// The process environment's `AWS_*` variables.
    pub fn from_env() -> Self {
        Self::from_variables(
            std::env::vars_os().filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?))),
        )
    }

    /// These variables instead of the process environment (tests, and
    /// programs that pass settings explicitly). Only `AWS_*` names count;
    /// an empty value counts as unset, as in the SDKs.
    pub fn from_variables<K: Into<String>, V: Into<String>>(variables: impl IntoIterator<Item = (K, V)>) -> Self {
        let variables: Vec<(String, String)> = variables
            .into_iter()
            .map(|(name, value)| (name.into(), value.into()))
            .filter(|(name, value)| name.starts_with("AWS_") && !value.is_empty())
            .collect();
        let flag = |name: &str| lookup(&variables, name).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let endpoints = EndpointOptions {
            fips: flag("AWS_USE_FIPS_ENDPOINT"),
            dual_stack: flag("AWS_USE_DUALSTACK_ENDPOINT"),
            global_override: lookup(&variables, "AWS_ENDPOINT_URL").map(str::to_owned),
            service_overrides: variables
                .iter()
                .filter_map(|(name, value)| {
                    let service = name.strip_prefix("AWS_ENDPOINT_URL_")?;
                    Some((service.to_owned(), value.clone()))
                })
                .collect(),
        };
        Self { variables, endpoints }
    }

    /// A variable's non-empty value.
    pub fn var(&self, name: &str) -> Option<&str> {
        lookup(&self.variables, name)
    }

    /// `AWS_REGION`, else `AWS_DEFAULT_REGION` (the AWS CLI's name), when
    /// set; a value that cannot be a region is an error naming its variable.
    pub fn region(&self) -> Result<Option<&str>, AwsConfigError> {
        for variable in ["AWS_REGION", "AWS_DEFAULT_REGION"] {
            if let Some(value) = self.var(variable) {
                return if endpoints::valid_region(value) {
                    Ok(Some(value))
                } else {
                    Err(AwsConfigError::Region {
                        variable,
                        value: crate::logging::clean_text(value, &[], 64),
                    })
                };
            }
        }
        Ok(None)
    }

    /// `AWS_USE_FIPS_ENDPOINT`, `AWS_USE_DUALSTACK_ENDPOINT`, `AWS_ENDPOINT_URL`
    /// and `AWS_ENDPOINT_URL_<SERVICE>`.
    pub fn endpoints(&self) -> &EndpointOptions {
        &self.endpoints
    }

    /// Where the instance role is read: `None` when
    /// `AWS_EC2_METADATA_DISABLED=true`; else `AWS_EC2_METADATA_SERVICE_ENDPOINT`,
    /// the IPv6 address when `AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6`,
    /// or the documented IPv4 address.
    pub fn imds_endpoint(&self) -> Result<Option<Url>, AwsConfigError> {
        if self
            .var("AWS_EC2_METADATA_DISABLED")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            return Ok(None);
        }
        let (variable, value) = match self.var("AWS_EC2_METADATA_SERVICE_ENDPOINT") {
            Some(value) => ("AWS_EC2_METADATA_SERVICE_ENDPOINT", value),
            None if self
                .var("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE")
                .is_some_and(|m| m.eq_ignore_ascii_case("ipv6")) =>
            {
                ("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", IPV6_ENDPOINT)
            }
            // The variable's default.
            None => ("AWS_EC2_METADATA_SERVICE_ENDPOINT", IMDS_ENDPOINT),
        };
        let invalid = |reason: String| AwsConfigError::ImdsEndpoint {
            variable,
            value: crate::logging::clean_text(value, &[], 200),
            reason,
        };
        let url = Url::parse(value).map_err(|e| invalid(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(invalid("not an http(s) URL with a host".into()));
        }
        Ok(Some(url))
    }
}

fn lookup<'a>(variables: &'a [(String, String)], name: &str) -> Option<&'a str> {
    variables.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_is_aws_region_then_aws_default_region() {
        let config = |vars: &[(&str, &str)]| AwsConfig::from_variables(vars.iter().copied());
        assert_eq!(config(&[]).region(), Ok(None));
        assert_eq!(
            config(&[("AWS_DEFAULT_REGION", "eu-west-1")]).region(),
            Ok(Some("eu-west-1"))
        );
        assert_eq!(
            config(&[("AWS_DEFAULT_REGION", "eu-west-1"), ("AWS_REGION", "us-east-2")]).region(),
            Ok(Some("us-east-2"))
        );
        // Empty is unset, as in the SDKs.
        assert_eq!(
            config(&[("AWS_REGION", ""), ("AWS_DEFAULT_REGION", "eu-west-1")]).region(),
            Ok(Some("eu-west-1"))
        );
        let error = config(&[("AWS_REGION", "us-east-1.evil.example\n")])
            .region()
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("AWS_REGION=") && !error.contains('\n'), "{error}");
    }

    #[test]
    fn endpoints_come_from_the_sdk_variables_and_nothing_else() {
        let config = AwsConfig::from_variables([
            ("AWS_USE_FIPS_ENDPOINT", "TRUE"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000"),
            ("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:5001"),
            ("AWS_ENDPOINT_URL_EC2", ""),
            ("HOME", "/root"),
        ]);
        let endpoints = config.endpoints();
        assert!(endpoints.fips && !endpoints.dual_stack);
        assert_eq!(endpoints.global_override.as_deref(), Some("http://127.0.0.1:5000"));
        assert_eq!(
            endpoints.service_overrides,
            vec![("STS".to_owned(), "http://127.0.0.1:5001".to_owned())]
        );
        assert_eq!(config.var("HOME"), None);
    }

    #[test]
    fn the_instance_role_endpoint() {
        let config = |vars: &[(&str, &str)]| AwsConfig::from_variables(vars.iter().copied());
        assert_eq!(
            config(&[]).imds_endpoint().unwrap().map(String::from),
            Some(IMDS_ENDPOINT.to_owned())
        );
        assert_eq!(
            config(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv6")])
                .imds_endpoint()
                .unwrap()
                .map(String::from),
            Some(IPV6_ENDPOINT.to_owned())
        );
        assert_eq!(
            config(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:1338/")])
                .imds_endpoint()
                .unwrap()
                .map(String::from),
            Some("http://127.0.0.1:1338/".to_owned())
        );
        assert_eq!(
            config(&[("AWS_EC2_METADATA_DISABLED", "true")]).imds_endpoint(),
            Ok(None)
        );
        for bad in ["not a url", "file:///etc/passwd"] {
            let error = config(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT", bad)])
                .imds_endpoint()
                .unwrap_err()
                .to_string();
            assert!(error.starts_with("AWS_EC2_METADATA_SERVICE_ENDPOINT="), "{error}");
        }
    }

    #[test]
    fn debug_shows_names_never_values() {
        let config = AwsConfig::from_variables([("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI-K7MDENG")]);
        let shown = format!("{config:?}");
        assert!(
            shown.contains("AWS_SECRET_ACCESS_KEY") && !shown.contains("wJalr"),
            "{shown}"
        );
    }
}
