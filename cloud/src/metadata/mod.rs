//! Cloud instance metadata services: the instance's addresses in the order
//! the cloud's controller manager reports them, and its names.
//!
//! Each provider reads its documented metadata API over plain HTTP on a
//! link-local address (never through a proxy), with short time-outs: a node
//! at boot must not hang on a service that is not there.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use url::Url;

pub mod aws;
pub mod azure;
pub mod digitalocean;
pub mod gce;
pub mod hetzner;
pub mod openstack;

/// `Node.status.addresses[].type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum AddressKind {
    InternalIP,
    ExternalIP,
    InternalDNS,
    ExternalDNS,
    Hostname,
}

impl fmt::Display for AddressKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CloudAddress {
    #[serde(rename = "type")]
    pub kind: AddressKind,
    pub address: String,
}

impl CloudAddress {
    pub fn new(kind: AddressKind, address: impl Into<String>) -> Self {
        Self {
            kind,
            address: address.into(),
        }
    }
}

/// What a metadata service says about this instance.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    /// In the order the cloud controller manager reports them.
    pub addresses: Vec<CloudAddress>,
    pub hostname: Option<String>,
    pub instance_id: Option<String>,
    /// The instance's name, where the cloud's controller manager looks the
    /// node up by it (GCE's `instance/name`).
    pub name: Option<String>,
    /// The cloud's private DNS name, where it has one (EC2's `PrivateDnsName`).
    pub private_dns: Option<String>,
    /// The instance's region, where the service says.
    pub region: Option<String>,
    /// The instance's zone (EC2's availability zone, GCE's zone name), for
    /// the provider ID.
    pub zone: Option<String>,
    /// The project the instance is in (GCE's project ID), for the provider ID.
    pub project: Option<String>,
    /// The instance's full resource ID (Azure's `compute.resourceId`), for
    /// the provider ID.
    pub resource_id: Option<String>,
}

impl Instance {
    fn push(&mut self, kind: AddressKind, address: impl Into<String>) {
        let address = address.into();
        let address = address.trim();
        if !address.is_empty() && !self.addresses.iter().any(|a| a.kind == kind && a.address == address) {
            self.addresses.push(CloudAddress::new(kind, address));
        }
    }
}

/// The metadata services this crate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Aws,
    Gce,
    Azure,
    OpenStack,
    DigitalOcean,
    Hetzner,
}

impl Provider {
    pub const ALL: [Provider; 6] = [
        Provider::Aws,
        Provider::Gce,
        Provider::Azure,
        Provider::OpenStack,
        Provider::DigitalOcean,
        Provider::Hetzner,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Provider::Aws => "aws",
            Provider::Gce => "gce",
            Provider::Azure => "azure",
            Provider::OpenStack => "openstack",
            Provider::DigitalOcean => "digitalocean",
            Provider::Hetzner => "hetzner",
        }
    }

    /// The documented endpoint's root; paths are joined under it. AWS also
    /// has an IPv6 one ([`aws::IPV6_ENDPOINT`]).
    pub fn default_endpoint(self) -> &'static str {
        "http://169.254.169.254/"
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// What this cloud's controller manager expects of a Node's identity:
    /// the one table entry a cloud adds (its rules live in its own file).
    fn ccm(self) -> &'static dyn CcmRules {
        match self {
            Provider::Aws => &aws::Ccm,
            Provider::Gce => &gce::Ccm,
            Provider::Azure => &azure::Ccm,
            Provider::OpenStack => &openstack::Ccm,
            Provider::DigitalOcean => &digitalocean::Ccm,
            Provider::Hetzner => &hetzner::Ccm,
        }
    }
}

/// How a cloud's controller manager names and finds an instance
/// (InstancesV2's `InstanceMetadata`, through k8s.io/cloud-provider's node
/// controller): the provider ID it writes and parses, and the node names it
/// finds the instance by when a Node has none. Each cloud's file cites its
/// CCM's code.
trait CcmRules: Sync {
    /// The provider ID the CCM would write for `instance`; `Err` says what
    /// the metadata lacks.
    fn provider_id(&self, instance: &Instance, options: &ProviderIdOptions) -> Result<String, String>;
    /// The instance a provider ID names, in a form compared with
    /// [`CcmRules::key`] of this instance's own ID; `Err` when the CCM
    /// cannot parse it.
    fn key(&self, provider_id: &str) -> Result<String, String>;
    /// Whether the CCM finds `instance` by the node name `node`, when the
    /// Node has no provider ID.
    fn finds_by_name(&self, node: &str, instance: &Instance) -> bool;
    /// The node names it finds the instance by, for messages.
    fn names(&self, instance: &Instance) -> Vec<String>;
}

