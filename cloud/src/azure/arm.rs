//! Azure Resource Manager `Disks.Get`: where a managed disk lives, for the
//! webhook's topology labels; and the managed disk URIs PersistentVolumes
//! name disks by.
//!
//! One call, no retries and no cache: the webhook's lookup mechanism
//! caches, shares concurrent lookups and owns the deadline, which every call
//! here is given and keeps (the token fetch included). A disk that does not
//! exist is a 404 ([`CallFailure::is_not_found`](crate::api::CallFailure::is_not_found)), distinct from other refusals.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use url::Url;

use super::Call;
use super::error::AzureError;
use super::token::TokenSource;
use crate::endpoint::SecureEndpoint;

/// The Compute API version current armcompute (v7) calls `Disks.Get` with.
pub const DISKS_API_VERSION: &str = "2025-01-02";

const SERVICE: &str = "ARM";

/// A managed disk's placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    pub name: String,
    /// The region (`eastus`), as ARM writes it.
    pub location: String,
    /// The zones of a zonal disk (`["1"]`); empty for a regional one and
    /// for zone-redundant (ZRS) disks.
    pub zones: Vec<String>,
    /// `sku.name`: `Premium_LRS`, `StandardSSD_ZRS`, …
    pub sku_name: Option<String>,
}

impl Disk {
    /// Whether the SKU is zone-redundant (`…_ZRS`): usable from every zone.
    pub fn is_zone_redundant(&self) -> bool {
        self.sku_name
            .as_deref()
            .is_some_and(|sku| sku.to_ascii_uppercase().ends_with("_ZRS"))
    }
}

/// The zone label of a disk in `zone` of `location`, as the in-tree labeler
/// wrote it: `lower(location)-zone` (`eastus-1`); `None` when `zone` is not
/// an integer (upstream's error).
pub fn zone_label(location: &str, zone: &str) -> Option<String> {
    let zone = zone.trim();
    zone.parse::<u32>()
        .ok()
        .map(|_| format!("{}-{zone}", location.trim().to_lowercase()))
}

/// A managed disk's ARM ID: `/subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/disks/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedDiskUri {
    pub subscription: String,
    pub resource_group: String,
    pub name: String,
}

/// Why a disk URI does not name a managed disk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "\"{uri}\" does not name a managed disk ({problem}): /subscriptions/SUBSCRIPTION/resourceGroups/GROUP/providers/Microsoft.Compute/disks/NAME is needed"
)]
pub struct DiskUriError {
    /// As given (cleaned, at most 200 characters).
    pub uri: String,
    pub problem: &'static str,
}

impl ManagedDiskUri {
    /// Parses `uri` as the legacy in-tree controller split it: nine
    /// `/`-separated fields, the keywords compared case-insensitively (as
    /// ARM compares them); unlike upstream, which only looked at
    /// `resourceGroups`, every keyword is checked, and each name must be
    /// one path segment. A blob (VHD) URL, an unmanaged disk, is refused.
    pub fn parse(uri: &str) -> Result<Self, DiskUriError> {
        let refused = |problem| DiskUriError {
            uri: crate::logging::clean_text(uri, &[], 200),
            problem,
        };
        let trimmed = uri.trim();
        if trimmed.contains("://") {
            return Err(refused("it is a URL, as an unmanaged (blob) disk's VHD is"));
        }
        let fields: Vec<&str> = trimmed.split('/').collect();
        if fields.len() != 9 || !fields[0].is_empty() {
            return Err(refused("it is not nine '/'-separated fields from a leading '/'"));
        }
        for (index, keyword) in [
            (1, "subscriptions"),
            (3, "resourceGroups"),
            (5, "providers"),
            (6, "Microsoft.Compute"),
            (7, "disks"),
        ] {
            if !fields[index].eq_ignore_ascii_case(keyword) {
                return Err(refused(match index {
                    1 => "it does not start with /subscriptions/",
                    3 => "the fourth field is not resourceGroups",
                    6 | 7 => "it is not a Microsoft.Compute/disks resource",
                    _ => "the sixth field is not providers",
                }));
            }
        }
        for index in [2, 4, 8] {
            if super::check_segment("disk URI field", fields[index]).is_err() {
                return Err(refused(
                    "a subscription, resource group or disk name is empty or not one name",
                ));
            }
        }
        Ok(Self {
            subscription: fields[2].to_owned(),
            resource_group: fields[4].to_owned(),
            name: fields[8].to_owned(),
        })
    }
}

/// `Disks.Get` calls to one ARM endpoint with tokens from one source.
#[derive(Clone)]
pub struct DisksClient {
    http: reqwest::Client,
    base: Url,
    tokens: Arc<dyn TokenSource<AzureError>>,
}

impl fmt::Debug for DisksClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DisksClient")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

impl DisksClient {
    /// `http` from [`crate::http::http_client`]; `endpoint` the cloud's
    /// [`super::CloudEndpoints::resource_manager`] (or a fake's); `tokens`
    /// usually a [`super::CachedTokenSource`] in front of a credential for
    /// the cloud's `resource_manager_audience`.
    pub fn new(http: reqwest::Client, endpoint: &SecureEndpoint, tokens: Arc<dyn TokenSource<AzureError>>) -> Self {
        Self {
            http,
            base: super::base_url(endpoint),
            tokens,
        }
    }

