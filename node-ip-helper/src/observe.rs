//! Observing, at the edge: the metadata services, a config drive, EC2's
//! API, the kernel's hostname, the cluster's Node and the files `check`
//! reads. The host's interfaces and routes are read by [`crate::host`].
//! Everything here turns into plain data for the pure choice
//! ([`crate::choose`]) or the CCM's rules ([`crate::ccm`], [`crate::live`]).

use std::path::Path;
use std::time::Duration;

use cloud_access::metadata::{Instance, MetadataClient, MetadataError, Provider};
use url::Url;

use crate::Error;
use crate::ccm::NodeAddress;
use crate::choose::{CloudView, NodeNameFrom, Observed};
use crate::cli::{DetectArgs, MetadataArgs};
use crate::family::IpFamilyPolicy;
use crate::source::{MetadataAnswer, Source};

/// Asks the source named by the flags.
pub async fn observe(args: &DetectArgs) -> Result<Observed, Error> {
    let metadata = &args.metadata;
    let (cloud, asked) = cloud(args.source, metadata, args.ip_family).await?;
    let cloud = match cloud {
        Some(CloudView { provider, instance }) if args.identity.node_name_from == Some(NodeNameFrom::PrivateDns) => {
            let instance = match provider {
                Provider::Aws => with_ec2_private_dns(instance, metadata.metadata_timeout).await?,
                _ => instance,
            };
            Some(CloudView { provider, instance })
        }
        cloud => cloud,
    };
    let kernel_hostname = match args.identity.node_name_from {
        Some(NodeNameFrom::Hostname) => {
            let name = std::fs::read_to_string("/proc/sys/kernel/hostname").map_err(Error::Hostname)?;
            Some(name.trim().to_owned())
        }
        _ => None,
    };
    let observed = Observed {
        cloud,
        kernel_hostname,
        asked,
    };
    tracing::debug!(source = %observed.origin(), cloud = ?observed.cloud, "source answered");
    Ok(observed)
}

/// The cloud's view of the instance: `None` for the local source without
/// asking anything, and for `auto` when no metadata service answered; and,
/// for `auto`, what each service answered.
pub async fn cloud(
    source: Source,
    metadata: &MetadataArgs,
    policy: IpFamilyPolicy,
) -> Result<(Option<CloudView>, Vec<MetadataAnswer>), Error> {
    let endpoint = metadata.metadata_endpoint.as_ref();
    let timeout = metadata.metadata_timeout;
    let (provider, instance) = match source {
        Source::Local => return Ok((None, Vec::new())),
        Source::Auto => {
            let (answered, asked) = detect_provider(endpoint, policy, timeout)
                .await
                .map_err(Error::AutoFailing)?;
            let cloud = answered.map(|(provider, instance)| CloudView { provider, instance });
            return Ok((cloud, asked));
        }
        Source::Cloud(Provider::OpenStack) if metadata.config_drive.is_some() => {
            let root = metadata.config_drive.as_deref().unwrap_or(Path::new("/"));
            (
                Provider::OpenStack,
                cloud_access::metadata::openstack::from_config_drive(root)?,
            )
        }
        Source::Cloud(provider) => (provider, fetch(provider, endpoint, policy, timeout).await?),
    };
    Ok((Some(CloudView { provider, instance }), Vec::new()))
}

/// Where to ask: the override, or the provider's documented endpoint (AWS's
/// IPv6 one for an IPv6-only node).
pub fn endpoint(provider: Provider, override_url: Option<&Url>, policy: IpFamilyPolicy) -> Result<Url, MetadataError> {
    if let Some(url) = override_url {
        return Ok(url.clone());
    }
    let text = match (provider, policy) {
        (Provider::Aws, IpFamilyPolicy::Ipv6) => cloud_access::metadata::aws::IPV6_ENDPOINT,
        _ => provider.default_endpoint(),
    };
    // The constants are valid URLs (tested); an error here is a bug, said as one.
    Url::parse(text).map_err(|e| MetadataError::Connect {
        provider: provider.name(),
        url: text.to_owned(),
        reason: format!("not a URL: {e}"),
    })
}

pub async fn fetch(
    provider: Provider,
    override_url: Option<&Url>,
    policy: IpFamilyPolicy,
    timeout: Duration,
) -> Result<Instance, MetadataError> {
    let client = MetadataClient::new(provider, endpoint(provider, override_url, policy)?, timeout)?;
    client.instance().await
}

/// Asks every metadata service at once; the first provider (in a fixed
/// order) that answers wins. `None` when none does; but when none does and
/// one answered a server error (5xx), that error: a metadata service that
/// exists and fails means a cloud whose addresses are unknown for now, not
/// a host without a cloud, so the host's own addresses must not stand in.
/// With what each service answered, in the same order.
pub async fn detect_provider(
    override_url: Option<&Url>,
    policy: IpFamilyPolicy,
    timeout: Duration,
) -> Result<(Option<(Provider, Instance)>, Vec<MetadataAnswer>), MetadataError> {
    let attempts = Provider::ALL.map(|provider| async move {
        let url = endpoint(provider, override_url, policy)
            .map(|u| cloud_access::http::shown_url(&u))
            .unwrap_or_default();
        let result = fetch(provider, override_url, policy, timeout).await;
        if let Err(error) = &result {
            tracing::debug!(provider = provider.name(), %error, "metadata service did not answer");
        }
        (provider, MetadataAnswer::of(provider, &url, &result), result)
    });
    let results = futures_util::future::join_all(attempts).await;
    let asked = results.iter().map(|(_, answer, _)| answer.clone()).collect();
    let mut failing = None;
    for (provider, _, result) in results {
        match result {
            Ok(instance) => return Ok((Some((provider, instance)), asked)),
            Err(error @ MetadataError::Status { status: 500.., .. }) if failing.is_none() => failing = Some(error),
            Err(_) => {}
        }
    }
    failing.map_or(Ok((None, asked)), Err)
}

