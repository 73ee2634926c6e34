//! Azure managed disks' topology from Azure Resource Manager `Disks.Get`: in-tree
//! `azureDisk` volumes (their `diskURI`) and `disk.csi.azure.com` handles, both the
//! disk's resource ID `/subscriptions/S/resourceGroups/G/providers/Microsoft.Compute/disks/N`
//! (keywords in any case, as ARM reads them). Only the call: caching, single-flight and
//! the deadline are [`CachedLookup`](crate::lookup::CachedLookup)'s and the resolver's,
//! as for EBS and GCE. The cloud and the credential are the cloud config's
//! (`azure.json`); a custom cloud's endpoints are read from Resource Manager at the
//! first lookup, as cloud-provider-azure reads them.
//!
//! What the labels are, as the in-tree labeler wrote them (legacy
//! `azure_managedDiskController.go`, `GetAzureDiskLabels`): a zonal disk gets the zone
//! `<location>-<zone>` (`eastus-2`, the location lower-cased) and the region; a
//! zone-redundant (ZRS) or non-zonal disk gets the region only, and so no zone
//! requirement in nodeAffinity (never an empty one: the CSI driver's `""` zone of
//! non-zonal disks is not written). Where this departs from upstream:
//! - the location is the disk's own (ARM's answer), lower-cased, where upstream wrote
//!   the cloud config's `location` verbatim: the same for every disk in the cluster's
//!   location; for a disk elsewhere upstream's labels named a place the disk is not;
//! - the subscription is the URI's, as the CSI driver reads it, where upstream used the
//!   config's `subscriptionId` (a disk of another subscription was looked for in the
//!   wrong one);
//! - a URI that does not name a managed disk (an unmanaged disk's blob URL, kind
//!   `Shared` or `Dedicated`) is an error saying so, before any call; upstream refused
//!   it too (failing to read a resource group from it), with a less helpful message.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cloud_access::SecureEndpoint;
use cloud_access::api::{CallError, CallErrorKind, CallFailure};
use cloud_access::azure::{
    AzureConfig, AzureError, CachedTokenSource, CloudEndpoints, Disk, DisksClient, ManagedDiskUri, TokenSource,
    credential_from_config, imds_base, zone_label,
};
use tokio::sync::OnceCell;

use crate::builtin::AZURE_DISK_DRIVER;
use crate::lookup::{Cloud, CloudLookup, LookupError, USER_AGENT};
use crate::source::{InTree, VolumeIdentity, VolumeKind};
use crate::topology::Topology;

/// The lookup's name: audit annotations, messages and metrics.
pub const NAME: &str = "azure-disk";

/// The Azure disk lookup in [`crate::lookup::CLOUDS`].
pub const CLOUD: Cloud = Cloud {
    name: NAME,
    flag: "--azure-disk-lookup",
    hint: "--azure-disk-lookup (or --rules)",
    csi_driver: AZURE_DISK_DRIVER,
    in_tree: Some(InTree::AzureDisk),
    answers_for: |volume| disk_uri(volume).is_some(),
    enabled: |flags| flags.azure.azure_disk_lookup,
    build: crate::setup::azure_lookup,
};

/// How errors tell the operator which identity the webhook uses (the program's flags);
/// the library names none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AzureHints {
    /// The identity calls are made as, e.g. "the identity the cloud config names".
    pub identity: &'static str,
}

impl Default for AzureHints {
    fn default() -> Self {
        Self {
            identity: "the identity the cloud config names",
        }
    }
}

/// Where the lookup's calls go instead of the cloud's own endpoints (a private
/// endpoint, a node-local proxy, tests): each https, or plain http on loopback only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AzureEndpoints {
    /// Azure Resource Manager.
    pub resource_manager: Option<SecureEndpoint>,
    /// Entra ID's authority host (client secret and workload identity tokens).
    pub authority_host: Option<SecureEndpoint>,
    /// IMDS (managed identity tokens); by default its documented link-local address.
    pub imds: Option<SecureEndpoint>,
}