/// What the flags say about the provider ID's form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderIdOptions {
    /// OpenStack: write the regional form `openstack://REGION/UUID`, as the
    /// OpenStack CCM does with `OS_CCM_REGIONAL=true`.
    pub openstack_region: Option<String>,
}

/// Why this instance gets no provider ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no {provider} provider ID: {reason}")]
pub struct InvalidProviderId {
    pub provider: &'static str,
    pub reason: String,
}

/// The most a provider ID may hold (the apiserver sets no limit; Azure's,
/// the longest, are a few hundred bytes).
const MAX_PROVIDER_ID: usize = 1024;

/// The provider ID `provider`'s controller manager writes for `instance`
/// (`spec.providerID`), for kubelet's `--provider-id`. It ends up on
/// kubelet's command line: whitespace, control characters, quotes, `\`, `$`
/// and backticks are refused, so a value from metadata can never smuggle in
/// a flag or a substitution.
pub fn provider_id(
    provider: Provider,
    instance: &Instance,
    options: &ProviderIdOptions,
) -> Result<String, InvalidProviderId> {
    let invalid = |reason: String| InvalidProviderId {
        provider: provider.name(),
        reason,
    };
    let id = provider.ccm().provider_id(instance, options).map_err(invalid)?;
    if id.len() > MAX_PROVIDER_ID {
        return Err(invalid(format!("{} bytes, more than {MAX_PROVIDER_ID}", id.len())));
    }
    Ok(id)
}

/// The first character of `value` that must not reach a command line.
pub fn unsafe_in_a_flag(value: &str) -> Option<char> {
    value
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '\\' | '$' | '`'))
}

/// `value`, one part of a provider ID: present, without `/` and safe on a
/// command line.
fn provider_id_part<'a>(what: &str, value: Option<&'a str>) -> Result<&'a str, String> {
    let value = value.map(str::trim).filter(|v| !v.is_empty());
    let value = value.ok_or_else(|| format!("the metadata service gave no {what}"))?;
    if let Some(c) = unsafe_in_a_flag(value).or(value.contains('/').then_some('/')) {
        return Err(format!("the {what} {:?} holds {c:?}", shorten(value)));
    }
    Ok(value)
}

/// `value` if it is a decimal number, as DigitalOcean's and Hetzner's
/// CCMs parse their IDs.
fn decimal_id(what: &str, value: Option<&str>) -> Result<String, String> {
    let value = provider_id_part(what, value)?;
    match value.parse::<u64>() {
        Ok(number) => Ok(number.to_string()),
        Err(_) => Err(format!("the {what} {:?} is not a decimal number", shorten(value))),
    }
}

/// A Node's identity as one cloud's controller manager sees it, to tell
/// whether the Node names this instance.
#[derive(Debug, Clone)]
pub struct CcmMatching {
    pub provider: Provider,
    pub instance: Instance,
}

impl CcmMatching {
    /// Whether the provider ID `theirs` (a Node's) names this instance, as
    /// the CCM parses it: `Err` with the reason when the CCM cannot parse
    /// it, `Ok(false)` when it names another instance.
    pub fn names_this_instance(&self, theirs: &str, options: &ProviderIdOptions) -> Result<bool, String> {
        let rules = self.provider.ccm();
        let theirs = rules.key(theirs)?;
        let ours = rules.provider_id(&self.instance, options)?;
        Ok(rules.key(&ours).is_ok_and(|ours| ours == theirs))
    }

    /// Whether the CCM finds this instance by the node name `node`.
    pub fn finds_by_name(&self, node: &str) -> bool {
        self.provider.ccm().finds_by_name(node, &self.instance)
    }

