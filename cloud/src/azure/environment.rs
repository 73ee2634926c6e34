//! Azure's clouds and their endpoints: the Entra ID authority host, the
//! Resource Manager endpoint and its token audience, the container
//! registries' DNS suffix and the audience of ACR's token exchange.
//!
//! As cloud-provider-azure names them (`azclient.EnvironmentFromName` and
//! `utils.AzureCloudConfigFromName`): the config's `cloud`, trimmed and
//! compared case-insensitively, is `AzurePublicCloud` (or `AzureCloud`),
//! `AzureChinaCloud`, or `AzureUSGovernmentCloud` (or `AzureUSGovernment`);
//! empty and every other name are the public cloud, as upstream has it
//! ([`AzureCloud::from_name`] says whether the name was known, so a program
//! can warn). A custom cloud (`resourceManagerEndpoint`) is read from ARM's
//! `/metadata/endpoints`, as upstream reads it ([`CloudEndpoints::discover`]).
//!
//! Every endpoint is a [`SecureEndpoint`]; tests build a [`CloudEndpoints`]
//! with the fake's loopback URLs in place of Azure's.

use std::time::Instant;

use serde_json::Value;

use super::Call;
use super::error::AzureError;
use crate::endpoint::{EndpointError, SecureEndpoint};

/// The audience (resource) of ACR's token exchange: the same in every
/// cloud, as acr-credential-provider asks for it (`AcrAudience`).
pub const ACR_AUDIENCE: &str = "https://containerregistry.azure.net";

/// What errors of the custom cloud's discovery name.
const SERVICE: &str = "ARM metadata endpoints";

/// The api-version cloud-provider-azure reads `/metadata/endpoints` with.
const METADATA_ENDPOINTS_PATH: &str = "metadata/endpoints?api-version=2019-05-01";

/// One of Azure's built-in clouds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AzureCloud {
    Public,
    China,
    UsGovernment,
}

impl AzureCloud {
    pub const ALL: [AzureCloud; 3] = [AzureCloud::Public, AzureCloud::China, AzureCloud::UsGovernment];

    /// The cloud a config's `cloud` names, and whether the name was one
    /// upstream knows (empty counts as known: it means the public cloud).
    /// As upstream, an unknown name is the public cloud.
    pub fn from_name(name: &str) -> (AzureCloud, bool) {
        match name.trim().to_ascii_uppercase().as_str() {
            "" | "AZUREPUBLICCLOUD" | "AZURECLOUD" => (AzureCloud::Public, true),
            "AZURECHINACLOUD" => (AzureCloud::China, true),
            "AZUREUSGOVERNMENTCLOUD" | "AZUREUSGOVERNMENT" => (AzureCloud::UsGovernment, true),
            _ => (AzureCloud::Public, false),
        }
    }

    /// The name upstream's environment carries.
    pub fn name(self) -> &'static str {
        match self {
            AzureCloud::Public => "AzurePublicCloud",
            AzureCloud::China => "AzureChinaCloud",
            AzureCloud::UsGovernment => "AzureUSGovernmentCloud",
        }
    }

    /// `(authority host, resource manager, its token audience, ACR suffix)`,
    /// from azcore's `cloud.Azure*` and azclient's environments.
    fn raw(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            AzureCloud::Public => (
                "https://login.microsoftonline.com/",
                "https://management.azure.com/",
                "https://management.core.windows.net/",
                "azurecr.io",
            ),
            AzureCloud::China => (
                "https://login.chinacloudapi.cn/",
                "https://management.chinacloudapi.cn/",
                "https://management.core.chinacloudapi.cn/",
                "azurecr.cn",
            ),
            AzureCloud::UsGovernment => (
                "https://login.microsoftonline.us/",
                "https://management.usgovcloudapi.net/",
                "https://management.core.usgovcloudapi.net/",
                "azurecr.us",
            ),
        }
    }

    /// The cloud's endpoints. (Built from constants that parse, as a test
    /// checks: the error is never seen.)
    pub fn endpoints(self) -> Result<CloudEndpoints, EndpointError> {
        let (authority, arm, audience, acr) = self.raw();
        let secure = |url: &str| SecureEndpoint::parse("built-in Azure endpoint", url);
        Ok(CloudEndpoints {
            name: self.name().to_owned(),
            authority_host: secure(authority)?,
            resource_manager: secure(arm)?,
            resource_manager_audience: audience.to_owned(),
            acr_dns_suffix: acr.to_owned(),
            acr_audience: ACR_AUDIENCE.to_owned(),
        })
    }
}

