//! OpenStack Cinder volumes' topology from Cinder v3 `GET /volumes/{id}`: in-tree
//! `cinder` volumes (their `volumeID`) and `cinder.csi.openstack.org` handles (the
//! volume's UUID), which share one cache entry per volume. Only the call: caching,
//! single-flight and the deadline are [`CachedLookup`](crate::lookup::CachedLookup)'s
//! and the resolver's, as for the other clouds. Keystone, the credential, the region
//! and the interface are the operator's `cloud.conf` or `clouds.yaml`
//! ([`OpenStackConfig`]).
//!
//! What the labels are, as the in-tree labeler wrote them (legacy
//! `openstack_volumes.go`, `GetLabelsForVolume`): the zone is the volume's
//! `availability_zone` when Cinder gives one, the region is the config's `region`; a
//! volume without an availability zone gets the region only. Where this departs from
//! upstream: with `[BlockStorage] ignore-volume-az = true` upstream added no labels at
//! all (Cinder's zones need not be Nova's, so a zone label could make the volume
//! unschedulable); here the zone is left out but the region is kept, because the
//! volume was found through the configured region's Cinder endpoint, so the region
//! label is true and does not narrow scheduling within the cluster's region. The
//! volume is still read, so an unknown volume is an error rather than a label.

use std::fmt;
use std::time::{Duration, Instant};

use cloud_access::api::{CallError, CallErrorKind, CallFailure};
use cloud_access::openstack::{CINDER, OpenStackConfig, OpenStackError, Volume, VolumesClient, volumes_client};

use crate::builtin::CINDER_DRIVER;
use crate::lookup::{Cloud, CloudLookup, LookupError, USER_AGENT};
use crate::source::{InTree, VolumeIdentity, VolumeKind};
use crate::topology::Topology;

/// The lookup's name: audit annotations, messages and metrics.
pub const NAME: &str = "openstack-cinder";

/// The Cinder lookup in [`crate::lookup::CLOUDS`].
pub const CLOUD: Cloud = Cloud {
    name: NAME,
    flag: "--openstack-cinder-lookup",
    hint: "--openstack-cinder-lookup (or --rules)",
    csi_driver: CINDER_DRIVER,
    in_tree: Some(InTree::Cinder),
    answers_for: |volume| volume_id(volume).is_some(),
    enabled: |flags| flags.openstack.openstack_cinder_lookup,
    build: crate::setup::cinder_lookup,
};

/// Why the lookup cannot be built from its settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CinderSetupError {
    #[error("the OpenStack Cinder lookup: {0}")]
    Client(#[source] OpenStackError),
}

/// The lookup: Cinder `GET /volumes/{id}` with Keystone tokens.
pub struct CinderLookup {
    volumes: VolumesClient,
    region: String,
    ignore_volume_az: bool,
}

impl fmt::Debug for CinderLookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CinderLookup")
            .field("volumes", &self.volumes)
            .field("region", &self.region)
            .field("ignore_volume_az", &self.ignore_volume_az)
            .finish_non_exhaustive()
    }
}

impl CinderLookup {
    /// A lookup as `settings` describe it (Keystone's URL, the credential, region,
    /// interface, CA file, `ignore-volume-az`); tokens are cached and refreshed before
    /// they expire; each lookup, token included, ends by the deadline it is given.
    /// `client_timeout` caps each HTTP request, Keystone's token requests included.
    pub fn new(settings: &OpenStackConfig, client_timeout: Duration) -> Result<Self, CinderSetupError> {
        let volumes = volumes_client(settings, USER_AGENT, client_timeout).map_err(CinderSetupError::Client)?;
        Ok(Self {
            volumes,
            region: settings.region.clone(),
            ignore_volume_az: settings.ignore_volume_az,
        })
    }
}

impl CloudLookup for CinderLookup {
    const CLOUD: &'static Cloud = &CLOUD;

    async fn find(&self, volume: &VolumeIdentity, deadline: Instant) -> Result<Topology, LookupError> {
        let id = volume_id(volume).ok_or(LookupError::NotFound)?;
        match self.volumes.volume(id, deadline).await {
            Ok(found) => topology_of(&found, &self.region, self.ignore_volume_az),
            Err(error) => {
                tracing::debug!(%error, "Cinder volume lookup refused");
                // Advice for Cinder's refusals only: Keystone's 401 is the credential
                // itself (its text says so), and Cinder was never called.
                let cinder_refused = matches!(
                    error.failed_call(),
                    Some(CallError { service, kind: CallErrorKind::Api { .. }, .. }) if *service == CINDER
                );
                let advice = match error.status() {
                    Some(403) if cinder_refused => {
                        " (the credential needs a role that may read volumes, e.g. reader, in the volume's project)"
                    }
                    Some(401) if cinder_refused => {
                        " (Cinder refused a fresh token too: check the credential's roles and expiry)"
                    }
                    _ => "",
                };
                Err(LookupError::from(error).map_failed(|error| format!("Cinder volume {id:?}: {error}{advice}")))
            }
        }
    }

