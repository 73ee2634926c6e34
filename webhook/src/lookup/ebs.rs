//! EBS volumes' topology from EC2 `DescribeVolumes`: in-tree
//! `awsElasticBlockStore` volume IDs without a zone (`aws:///vol-…`,
//! `vol-…`) and `ebs.csi.aws.com` handles. Only the call: caching and single-flight
//! (keyed by volume ID, so both forms of one volume share) are
//! [`CachedLookup`](crate::lookup::CachedLookup)'s.

use std::time::{Duration, Instant};

use cloud_access::aws::{AwsClient, AwsConfig, AwsCredentials, CredentialsChain, ec2};

use crate::builtin::{EBS_DRIVER, aws_region_of_zone};
use crate::lookup::{Cloud, CloudLookup, LookupError, USER_AGENT};
use crate::source::{InTree, VolumeIdentity, VolumeKind};
use crate::topology::Topology;

/// The lookup's name: audit annotations, messages and metrics.
pub const NAME: &str = "aws-ebs";

/// The EBS lookup in [`crate::lookup::CLOUDS`].
pub const CLOUD: Cloud = Cloud {
    name: NAME,
    flag: "--aws-ebs-lookup",
    hint: "--aws-ebs-lookup (or --rules)",
    csi_driver: EBS_DRIVER,
    in_tree: Some(InTree::AwsElasticBlockStore),
    answers_for: |volume| volume_id(volume).is_some(),
    enabled: |flags| flags.aws.aws_ebs_lookup,
    build: crate::setup::ebs_lookup,
};

/// Where the lookup's AWS credentials come from.
enum Credentials {
    Chain(CredentialsChain),
    Fixed(AwsCredentials),
}

pub struct EbsLookup {
    client: AwsClient,
    credentials: Credentials,
    /// How the operator changes the region, for errors ("set --aws-region").
    region_hint: &'static str,
}

impl std::fmt::Debug for EbsLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EbsLookup")
            .field("region", &self.client.region())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the EBS lookup's HTTP client: {0}")]