/// EC2's own `PrivateDnsName` for the instance: with a custom DHCP domain
/// the host's name (and IMDS's `local-hostname`) differ from it, and the AWS
/// cloud controller manager names nodes after it.
pub async fn with_ec2_private_dns(mut instance: Instance, timeout: Duration) -> Result<Instance, Error> {
    use cloud_access::aws::{AwsClient, AwsConfig, CredentialsChain, ec2};
    let id = instance.instance_id.clone().unwrap_or_default();
    let fail = |reason: String| Error::PrivateDns {
        instance: id.clone(),
        reason,
    };
    let aws = AwsConfig::from_env();
    let region = match instance.region.clone() {
        Some(region) => region,
        None => aws
            .region()
            .map_err(|e| fail(e.to_string()))?
            .ok_or_else(|| fail("the metadata service gave no region; set AWS_REGION".into()))?
            .to_owned(),
    };
    let user_agent = concat!("node-ip-helper/", env!("CARGO_PKG_VERSION"));
    let http = cloud_access::http_client(user_agent, timeout).map_err(|e| fail(e.to_string()))?;
    let client = AwsClient::new(http.clone(), region.clone(), aws.endpoints().clone());
    let credentials = CredentialsChain::new(http, region, aws)
        .credentials()
        .await
        .map_err(|e| fail(e.to_string()))?;
    let deadline = std::time::Instant::now() + timeout * 3;
    let name = ec2::private_dns_name(&client, &id, &credentials, deadline)
        .await
        .map_err(|e| fail(e.to_string()))?
        .ok_or_else(|| fail("the instance has no PrivateDnsName".into()))?;
    instance.private_dns = Some(name);
    Ok(instance)
}

/// `check --source`: the instance as the chosen metadata source describes
/// it (for its addresses and its identity).
pub async fn cloud_for_check(source: Source, metadata: &MetadataArgs) -> Result<CloudView, Error> {
    if source == Source::Local {
        return Err(Error::Usage(
            "--source local has no cloud addresses: give a cloud's name, auto, or --cloud-addresses FILE".into(),
        ));
    }
    // The family policy only picks AWS's IPv6 endpoint; IPv4 is the default.
    let (cloud, asked) = cloud(source, metadata, IpFamilyPolicy::Ipv4).await?;
    cloud.ok_or_else(|| Error::NoMetadataAnswered(crate::source::asked_summary(&asked)))
}

/// The instance's addresses as Node addresses, in the cloud's order.
pub fn node_addresses(instance: &cloud_access::metadata::Instance) -> Vec<NodeAddress> {
    instance
        .addresses
        .iter()
        .map(|a| NodeAddress::new(&a.kind.to_string(), &a.address))
        .collect()
}

/// A node's addresses take a few hundred bytes; a bigger file is the wrong one.
const CLOUD_ADDRESSES_LIMIT: u64 = 1024 * 1024;

/// `--cloud-addresses`: the instance's addresses as the cloud reports them.
pub fn read_cloud_addresses(path: &Path) -> Result<Vec<NodeAddress>, Error> {
    let error = |reason: String| Error::CloudAddresses {
        path: path.display().to_string(),
        reason,
    };
    let bytes = cloud_access::files::read_regular(path, CLOUD_ADDRESSES_LIMIT).map_err(Error::CloudAddressesFile)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        error(format!(
            "{e}: expected a JSON array of {{\"type\": ..., \"address\": ...}}"
        ))
    })
}

/// The Node, read with the kubeconfig's identity within `request_timeout`
/// (from connecting to the answer's last byte).
pub async fn read_node(
    name: &str,
    kubeconfig: Option<&Path>,
    request_timeout: Duration,
) -> Result<k8s_openapi::api::core::v1::Node, Error> {
    use apiserver_client::{ApiError, Apiserver, ConnectError};
    let config = apiserver_client::config(kubeconfig, None).await.map_err(|e| match e {
        ConnectError::NotFound => Error::NoKubeconfig,
        other => Error::Kubeconfig(other),
    })?;
    let apiserver = Apiserver::new(config, request_timeout).map_err(Error::Kubeconfig)?;
    let answer = apiserver.get("/api/v1/nodes", "Node", name).await;
    let (reached, reason) = match answer {
        Ok(Some(node)) => return Ok(node),
        Ok(None) => (true, "no such Node: has kubelet registered it?".to_owned()),
        Err(ApiError::Status { code: 403, message, .. }) => (
            true,
            format!("forbidden ({message}): a node's own identity (system:node:NAME) may read only its own Node"),
        ),
        Err(error @ (ApiError::Timeout(_) | ApiError::ConnectionRefused | ApiError::Transport(_))) => {
            (false, error.to_string())
        }
        Err(error) => (true, error.to_string()),
    };
    Err(Error::ReadNode {
        name: name.to_owned(),
        unreached: (!reached).then(|| apiserver.server().to_owned()),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_endpoint_is_a_url() {
        for provider in Provider::ALL {
            for policy in [IpFamilyPolicy::Ipv4, IpFamilyPolicy::Ipv6] {
                assert!(endpoint(provider, None, policy).is_ok(), "{provider:?} {policy:?}");
            }
        }
        let own = Url::parse("http://127.0.0.1:9/").unwrap();
        assert_eq!(endpoint(Provider::Aws, Some(&own), IpFamilyPolicy::Ipv6).unwrap(), own);
    }
}