    fn cache_key(&self, volume: &VolumeIdentity) -> String {
        cache_key(volume)
    }

    /// Cinder's endpoint once the catalog has been read, Keystone's before, as the
    /// resolver's timeout names it.
    fn endpoint(&self) -> Option<String> {
        let keystone = self.volumes.tokens().source();
        Some(match keystone.endpoint() {
            Some(cinder) => cloud_access::http::shown_url(cinder.url()),
            None => cloud_access::http::shown_url(keystone.tokens_url()),
        })
    }
}

/// The volume ID of an in-tree `cinder` volume or a `cinder.csi.openstack.org`
/// handle: the volumes this lookup answers for.
pub fn volume_id(volume: &VolumeIdentity) -> Option<&str> {
    match &volume.kind {
        VolumeKind::InTree(InTree::Cinder) => Some(volume.handle.trim()),
        VolumeKind::Csi { driver } if driver == CINDER_DRIVER => Some(volume.handle.trim()),
        _ => None,
    }
}

/// The key a volume's answer is cached and shared under: the volume ID, so that the
/// in-tree and CSI forms of one volume share; the zone label plays no part.
pub fn cache_key(volume: &VolumeIdentity) -> String {
    volume_id(volume).map_or_else(|| volume.to_string(), str::to_owned)
}

/// The topology of a volume Cinder answered with: its availability zone (unless
/// `ignore_volume_az`) and `region`, the config's.
pub fn topology_of(volume: &Volume, region: &str, ignore_volume_az: bool) -> Result<Topology, LookupError> {
    let zones = match &volume.availability_zone {
        Some(zone) if !ignore_volume_az => vec![zone.clone()],
        _ => Vec::new(),
    };
    Topology::new(zones, Some(region.to_owned()))
        .map_err(|e| LookupError::Invalid(format!("Cinder volume \"{}\": {e}", volume.id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "5a1c9e0e-1f6e-4d55-9a3e-3b0f4e0c7d11";

    fn volume(zone: Option<&str>) -> Volume {
        Volume {
            id: ID.into(),
            availability_zone: zone.map(str::to_owned),
        }
    }

    #[test]
    fn which_volumes_are_cinder_volumes() {
        assert_eq!(volume_id(&VolumeIdentity::in_tree(InTree::Cinder, ID)), Some(ID));
        assert_eq!(volume_id(&VolumeIdentity::csi(CINDER_DRIVER, ID)), Some(ID));
        assert_eq!(volume_id(&VolumeIdentity::csi("manila.csi.openstack.org", ID)), None);
        assert_eq!(volume_id(&VolumeIdentity::in_tree(InTree::AzureDisk, ID)), None);
    }

    #[test]
    fn both_forms_share_a_key_whatever_the_zone_label() {
        let in_tree = VolumeIdentity::in_tree(InTree::Cinder, ID);
        let csi = VolumeIdentity::csi(CINDER_DRIVER, ID).with_zone_hint(Some("nova"));
        assert_eq!(cache_key(&in_tree), ID);
        assert_eq!(cache_key(&in_tree), cache_key(&csi));
        let other = VolumeIdentity::csi("other.csi", ID);
        assert_eq!(cache_key(&other), other.to_string());
    }

    #[test]
    fn zone_and_region_or_the_region_only() {
        let t = topology_of(&volume(Some("nova-az1")), "RegionOne", false).expect("a topology");
        assert_eq!(
            (t.zones(), t.region()),
            (&["nova-az1".to_owned()][..], Some("RegionOne"))
        );
        for (zone, ignore) in [(None, false), (Some("nova-az1"), true)] {
            let t = topology_of(&volume(zone), "RegionOne", ignore).expect("a topology");
            assert_eq!(
                (t.zones(), t.region()),
                (&[][..], Some("RegionOne")),
                "{zone:?} {ignore}"
            );
        }
        assert!(matches!(
            topology_of(&volume(Some("az with spaces")), "RegionOne", false),
            Err(LookupError::Invalid(_))
        ));
    }
}