/// Why the lookup cannot be built from its settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AzureSetupError {
    #[error("the Azure lookup's HTTP client: {0}")]
    Http(#[from] cloud_access::HttpClientError),
    #[error("the cloud's endpoints: {0}")]
    Endpoint(#[from] cloud_access::EndpointError),
    /// No credentials in the config, or ones that cannot be used.
    #[error("{0}")]
    Credentials(#[source] AzureError),
}

/// The token cache in front of the config's credential.
type Tokens = Arc<CachedTokenSource<Arc<dyn TokenSource<AzureError>>>>;

/// `Disks.Get` calls, and the token cache they use (forgotten after ARM refuses a
/// token).
struct Connected {
    disks: DisksClient,
    tokens: Tokens,
}

type ConnectFuture = Pin<Box<dyn Future<Output = Result<Connected, AzureError>> + Send>>;

/// Where `Disks.Get` goes.
enum Arm {
    Ready(Connected),
    /// A custom cloud (Azure Stack Hub): its endpoints and token audience are read from
    /// Resource Manager's `/metadata/endpoints`, as cloud-provider-azure reads them, at
    /// the first lookup, within its deadline (a failure is not kept: the next lookup
    /// asks again).
    Custom {
        discover: Box<dyn Fn(Instant) -> ConnectFuture + Send + Sync>,
        connected: OnceCell<Connected>,
    },
}

/// The lookup: `Disks.Get` with tokens from the credential the cloud config names.
pub struct AzureDiskLookup {
    arm: Arm,
    hints: AzureHints,
}

impl fmt::Debug for AzureDiskLookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let arm = match &self.arm {
            Arm::Ready(connected) => connected.disks.base().as_str(),
            Arm::Custom { connected, .. } => connected
                .get()
                .map_or("(a custom cloud, not discovered yet)", |c| c.disks.base().as_str()),
        };
        f.debug_struct("AzureDiskLookup")
            .field("arm", &arm)
            .finish_non_exhaustive()
    }
}

impl AzureDiskLookup {
    /// A lookup as `config` describes it (its cloud, and its credential: workload
    /// identity, managed identity or a client secret, in that order, as
    /// cloud-provider-azure picks), with `endpoints` replacing the cloud's; tokens are
    /// cached and refreshed before they expire; each lookup, token included, ends by the
    /// deadline it is given. A custom cloud's endpoints (`resourceManagerEndpoint`) are
    /// read at the first lookup, from `endpoints.resource_manager` when given.
    /// `client_timeout` caps each HTTP request: token requests get no deadline, and this
    /// bounds them.
    pub fn new(
        config: &AzureConfig,
        endpoints: &AzureEndpoints,
        client_timeout: Duration,
    ) -> Result<Self, AzureSetupError> {
        let (cloud, known) = config.cloud();
        let custom = config.resource_manager_endpoint.trim();
        if !known && custom.is_empty() {
            tracing::warn!(
                cloud = %cloud_access::logging::clean_text(&config.cloud_name, &[], 64),
                "the Azure cloud config names an unknown cloud: the public cloud is used, as cloud-provider-azure does"
            );
        }
        let mut cloud = cloud.endpoints()?;
        if let Some(arm) = &endpoints.resource_manager {
            cloud.resource_manager = arm.clone();
        }
        if let Some(authority) = &endpoints.authority_host {
            cloud.authority_host = authority.clone();
        }
        let imds = imds_base(endpoints.imds.as_ref()).map_err(AzureSetupError::Credentials)?;
        let http = cloud_access::http_client(USER_AGENT, client_timeout)?;
        // `Disks.Get` to a cloud's Resource Manager with tokens for its audience from the
        // credential the config names.
        let connect = |config: &AzureConfig, http: &_, cloud: &CloudEndpoints, imds: &_| {
            let credential = credential_from_config(config, http, cloud, imds, &cloud.resource_manager_audience)?;
            let tokens: Tokens = Arc::new(CachedTokenSource::new(credential));
            Ok::<_, AzureError>(Connected {
                disks: DisksClient::new(Clone::clone(http), &cloud.resource_manager, tokens.clone()),
                tokens,
            })
        };
        // The credential is checked here, at start-up, for a custom cloud too.
        let ready = connect(config, &http, &cloud, &imds).map_err(AzureSetupError::Credentials)?;
        if custom.is_empty() {
            return Ok(Self::from_arm(Arm::Ready(ready)));
        }
        let metadata = match &endpoints.resource_manager {
            Some(given) => given.clone(),
            None => SecureEndpoint::parse("the cloud config's resourceManagerEndpoint", custom)?,
        };
        let (config, overrides) = (config.clone(), endpoints.clone());
        let discover = move |deadline: Instant| -> ConnectFuture {
            let (http, config, imds, metadata) = (http.clone(), config.clone(), imds.clone(), metadata.clone());
            let (base, overrides) = (cloud.clone(), overrides.clone());
            Box::pin(async move {
                let mut found = CloudEndpoints::discover(&http, &metadata, &config.cloud_name, base, deadline).await?;
                if let Some(arm) = overrides.resource_manager {
                    found.resource_manager = arm;
                }
                if let Some(authority) = overrides.authority_host {
                    found.authority_host = authority;
                }
                connect(&config, &http, &found, &imds)
            })
        };
        Ok(Self::from_arm(Arm::Custom {
            discover: Box::new(discover),
            connected: OnceCell::new(),
        }))
    }