pub struct EbsSetupError(#[from] cloud_access::HttpClientError);

impl EbsLookup {
    /// A lookup in `region`, with the standard credential chain and the
    /// endpoints of `config`; each lookup ends by the deadline it is given.
    /// `client_timeout` caps each HTTP request: the credential chain's calls (STS, IMDS)
    /// take no deadline, and this bounds them.
    pub fn new(region: String, client_timeout: Duration, config: AwsConfig) -> Result<Self, EbsSetupError> {
        let http = cloud_access::http_client(USER_AGENT, client_timeout)?;
        Ok(Self {
            client: AwsClient::new(http.clone(), region.clone(), config.endpoints().clone()),
            credentials: Credentials::Chain(CredentialsChain::new(http, region, config)),
            region_hint: "set the region",
        })
    }

    /// A lookup through `client` with fixed credentials (tests, tools).
    pub fn with_credentials(client: AwsClient, credentials: AwsCredentials) -> Self {
        Self {
            client,
            credentials: Credentials::Fixed(credentials),
            region_hint: "set the region",
        }
    }

    /// How errors tell the operator to change the region (the program's flag).
    #[must_use]
    pub fn with_region_hint(mut self, hint: &'static str) -> Self {
        self.region_hint = hint;
        self
    }
}

impl EbsLookup {
    async fn credentials(&self) -> Result<AwsCredentials, LookupError> {
        match &self.credentials {
            Credentials::Chain(chain) => chain
                .credentials()
                .await
                .map_err(|e| LookupError::Failed(e.to_string())),
            Credentials::Fixed(credentials) => Ok(credentials.clone()),
        }
    }
}

/// A volume's topology from its zone: the zone and the zone's region.
fn topology(zone: &str) -> Result<Topology, LookupError> {
    let region = aws_region_of_zone(zone)
        .map(str::to_owned)
        .ok_or_else(|| LookupError::Invalid(format!("zone {zone:?} names no region")))?;
    Topology::new([zone.to_owned()], Some(region)).map_err(|e| LookupError::Invalid(e.to_string()))
}

impl CloudLookup for EbsLookup {
    const CLOUD: &'static Cloud = &CLOUD;

    async fn find(&self, volume: &VolumeIdentity, deadline: Instant) -> Result<Topology, LookupError> {
        let volume_id = self::volume_id(volume).ok_or(LookupError::NotFound)?;
        let credentials = self.credentials().await?;
        let volumes = ec2::describe_volumes(&self.client, &[volume_id], &credentials, deadline)
            .await
            .map_err(|e| match e.code() {
                Some("InvalidVolume.NotFound") | Some("InvalidVolumeID.Malformed") => LookupError::Failed(format!(
                    "{e} (is the volume in region {}? {})",
                    self.client.region(),
                    self.region_hint
                )),
                _ => LookupError::from(e),
            })?;
        let volume = volumes
            .into_iter()
            .find(|v| v.id == volume_id)
            .ok_or(LookupError::NotFound)?;
        topology(&volume.availability_zone)
    }

    fn batch_limit(&self) -> usize {
        ec2::MAX_FILTER_VALUES
    }

    /// One `DescribeVolumes` with a `volume-id` filter for up to 200 volumes: the
    /// ones EC2 has, by volume ID (the cache key).
    async fn find_many(
        &self,
        volumes: &[VolumeIdentity],
        deadline: Instant,
    ) -> Result<Vec<(String, Topology)>, LookupError> {
        let ids: Vec<&str> = volumes.iter().filter_map(volume_id).collect();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let credentials = self.credentials().await?;
        let found = ec2::describe_volumes_filtered(&self.client, &ids, &credentials, deadline).await?;
        Ok(found
            .into_iter()
            .filter(|v| ids.contains(&v.id.as_str()))
            .filter_map(|v| topology(&v.availability_zone).ok().map(|t| (v.id, t)))
            .collect())
    }

    fn cache_key(&self, volume: &VolumeIdentity) -> String {
        cache_key(volume)
    }

    /// EC2's endpoint in the lookup's region, as its timeouts name it.
    fn endpoint(&self) -> Option<String> {
        let url = self.client.endpoint(cloud_access::aws::endpoints::EC2).ok()?;
        Some(cloud_access::http::shown_url(&url))
    }
}

/// The EBS volume ID in an in-tree volume ID or a CSI handle, when the
/// zone is not in it already (the built-in parser handles `aws://ZONE/vol-…`).
pub fn volume_id(volume: &VolumeIdentity) -> Option<&str> {
    let id = match &volume.kind {
        VolumeKind::Csi { driver } if driver == EBS_DRIVER => volume.handle.as_str(),
        VolumeKind::InTree(InTree::AwsElasticBlockStore) => {
            let handle = volume.handle.as_str();
            match handle.strip_prefix("aws://") {
                Some(rest) => rest.strip_prefix('/')?,
                None => handle,
            }
        }
        _ => return None,
    };
    (id.starts_with("vol-") && id.len() > 4 && id[4..].bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// The key a volume's answer is cached and shared under: the volume ID, so that the
/// in-tree and CSI forms of one volume share.
pub fn cache_key(volume: &VolumeIdentity) -> String {
    volume_id(volume).map_or_else(|| volume.to_string(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_ids_from_every_form() {
        let in_tree = |h: &str| VolumeIdentity::in_tree(InTree::AwsElasticBlockStore, h);
        assert_eq!(volume_id(&in_tree("aws:///vol-0123abcd")), Some("vol-0123abcd"));
        assert_eq!(volume_id(&in_tree("vol-0123abcd")), Some("vol-0123abcd"));
        assert_eq!(
            volume_id(&VolumeIdentity::csi(EBS_DRIVER, "vol-0a1b2c")),
            Some("vol-0a1b2c")
        );
        // The zone is in the ID already: the built-in parser answers.
        assert_eq!(volume_id(&in_tree("aws://us-east-1a/vol-0123")), None);
        assert_eq!(volume_id(&VolumeIdentity::csi(EBS_DRIVER, "snap-01")), None);
        assert_eq!(volume_id(&VolumeIdentity::csi("pd.csi.storage.gke.io", "vol-01")), None);
        assert_eq!(volume_id(&in_tree("vol-")), None);
    }
}