    pub fn base(&self) -> &Url {
        &self.base
    }

    /// `Disks.Get`: the disk `name` in `resource_group` of `subscription`,
    /// all before `deadline`.
    pub async fn disk(
        &self,
        subscription: &str,
        resource_group: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<Disk, AzureError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| Call::garbage(SERVICE, &self.base, "the endpoint cannot have a path"))?
            .pop_if_empty()
            .extend([
                "subscriptions",
                super::check_segment("subscription", subscription)?,
                "resourceGroups",
                super::check_segment("resource group", resource_group)?,
                "providers",
                "Microsoft.Compute",
                "disks",
                super::check_segment("disk", name)?,
            ]);
        url.set_query(Some(&format!("api-version={DISKS_API_VERSION}")));
        let json = Call::bearer_get(
            SERVICE,
            "the access token source for ARM",
            &self.http,
            &*self.tokens,
            &url,
            deadline,
        )
        .await?;
        parse_disk(&url, &json)
    }

    /// [`DisksClient::disk`] for a parsed URI.
    pub async fn disk_by_uri(&self, uri: &ManagedDiskUri, deadline: Instant) -> Result<Disk, AzureError> {
        self.disk(&uri.subscription, &uri.resource_group, &uri.name, deadline)
            .await
    }
}

/// The disk in an ARM `Disks.Get` answer: its name, location, zones and SKU,
/// each cleaned for logs. Public for the fuzz targets (fuzz/): `url` only
/// names the answer in errors.
pub fn parse_disk(url: &Url, json: &Value) -> Result<Disk, AzureError> {
    let garbage = |problem: &str| Call::garbage(SERVICE, url, problem);
    let text = |field: &str| json[field].as_str().map(str::trim).filter(|s| !s.is_empty());
    let name = text("name").ok_or_else(|| garbage("the disk has no name"))?.to_owned();
    let location = text("location")
        .ok_or_else(|| garbage("the disk has no location"))?
        .to_owned();
    let zones = match json.get("zones") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(zones)) => zones
            .iter()
            .map(|z| {
                z.as_str()
                    .map(|z| crate::logging::clean_text(z.trim(), &[], 20))
                    .ok_or_else(|| garbage("zones holds a value that is not text"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(garbage("zones is not a list")),
    };
    let sku_name = json["sku"]["name"]
        .as_str()
        .map(|s| crate::logging::clean_text(s.trim(), &[], 64));
    Ok(Disk {
        name: crate::logging::clean_text(&name, &[], 100),
        location: crate::logging::clean_text(&location, &[], 64),
        zones,
        sku_name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_disk_uris_parse_case_insensitively() {
        let uri = ManagedDiskUri::parse(
            "/subscriptions/12345678-90ab-cdef-1234-567890abcdef/resourcegroups/MC_rg_aks_eastus/providers/microsoft.compute/Disks/pvc-0a1b",
        )
        .unwrap();
        assert_eq!(uri.subscription, "12345678-90ab-cdef-1234-567890abcdef");
        assert_eq!(uri.resource_group, "MC_rg_aks_eastus");
        assert_eq!(uri.name, "pvc-0a1b");
    }

    #[test]
    fn other_uris_say_they_are_not_managed_disks() {
        for (bad, problem) in [
            ("https://acct.blob.core.windows.net/vhds/disk.vhd", "it is a URL"),
            (
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/snapshots/x",
                "not a Microsoft.Compute/disks",
            ),
            (
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/x/extra",
                "nine",
            ),
            (
                "/subscriptions/s/groups/rg/providers/Microsoft.Compute/disks/x",
                "fourth field",
            ),
            (
                "/subscriptions/s/resourceGroups/../providers/Microsoft.Compute/disks/x",
                "not one name",
            ),
            (
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/",
                "empty",
            ),
            ("pvc-0a1b", "nine"),
        ] {
            let error = ManagedDiskUri::parse(bad).unwrap_err().to_string();
            assert!(error.contains("does not name a managed disk"), "{error}");
            assert!(error.contains(problem), "{bad}: {error}");
        }
    }

    #[test]
    fn disks_and_zone_labels() {
        let url = Url::parse("https://management.azure.com/x").unwrap();
        let zonal =
            serde_json::json!({"name": "d1", "location": "EastUS", "zones": ["2"], "sku": {"name": "Premium_LRS"}});
        let disk = parse_disk(&url, &zonal).unwrap();
        assert_eq!(disk.zones, ["2"]);
        assert!(!disk.is_zone_redundant());
        assert_eq!(zone_label(&disk.location, &disk.zones[0]).as_deref(), Some("eastus-2"));
        assert_eq!(zone_label("eastus", "one"), None);
        let zrs = serde_json::json!({"name": "d2", "location": "eastus", "sku": {"name": "StandardSSD_ZRS"}});
        let disk = parse_disk(&url, &zrs).unwrap();
        assert!(disk.zones.is_empty() && disk.is_zone_redundant());
        for bad in [
            serde_json::json!({"location": "eastus"}),
            serde_json::json!({"name": "d"}),
            serde_json::json!({"name": "d", "location": "l", "zones": "1"}),
            serde_json::json!({"name": "d", "location": "l", "zones": [1]}),
        ] {
            assert!(parse_disk(&url, &bad).is_err(), "{bad}");
        }
    }
}