    fn from_arm(arm: Arm) -> Self {
        Self {
            arm,
            hints: AzureHints::default(),
        }
    }

    /// How errors name the identity the webhook calls ARM as.
    #[must_use]
    pub fn with_hints(mut self, hints: AzureHints) -> Self {
        self.hints = hints;
        self
    }

    async fn connected(&self, deadline: Instant) -> Result<&Connected, LookupError> {
        match &self.arm {
            Arm::Ready(connected) => Ok(connected),
            Arm::Custom { discover, connected } => {
                connected.get_or_try_init(|| discover(deadline)).await.map_err(|error| {
                    LookupError::from(error).map_failed(|error| format!("the custom cloud's endpoints: {error}"))
                })
            }
        }
    }

    async fn refused(&self, error: AzureError, tokens: &Tokens) -> LookupError {
        // ARM's own answer: the volume already names the disk (the URL's path), so its
        // status, advice and ARM's code and message come first, within the length of a
        // denial. A token refused or unreachable, or a timeout: which service and URL
        // matter.
        let AzureError::Call(CallError {
            service: "ARM",
            kind: CallErrorKind::Api { detail, .. } | CallErrorKind::NotFound { detail },
            ..
        }) = &error
        else {
            return LookupError::from(error);
        };
        tracing::debug!(%error, "Azure disk lookup refused");
        let identity = self.hints.identity;
        let status = error.status().unwrap_or_default();
        let advice = match status {
            401 => {
                // ARM refused the token itself (expired early, wrong audience):
                // the next lookup fetches a new one.
                tokens.invalidate().await;
                format!(" (ARM refused the token of {identity})")
            }
            403 => format!(" ({identity} needs Microsoft.Compute/disks/read, e.g. Reader on the disk's group)"),
            _ => String::new(),
        };
        LookupError::Failed(format!("ARM Disks.Get answered HTTP {status}{advice}: {detail}"))
    }
}

/// The disk URI of an in-tree `azureDisk` volume or a `disk.csi.azure.com` handle: the
/// volumes this lookup answers for (a URI that names no managed disk included: its
/// answer is the error saying so).
pub fn disk_uri(volume: &VolumeIdentity) -> Option<&str> {
    match &volume.kind {
        VolumeKind::InTree(InTree::AzureDisk) => Some(&volume.handle),
        VolumeKind::Csi { driver } if driver == AZURE_DISK_DRIVER => Some(&volume.handle),
        _ => None,
    }
}

/// The key a volume's answer is cached and shared under: the disk, lower-cased (ARM
/// compares names without case), so that the in-tree and CSI forms of one disk share;
/// the zone label plays no part (a resource ID names one disk).
pub fn cache_key(volume: &VolumeIdentity) -> String {
    match disk_uri(volume).map(ManagedDiskUri::parse) {
        Some(Ok(uri)) => format!(
            "{}/{}/{}",
            uri.subscription.to_lowercase(),
            uri.resource_group.to_lowercase(),
            uri.name.to_lowercase()
        ),
        _ => volume.to_string(),
    }
}

/// The topology of a disk ARM answered with: a zonal disk's zone (`<location>-<zone>`,
/// the first zone, as upstream) and region; a zone-redundant or non-zonal disk's region
/// only. The location is lower-cased, as the node labels the cloud provider writes are.
pub fn topology_of(disk: &Disk) -> Result<Topology, LookupError> {
    let invalid = |problem: String| LookupError::Invalid(format!("Azure disk \"{}\": {problem}", disk.name));
    let region = disk.location.trim().to_lowercase();
    let zones = match disk.zones.first() {
        Some(zone) if !disk.is_zone_redundant() => {
            vec![zone_label(&region, zone).ok_or_else(|| invalid(format!("zone \"{zone}\" is not a number")))?]
        }
        _ => Vec::new(),
    };
    Topology::new(zones, Some(region)).map_err(|e| invalid(e.to_string()))
}

impl CloudLookup for AzureDiskLookup {
    const CLOUD: &'static Cloud = &CLOUD;