    /// The node names the CCM finds this instance by.
    pub fn names(&self) -> Vec<String> {
        self.provider.ccm().names(&self.instance)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("{provider} metadata service at {url} did not answer within {timeout:?}")]
    Timeout {
        provider: &'static str,
        url: String,
        timeout: Duration,
    },
    /// Nothing listens there (or a firewall rejects): no such service here.
    #[error("cannot reach the {provider} metadata service at {url}: connection refused")]
    Refused { provider: &'static str, url: String },
    #[error("cannot reach the {provider} metadata service at {url}: {reason}")]
    Connect {
        provider: &'static str,
        url: String,
        reason: String,
    },
    #[error("{provider} metadata service answered HTTP {status} for {url}{hint}")]
    Status {
        provider: &'static str,
        url: String,
        status: u16,
        hint: &'static str,
    },
    #[error("{provider} metadata service sent an unreadable answer for {url}: {problem}")]
    Garbage {
        provider: &'static str,
        url: String,
        problem: String,
    },
    #[error("{provider} metadata service: {source}")]
    TooLarge {
        provider: &'static str,
        source: crate::http::BodyError,
    },
    #[error("{0}")]
    Client(#[from] crate::http::HttpClientError),
}

/// Far above any metadata document (the largest, Azure's and OpenStack's,
/// are a few KB; AWS's user data, up to 16 KB, is never read).
const MAX_DOCUMENT: usize = 1 << 20;

/// A metadata client for one provider at one base URL.
#[derive(Debug, Clone)]
pub struct MetadataClient {
    provider: Provider,
    base: Url,
    client: reqwest::Client,
    timeout: Duration,
    /// Set by [`MetadataClient::from_documents`]: answers from memory.
    documents: Option<Arc<BTreeMap<String, String>>>,
}

/// What an in-memory tree answers for `path` (its query dropped): the
/// document at that path; for a path ending in `/` (or the root) without
/// one, the names under it, one a line, directories with a trailing `/`
/// (as the AWS and GCE services list directories, and as
/// tests/fakes/metadata_server.py does); `None` (a 404) otherwise.
fn tree_answer(documents: &BTreeMap<String, String>, path: &str) -> Option<String> {
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    if let Some(document) = documents.get(path) {
        return Some(document.clone());
    }
    if !(path.is_empty() || path.ends_with('/')) {
        return None;
    }
    let children: std::collections::BTreeSet<String> = documents
        .keys()
        .filter_map(|key| key.strip_prefix(path).filter(|rest| !rest.is_empty()))
        .map(|rest| match rest.split_once('/') {
            Some((first, _)) => format!("{first}/"),
            None => rest.to_owned(),
        })
        .collect();
    (!children.is_empty()).then(|| children.into_iter().collect::<Vec<_>>().join("\n"))
}

impl MetadataClient {
    pub fn new(provider: Provider, base: Url, timeout: Duration) -> Result<Self, MetadataError> {
        let user_agent = concat!("cloud-node-suite/", env!("CARGO_PKG_VERSION"));
        let client = crate::http::metadata_client(user_agent, timeout)?;
        Ok(Self {
            provider,
            base,
            client,
            timeout,
            documents: None,
        })
    }

    /// A client that reads `documents` (path under the service's root, as
    /// the provider's API names it, to body) instead of the network: for
    /// tests and the fuzz targets (fuzz/). A missing path answers 404; a
    /// directory path (ending in `/`) without a document lists the paths
    /// under it; AWS's IMDSv2 session token is always granted.
    pub fn from_documents(provider: Provider, documents: BTreeMap<String, String>) -> Result<Self, MetadataError> {
        let base = Url::parse("http://metadata.invalid/").map_err(|e| MetadataError::Garbage {
            provider: provider.name(),
            url: "http://metadata.invalid/".into(),
            problem: e.to_string(),
        })?;
        let timeout = Duration::from_secs(1);
        // Never used to send; one for every such client (building one loads nothing).
        static UNUSED: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
        let client = match UNUSED.get() {
            Some(client) => client.clone(),
            None => {
                let client = crate::http::metadata_client("cloud-node-suite (in memory)", timeout)?;
                UNUSED.get_or_init(|| client).clone()
            }
        };
        Ok(Self {
            provider,
            base,
            client,
            timeout,
            documents: Some(Arc::new(documents)),
        })
    }

    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// Reads the instance through the provider's API.
    pub async fn instance(&self) -> Result<Instance, MetadataError> {
        match self.provider {
            Provider::Aws => aws::instance(self).await,
            Provider::Gce => gce::instance(self).await,
            Provider::Azure => azure::instance(self).await,
            Provider::OpenStack => openstack::instance(self).await,
            Provider::DigitalOcean => digitalocean::instance(self).await,
            Provider::Hetzner => hetzner::instance(self).await,
        }
    }

    pub(crate) fn url(&self, path: &str) -> Result<Url, MetadataError> {
        self.base.join(path).map_err(|e| MetadataError::Garbage {
            provider: self.provider.name(),
            url: format!("{}{path}", self.base),
            problem: e.to_string(),
        })
    }

    /// GET `path` with `headers`; `Ok(None)` for 404, which the APIs use
    /// for "this instance has none".
    pub(crate) async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Result<Option<String>, MetadataError> {
        let url = self.url(path)?;
        if let Some(documents) = &self.documents {
            return Ok(tree_answer(documents, path));
        }
        let mut request = self.client.get(url.clone());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.map_err(|e| self.transport_error(&url, e))?;
        let status = response.status().as_u16();
        if status == 404 {
            return Ok(None);
        }
        if !(200..300).contains(&status) {
            return Err(MetadataError::Status {
                provider: self.provider.name(),
                url: url.to_string(),
                status,
                hint: "",
            });
        }
        self.body(&url, response).await.map(Some)
    }

    /// The text of an answer from `url`, at most [`MAX_DOCUMENT`] bytes.
    async fn body(&self, url: &Url, response: reqwest::Response) -> Result<String, MetadataError> {
        let body = crate::http::read_body(response, MAX_DOCUMENT)
            .await
            .map_err(|e| match e {
                crate::http::BodyError::Transport(e) => self.transport_error(url, e),
                too_large => MetadataError::TooLarge {
                    provider: self.provider.name(),
                    source: too_large,
                },
            })?;
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// Like [`get`](Self::get), but the path must exist.
    pub(crate) async fn get_required(&self, path: &str, headers: &[(&str, &str)]) -> Result<String, MetadataError> {
        self.get(path, headers).await?.ok_or_else(|| MetadataError::Status {
            provider: self.provider.name(),
            url: self
                .url(path)
                .map(|u| u.to_string())
                .unwrap_or_else(|_| path.to_owned()),
            status: 404,
            hint: ": is this instance on that cloud?",
        })
    }

    fn transport_error(&self, url: &Url, error: reqwest::Error) -> MetadataError {
        if error.is_timeout() {
            return MetadataError::Timeout {
                provider: self.provider.name(),
                url: url.to_string(),
                timeout: self.timeout,
            };
        }
        if crate::http::io_error_kind(&error) == Some(std::io::ErrorKind::ConnectionRefused) {
            return MetadataError::Refused {
                provider: self.provider.name(),
                url: url.to_string(),
            };
        }
        let error = error.without_url();
        let reason = crate::logging::error_chain(&error);
        MetadataError::Connect {
            provider: self.provider.name(),
            url: url.to_string(),
            reason,
        }
    }

    pub(crate) fn garbage(&self, path: &str, problem: impl Into<String>) -> MetadataError {
        MetadataError::Garbage {
            provider: self.provider.name(),
            url: self
                .url(path)
                .map(|u| u.to_string())
                .unwrap_or_else(|_| path.to_owned()),
            problem: problem.into(),
        }
    }
}

/// Why a name cannot name a node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{value:?} is not a valid Kubernetes node name: {reason} (a DNS-1123 subdomain: lower case alphanumeric characters, '-' or '.', each part starting and ending with an alphanumeric character)"
)]
pub struct InvalidNodeName {
    /// As given (at most 60 characters of it).
    pub value: String,
    pub reason: &'static str,
}

/// `value` as kubelet names a node from `--hostname-override` (trimmed and
/// lowercased, as component-helpers' `GetHostname` does), if that is a
/// valid node name: a DNS-1123 subdomain as apimachinery's
/// `IsDNS1123Subdomain` checks (like it, no limit on a part's length). Names
/// from metadata end up on kubelet's command line: anything else (spaces,
/// quotes, `=`) is refused, so a value can never smuggle in a flag.
pub fn node_name(value: &str) -> Result<String, InvalidNodeName> {
    let name = value.trim().to_lowercase();
    let invalid = |reason| InvalidNodeName {
        value: shorten(value),
        reason,
    };
    if name.is_empty() {
        return Err(invalid("it is empty"));
    }
    if name.len() > 253 {
        return Err(invalid("it is longer than 253 characters"));
    }
    let part_ok = |part: &str| {
        let alphanumeric = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        let bytes = part.as_bytes();
        bytes.first().is_some_and(|&b| alphanumeric(b))
            && bytes.last().is_some_and(|&b| alphanumeric(b))
            && bytes.iter().all(|&b| alphanumeric(b) || b == b'-')
    };
    if !name.split('.').all(part_ok) {
        return Err(invalid("it has other characters or an empty part"));
    }
    Ok(name)
}

/// Parses an IP address the service returned, or says which path was bad.
fn ip(client: &MetadataClient, path: &str, text: &str) -> Result<std::net::IpAddr, MetadataError> {
    text.trim()
        .parse()
        .map_err(|_| client.garbage(path, format!("{:?} is not an IP address", shorten(text))))
}

/// At most 60 characters of an answer, for error messages.
fn shorten(text: &str) -> String {
    let trimmed = text.trim();
    let short: String = trimmed.chars().take(60).collect();
    if short.len() < trimmed.len() {
        format!("{short}…")
    } else {
        short
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every provider's metadata documents are read up to 1 MiB, however
    /// the body is framed; more is refused without being read.
    #[tokio::test]
    async fn answers_larger_than_the_cap_are_refused() {
        use crate::http::oversize;
        let _ = rustls::crypto::ring::default_provider().install_default();
        for provider in Provider::ALL {
            for framing in oversize::FRAMINGS {
                let (server, sent) = oversize::serve(framing).await;
                let client = MetadataClient::new(provider, server.parse().unwrap(), Duration::from_secs(30)).unwrap();
                let error = client.instance().await.unwrap_err().to_string();
                assert!(error.starts_with(provider.name()), "{error}");
                oversize::assert_refused(&error, &server, "1 MiB", &sent);
            }
        }
    }

    #[test]
    fn node_names_are_dns_1123_subdomains_as_kubelet_lowercases_them() {
        for (value, want) in [
            ("node-a", "node-a"),
            ("Node-A.Example.COM", "node-a.example.com"),
            (
                "  ip-10-0-1-25.eu-west-1.compute.internal\n",
                "ip-10-0-1-25.eu-west-1.compute.internal",
            ),
            ("i-0123456789abcdef0", "i-0123456789abcdef0"),
            (
                "02AAB8A4-74EF-476E-8182-F6D2BA4166A6",
                "02aab8a4-74ef-476e-8182-f6d2ba4166a6",
            ),
            ("42424242", "42424242"),
            ("0", "0"),
        ] {
            assert_eq!(node_name(value).as_deref(), Ok(want), "{value:?}");
        }
        // As apimachinery: a part may be longer than 63 characters, the whole not than 253.
        let long_part = "a".repeat(64);
        assert!(node_name(&long_part).is_ok());
        assert!(node_name(&["a"; 127].join(".")).is_ok());
        assert!(node_name(&"a".repeat(254)).is_err());
        for bad in [
            "",
            "   ",
            "x --authorization-mode=AlwaysAllow --v=10",
            "node a",
            "node\ta",
            "node_a",
            "-node",
            "node-",
            ".node",
            "node.",
            "node..a",
            "node.-a",
            "nöde",
            "node'a",
            "node\"a",
            "node$a",
            "a=b",
        ] {
            assert!(node_name(bad).is_err(), "{bad:?}");
        }
        let error = node_name("x --v=10\n--y").unwrap_err().to_string();
        assert!(
            error.starts_with(r#""x --v=10\n--y" is not a valid Kubernetes node name"#),
            "{error}"
        );
    }

    fn instance(id: &str) -> Instance {
        Instance {
            instance_id: Some(id.into()),
            ..Instance::default()
        }
    }

    /// Each CCM's form, and what each refuses to write.
    #[test]
    fn provider_ids_in_each_ccms_form() {
        let none = ProviderIdOptions::default();
        let aws = Instance {
            zone: Some("eu-west-1a".into()),
            ..instance("i-0123456789abcdef0")
        };
        let gce = Instance {
            project: Some("my-project".into()),
            zone: Some("europe-west1-b".into()),
            name: Some("node-a".into()),
            ..instance("4520798745418765809")
        };
        let azure = |id: &str| Instance {
            resource_id: Some(id.into()),
            ..Instance::default()
        };
        let regional = ProviderIdOptions {
            openstack_region: Some("RegionOne".into()),
        };
        let uuid = "83679162-1378-4288-a2d4-70e13ec132aa";
        for (provider, instance, options, want) in [
            (
                Provider::Aws,
                aws.clone(),
                &none,
                "aws:///eu-west-1a/i-0123456789abcdef0",
            ),
            (
                Provider::Gce,
                gce.clone(),
                &none,
                "gce://my-project/europe-west1-b/node-a",
            ),
            (
                Provider::Azure,
                azure("/subscriptions/8D2A/resourceGroups/MyRG/providers/Microsoft.Compute/virtualMachines/Node-A"),
                &none,
                "azure:///subscriptions/8d2a/resourceGroups/myrg/providers/Microsoft.Compute/virtualMachines/Node-A",
            ),
            (
                Provider::Azure,
                azure(
                    "/subscriptions/8D2A/resourcegroups/MyRG/providers/microsoft.compute/virtualMachineScaleSets/pool/virtualMachines/3",
                ),
                &none,
                "azure:///subscriptions/8d2a/resourceGroups/myrg/providers/Microsoft.Compute/virtualMachineScaleSets/pool/virtualMachines/3",
            ),
            (
                Provider::OpenStack,
                instance(uuid),
                &none,
                "openstack:///83679162-1378-4288-a2d4-70e13ec132aa",
            ),
            (
                Provider::OpenStack,
                instance(uuid),
                &regional,
                "openstack://RegionOne/83679162-1378-4288-a2d4-70e13ec132aa",
            ),
            (
                Provider::DigitalOcean,
                instance("2756294"),
                &none,
                "digitalocean://2756294",
            ),
            (Provider::Hetzner, instance("42424242"), &none, "hcloud://42424242"),
        ] {
            assert_eq!(
                provider_id(provider, &instance, options).as_deref(),
                Ok(want),
                "{provider:?}"
            );
        }
        let refused = |provider: Provider, instance: &Instance, options: &ProviderIdOptions| {
            provider_id(provider, instance, options).unwrap_err().to_string()
        };
        for (provider, instance, options, reason) in [
            (
                Provider::Aws,
                Instance {
                    zone: None,
                    ..aws.clone()
                },
                &none,
                "no aws provider ID: the metadata service gave no availability zone",
            ),
            (
                Provider::Aws,
                Instance {
                    instance_id: Some("mi-0123".into()),
                    ..aws.clone()
                },
                &none,
                "does not start with i-",
            ),
            (
                Provider::Gce,
                Instance {
                    project: None,
                    ..gce.clone()
                },
                &none,
                "gave no project ID",
            ),
            (
                Provider::Gce,
                Instance {
                    zone: Some("zones/a b".into()),
                    ..gce.clone()
                },
                &none,
                "the zone \"zones/a b\" holds ' '",
            ),
            (
                Provider::Azure,
                azure("/subscriptions/8D2A/resourceGroups/MyRG/providers/Microsoft.Network/networkInterfaces/nic"),
                &none,
                "is not a VM's resource ID",
            ),
            (
                Provider::Azure,
                Instance::default(),
                &none,
                "gave no compute.resourceId",
            ),
            (
                Provider::OpenStack,
                instance("x --authorization-mode=AlwaysAllow"),
                &none,
                "holds ' '",
            ),
            (
                Provider::OpenStack,
                instance(uuid),
                &ProviderIdOptions {
                    openstack_region: Some("a/b".into()),
                },
                "the region \"a/b\" holds '/'",
            ),
            (
                Provider::DigitalOcean,
                instance("12ab"),
                &none,
                "is not a decimal number",
            ),
            (Provider::Hetzner, instance("-1"), &none, "is not a decimal number"),
            (Provider::Hetzner, instance("4$(id)"), &none, "holds '$'"),
        ] {
            let error = refused(provider, &instance, options);
            assert!(error.contains(reason), "{provider:?}: {error}");
            assert!(
                error.starts_with(&format!("no {} provider ID: ", provider.name())),
                "{error}"
            );
        }
    }

    /// What a Node's providerID or name says to each CCM about this instance.
    #[test]
    fn the_ccms_match_nodes_as_they_parse_them() {
        let none = ProviderIdOptions::default();
        let matching = |provider, instance| CcmMatching { provider, instance };
        let aws = matching(
            Provider::Aws,
            Instance {
                zone: Some("eu-west-1a".into()),
                private_dns: Some("ip-10-0-1-25.eu-west-1.compute.internal".into()),
                ..instance("i-0123456789abcdef0")
            },
        );
        for theirs in [
            "aws:///eu-west-1a/i-0123456789abcdef0",
            "aws:///eu-west-1b/i-0123456789abcdef0",
            "aws:////i-0123456789abcdef0",
            "i-0123456789abcdef0",
        ] {
            assert_eq!(aws.names_this_instance(theirs, &none), Ok(true), "{theirs}");
        }
        assert_eq!(
            aws.names_this_instance("aws:///eu-west-1a/i-0fffffffffffffff0", &none),
            Ok(false)
        );
        for unparsable in [
            "aws:///a/b/i-0123456789abcdef0",
            "gce://p/z/n",
            "aws:///eu-west-1a/mi-1",
        ] {
            assert!(aws.names_this_instance(unparsable, &none).is_err(), "{unparsable}");
        }
        assert!(aws.finds_by_name("ip-10-0-1-25.eu-west-1.compute.internal"));
        assert!(aws.finds_by_name("i-0123456789abcdef0"));
        assert!(!aws.finds_by_name("ip-10-0-1-25"));

        let gce = matching(
            Provider::Gce,
            Instance {
                project: Some("my-project".into()),
                zone: Some("europe-west1-b".into()),
                name: Some("node-a".into()),
                ..Instance::default()
            },
        );
        assert_eq!(
            gce.names_this_instance("gce://my-project/europe-west1-b/node-a", &none),
            Ok(true)
        );
        assert_eq!(
            gce.names_this_instance("gce://other/europe-west1-b/node-a", &none),
            Ok(false)
        );
        assert!(gce.names_this_instance("gce://my-project/node-a", &none).is_err());
        assert!(gce.finds_by_name("node-a.c.my-project.internal"));
        assert!(!gce.finds_by_name("node-b"));

        let azure = matching(
            Provider::Azure,
            Instance {
                name: Some("Node-A".into()),
                resource_id: Some(
                    "/subscriptions/8D2A/resourceGroups/MyRG/providers/Microsoft.Compute/virtualMachines/Node-A".into(),
                ),
                ..Instance::default()
            },
        );
        assert_eq!(
            azure.names_this_instance(
                "azure:///subscriptions/8d2a/resourceGroups/MYRG/providers/Microsoft.Compute/virtualMachines/node-a",
                &none
            ),
            Ok(true)
        );
        assert_eq!(
            azure.names_this_instance(
                "azure:///subscriptions/8d2a/resourceGroups/myrg/providers/Microsoft.Compute/virtualMachines/node-b",
                &none
            ),
            Ok(false)
        );
        assert!(azure.finds_by_name("node-a"));

        let openstack = matching(
            Provider::OpenStack,
            Instance {
                name: Some("Node-A".into()),
                ..instance("83679162-1378-4288-a2d4-70e13ec132aa")
            },
        );
        for theirs in [
            "openstack:///83679162-1378-4288-a2d4-70e13ec132aa",
            "openstack://RegionTwo/83679162-1378-4288-a2d4-70e13ec132aa",
        ] {
            assert_eq!(openstack.names_this_instance(theirs, &none), Ok(true), "{theirs}");
        }
        // The OpenStack CCM looks the server up by the node's name exactly:
        // a server named with capitals is never found by a (lowercase) node name.
        assert!(!openstack.finds_by_name("node-a"));

        let hetzner = matching(
            Provider::Hetzner,
            Instance {
                hostname: Some("node-a".into()),
                ..instance("42424242")
            },
        );
        assert_eq!(hetzner.names_this_instance("hcloud://42424242", &none), Ok(true));
        assert!(hetzner.names_this_instance("hcloud://bm-42424242", &none).is_err());
        let droplet = matching(
            Provider::DigitalOcean,
            Instance {
                hostname: Some("node-a".into()),
                ..instance("2756294")
            },
        );
        assert_eq!(droplet.names_this_instance("digitalocean://2756295", &none), Ok(false));
        assert_eq!(droplet.names(), ["node-a"]);
    }
}