/// Where a cloud's services are. Fields are public so that a program can
/// map its flags onto them, and tests point them at a fake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudEndpoints {
    /// The environment's name (`AzurePublicCloud`, or a custom cloud's).
    pub name: String,
    /// Entra ID's authority host; tokens come from
    /// `{authority_host}{tenant}/oauth2/v2.0/token`.
    pub authority_host: SecureEndpoint,
    /// Azure Resource Manager.
    pub resource_manager: SecureEndpoint,
    /// The resource (audience) of tokens for ARM; the scope asked for is
    /// this without its trailing `/`, then `/.default`.
    pub resource_manager_audience: String,
    /// The registries' DNS suffix, without a leading dot (`azurecr.io`).
    pub acr_dns_suffix: String,
    /// The resource (audience) of the token ACR's exchange takes.
    pub acr_audience: String,
}

impl CloudEndpoints {
    /// A custom cloud's endpoints as cloud-provider-azure reads them when
    /// the config has `resourceManagerEndpoint`: `GET
    /// {resource_manager}metadata/endpoints?api-version=2019-05-01`, the
    /// entry whose `name` is `cloud_name` (case-insensitive; the first
    /// entry when `cloud_name` is empty) overriding `base` (the cloud
    /// `cloud_name` names): `resourceManager` (else `resource_manager`
    /// itself), `authentication.audiences[0]`, `authentication.loginEndpoint`,
    /// `suffixes.acrLoginServer`. No matching entry leaves `base` as it is,
    /// as upstream does. Unlike upstream (a plain `http.Get`), the call goes
    /// through the crate's client, within `deadline`, and every endpoint
    /// read must be https (or http on loopback).
    pub async fn discover(
        http: &reqwest::Client,
        resource_manager: &SecureEndpoint,
        cloud_name: &str,
        base: CloudEndpoints,
        deadline: Instant,
    ) -> Result<CloudEndpoints, AzureError> {
        let url = metadata_endpoints_url(resource_manager)?;
        let body = Call::send(SERVICE, &url, http.get(url.clone()), deadline, &[]).await?;
        let json = Call::json(SERVICE, &url, &body)?;
        let garbage = |problem: String| Call::garbage(SERVICE, &url, problem);
        let entries = json
            .as_array()
            .ok_or_else(|| garbage("the answer is not a list of environments".into()))?;
        let wanted = cloud_name.trim();
        let Some(entry) = entries
            .iter()
            .find(|entry| wanted.is_empty() || entry["name"].as_str().is_some_and(|n| n.eq_ignore_ascii_case(wanted)))
        else {
            return Ok(base);
        };
        let text = |value: &Value| {
            value
                .as_str()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let endpoint = |what: &str, value: &str| SecureEndpoint::parse(what, value).map_err(|e| garbage(e.to_string()));
        let audience = text(&entry["authentication"]["audiences"][0])
            .ok_or_else(|| garbage("the environment has no authentication.audiences".into()))?;
        let mut endpoints = CloudEndpoints {
            name: text(&entry["name"]).map_or(base.name, |name| crate::logging::clean_text(&name, &[], 100)),
            resource_manager: match text(&entry["resourceManager"]) {
                Some(arm) => endpoint("resourceManager", &arm)?,
                None => resource_manager.clone(),
            },
            resource_manager_audience: audience,
            ..base
        };
        if let Some(login) = text(&entry["authentication"]["loginEndpoint"]) {
            endpoints.authority_host = endpoint("authentication.loginEndpoint", &login)?;
        }
        // As upstream (a *string): given, even empty, it replaces the base's;
        // the credential provider checks it names a registry domain.
        match &entry["suffixes"]["acrLoginServer"] {
            Value::Null => {}
            Value::String(suffix) => {
                endpoints.acr_dns_suffix = suffix.trim().trim_start_matches('.').to_owned();
            }
            _ => {
                return Err(garbage(format!(
                    "environment {}'s suffixes.acrLoginServer is not text: a registry domain is needed",
                    endpoints.name
                )));
            }
        }
        Ok(endpoints)
    }

    /// `{authority_host}{tenant}/oauth2/v2.0/token`.
    pub fn token_url(&self, tenant: &str) -> Result<url::Url, AzureError> {
        token_url(&self.authority_host, tenant)
    }
}

/// What [`CloudEndpoints::discover`] reads a custom cloud's endpoints from:
/// `{resource_manager}metadata/endpoints?api-version=2019-05-01`.
pub fn metadata_endpoints_url(resource_manager: &SecureEndpoint) -> Result<url::Url, AzureError> {
    let root = super::base_url(resource_manager);
    root.join(METADATA_ENDPOINTS_PATH)
        .map_err(|e| Call::garbage(SERVICE, &root, e.to_string()))
}

/// `{authority}{tenant}/oauth2/v2.0/token`, the tenant checked to be one
/// path segment (a GUID or a domain name).
pub fn token_url(authority: &SecureEndpoint, tenant: &str) -> Result<url::Url, AzureError> {
    let tenant = super::check_segment("tenant ID", tenant.trim())?;
    let base = super::base_url(authority);
    base.join(&format!("{tenant}/oauth2/v2.0/token"))
        .map_err(|e| Call::garbage("Entra ID", &base, e.to_string()))
}

/// The OAuth scope for `resource`: without its trailing `/`, then
/// `/.default` (`https://management.core.windows.net/.default`), as
/// azclient's `DefaultTokenScopeFor` and acr-credential-provider build it.
pub fn scope_for(resource: &str) -> String {
    let resource = resource.trim();
    if resource.ends_with("/.default") {
        return resource.to_owned();
    }
    format!("{}/.default", resource.trim_end_matches('/'))
}

/// The resource IMDS is asked for: the scope without `/.default`, as MSAL
/// sends it (`strings.TrimSuffix(resource, "/.default")`).
pub fn resource_of(scope_or_resource: &str) -> String {
    let value = scope_or_resource.trim();
    value.strip_suffix("/.default").unwrap_or(value).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_as_upstream_reads_them() {
        for (name, cloud, known) in [
            ("", AzureCloud::Public, true),
            ("AzurePublicCloud", AzureCloud::Public, true),
            (" azurecloud ", AzureCloud::Public, true),
            ("AZURECHINACLOUD", AzureCloud::China, true),
            ("azureChinaCloud", AzureCloud::China, true),
            ("AzureUSGovernmentCloud", AzureCloud::UsGovernment, true),
            ("AzureUSGovernment", AzureCloud::UsGovernment, true),
            ("AzureGermanCloud", AzureCloud::Public, false),
            ("AzureStackCloud", AzureCloud::Public, false),
        ] {
            assert_eq!(AzureCloud::from_name(name), (cloud, known), "{name:?}");
        }
    }

    #[test]
    fn every_cloud_has_its_endpoints() {
        let china = AzureCloud::China.endpoints().unwrap();
        assert_eq!(china.authority_host.as_str(), "https://login.chinacloudapi.cn/");
        assert_eq!(china.resource_manager.as_str(), "https://management.chinacloudapi.cn/");
        assert_eq!(china.acr_dns_suffix, "azurecr.cn");
        assert_eq!(
            AzureCloud::UsGovernment.endpoints().unwrap().acr_dns_suffix,
            "azurecr.us"
        );
        for cloud in AzureCloud::ALL {
            let (authority, arm, _, _) = cloud.raw();
            let endpoints = cloud.endpoints().unwrap();
            assert_eq!(endpoints.authority_host.as_str(), authority);
            assert_eq!(endpoints.resource_manager.as_str(), arm);
            assert_eq!(endpoints.acr_audience, ACR_AUDIENCE);
        }
        let public = AzureCloud::Public.endpoints().unwrap();
        assert_eq!(
            public
                .token_url("72f988bf-86f1-41af-91ab-2d7cd011db47")
                .unwrap()
                .as_str(),
            "https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/oauth2/v2.0/token"
        );
        assert!(public.token_url("../common").is_err());
    }

    #[test]
    fn scopes_and_resources() {
        assert_eq!(
            scope_for("https://management.core.windows.net/"),
            "https://management.core.windows.net/.default"
        );
        assert_eq!(scope_for(ACR_AUDIENCE), "https://containerregistry.azure.net/.default");
        assert_eq!(scope_for("api://x/.default"), "api://x/.default");
        assert_eq!(
            resource_of("https://containerregistry.azure.net/.default"),
            ACR_AUDIENCE
        );
        assert_eq!(
            resource_of("https://management.core.windows.net/"),
            "https://management.core.windows.net/"
        );
    }
}