    async fn find(&self, volume: &VolumeIdentity, deadline: Instant) -> Result<Topology, LookupError> {
        let uri = disk_uri(volume).ok_or(LookupError::NotFound)?;
        let uri = ManagedDiskUri::parse(uri).map_err(|e| LookupError::Failed(e.to_string()))?;
        let connected = self.connected(deadline).await?;
        match connected.disks.disk_by_uri(&uri, deadline).await {
            Ok(disk) => topology_of(&disk),
            Err(error) => Err(self.refused(error, &connected.tokens).await),
        }
    }

    fn cache_key(&self, volume: &VolumeIdentity) -> String {
        cache_key(volume)
    }

    /// Resource Manager, as the resolver's timeout names it (a custom cloud's once its
    /// endpoints are read; before, none).
    fn endpoint(&self) -> Option<String> {
        let connected = match &self.arm {
            Arm::Ready(connected) => Some(connected),
            Arm::Custom { connected, .. } => connected.get(),
        };
        connected.map(|c| cloud_access::http::shown_url(c.disks.base()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const URI: &str = "/subscriptions/s1/resourceGroups/MC_rg/providers/Microsoft.Compute/disks/pvc-1";

    fn disk(location: &str, zones: &[&str], sku: &str) -> Disk {
        Disk {
            name: "pvc-1".into(),
            location: location.into(),
            zones: zones.iter().map(|z| (*z).to_owned()).collect(),
            sku_name: Some(sku.into()),
        }
    }

    #[test]
    fn which_volumes_are_azure_disks() {
        let in_tree = VolumeIdentity::in_tree(InTree::AzureDisk, URI);
        assert_eq!(disk_uri(&in_tree), Some(URI));
        assert_eq!(disk_uri(&VolumeIdentity::csi(AZURE_DISK_DRIVER, URI)), Some(URI));
        // Blob URLs are ours too: the answer is the error naming them.
        let blob = VolumeIdentity::in_tree(InTree::AzureDisk, "https://a.blob.core.windows.net/vhds/d.vhd");
        assert!(disk_uri(&blob).is_some());
        assert_eq!(disk_uri(&VolumeIdentity::csi("file.csi.azure.com", URI)), None);
        assert_eq!(disk_uri(&VolumeIdentity::in_tree(InTree::GcePersistentDisk, URI)), None);
    }

    #[test]
    fn both_forms_of_one_disk_share_a_key_whatever_the_case() {
        let in_tree = VolumeIdentity::in_tree(InTree::AzureDisk, URI);
        let csi = VolumeIdentity::csi(
            AZURE_DISK_DRIVER,
            "/subscriptions/S1/resourcegroups/mc_rg/providers/microsoft.compute/disks/PVC-1",
        );
        assert_eq!(cache_key(&in_tree), "s1/mc_rg/pvc-1");
        assert_eq!(cache_key(&in_tree), cache_key(&csi));
        // The zone label changes nothing: the ID names one disk.
        assert_eq!(
            cache_key(&in_tree.clone().with_zone_hint(Some("eastus-3"))),
            cache_key(&in_tree)
        );
        let bad = VolumeIdentity::csi(AZURE_DISK_DRIVER, "pvc-1");
        assert_eq!(cache_key(&bad), bad.to_string());
    }

    #[test]
    fn zonal_disks_get_a_zone_others_the_region_only() {
        let t = topology_of(&disk("EastUS", &["2"], "Premium_LRS")).unwrap();
        assert_eq!((t.zones(), t.region()), (&["eastus-2".to_owned()][..], Some("eastus")));
        for (location, zones, sku) in [
            ("eastus", &[][..], "StandardSSD_ZRS"),
            ("eastus", &[][..], "Premium_LRS"),
            // A ZRS disk is usable from every zone, whatever its answer says.
            ("eastus", &["1"][..], "Premium_ZRS"),
        ] {
            let t = topology_of(&disk(location, zones, sku)).unwrap();
            assert_eq!((t.zones(), t.region()), (&[][..], Some("eastus")), "{sku} {zones:?}");
            assert_eq!(t.zone_label_value(), None);
        }
        for bad in [
            disk("eastus", &["one"], "Premium_LRS"),
            disk("east us", &["1"], "Premium_LRS"),
            disk("east us", &[], "Premium_LRS"),
        ] {
            assert!(matches!(topology_of(&bad), Err(LookupError::Invalid(_))), "{bad:?}");
        }
    }
}
