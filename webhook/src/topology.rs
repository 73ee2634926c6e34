//! The topology of a volume: the zones it lives in and its region, validated so that
//! whatever we write is a legal, non-empty label value.

use std::collections::BTreeSet;

use thiserror::Error;

/// The zone label (GA key since Kubernetes 1.17).
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The zone label before the GA key, still read (never written) as a lookup's hint, as
/// the in-tree labeler read it.
pub const BETA_ZONE_LABEL: &str = "failure-domain.beta.kubernetes.io/zone";
/// The region label (GA key since Kubernetes 1.17).
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
/// The region label before 1.17, which older PVs may still carry.
pub const BETA_REGION_LABEL: &str = "failure-domain.beta.kubernetes.io/region";
/// Joins several zones in the zone label (regional disks), as Kubernetes does.
pub const MULTI_ZONE_DELIMITER: &str = "__";

const MAX_LABEL_VALUE: usize = 63;

/// Zones (sorted, deduplicated) and region of a volume. At least one is known.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Topology {
    zones: Vec<String>,
    region: Option<String>,
}

/// Why a zone or region cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TopologyError {
    #[error("neither a zone nor a region is known")]
    Empty,
    /// `value` as shown: control characters escaped once (a value a cloud answer
    /// gave comes already cleaned, and is not escaped again).
    #[error("zone \"{value}\" is not a valid label value: {reason}")]
    InvalidZone { value: String, reason: String },
    #[error("region \"{value}\" is not a valid label value: {reason}")]
    InvalidRegion { value: String, reason: String },
    #[error("zones \"{value}\" joined with `__` are longer than the 63 characters a label value may have")]
    ZoneLabelTooLong { value: String },
}

/// A refused zone or region for a message: escaped once, at most 100 characters.
fn shown(value: &str) -> String {
    cloud_access::logging::clean_text(value, &[], 100)
}

impl Topology {
    /// Builds a topology; zones are sorted and deduplicated so that the label value and
    /// the nodeAffinity values are the same for the same set of zones.
    pub fn new<Z, S>(zones: Z, region: Option<String>) -> Result<Self, TopologyError>
    where
        Z: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut set = BTreeSet::new();
        for zone in zones {
            let zone = zone.into();
            if let Err(reason) = check_label_value(&zone) {
                return Err(TopologyError::InvalidZone {
                    value: shown(&zone),
                    reason,
                });
            }
            // A zone containing the delimiter would read back as two zones.
            if zone.contains(MULTI_ZONE_DELIMITER) {
                return Err(TopologyError::InvalidZone {
                    value: shown(&zone),
                    reason: "it contains `__`, which separates zones".to_owned(),
                });
            }
            set.insert(zone);
        }
        if let Some(region) = &region
            && let Err(reason) = check_label_value(region)
        {
            return Err(TopologyError::InvalidRegion {
                value: shown(region),
                reason,
            });
        }
        if set.is_empty() && region.is_none() {
            return Err(TopologyError::Empty);
        }
        let zones: Vec<String> = set.into_iter().collect();
        let joined = zones.join(MULTI_ZONE_DELIMITER);
        if joined.len() > MAX_LABEL_VALUE {
            return Err(TopologyError::ZoneLabelTooLong { value: joined });
        }
        Ok(Self { zones, region })
    }

    /// The zones, sorted; empty when only the region is known.
    pub fn zones(&self) -> &[String] {
        &self.zones
    }

    /// The region, when known.
    pub fn region(&self) -> Option<&str> {
        self.region.as_deref()
    }

    /// The value of the zone label: the zones joined with `__`, or `None` when no zone is known.
    pub fn zone_label_value(&self) -> Option<String> {
        (!self.zones.is_empty()).then(|| self.zones.join(MULTI_ZONE_DELIMITER))
    }

    /// The labels this topology sets, sorted by key.
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        let mut labels = Vec::with_capacity(2);
        if let Some(region) = &self.region {
            labels.push((REGION_LABEL, region.clone()));
        }
        if let Some(zone) = self.zone_label_value() {
            labels.push((ZONE_LABEL, zone));
        }
        labels
    }
}

/// The zones named by a zone label value, sorted and deduplicated, for comparing a label
/// written by someone else (who may have ordered a regional disk's zones differently).
pub fn zones_of_label(value: &str) -> BTreeSet<&str> {
    value.split(MULTI_ZONE_DELIMITER).collect()
}

/// Checks a Kubernetes label value that must not be empty: at most 63 characters,
/// alphanumerics plus `-`, `_`, `.`, starting and ending with an alphanumeric.
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("it is empty".to_owned());
    }
    if value.len() > MAX_LABEL_VALUE {
        return Err(format!("it is longer than {MAX_LABEL_VALUE} characters"));
    }
    check_name_chars(value)
}

/// Checks a label key (a qualified name with an optional DNS-subdomain prefix), used for
/// the nodeAffinity topology key of a rule.
pub fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() || prefix.len() > 253 {
            return Err("its prefix must be 1 to 253 characters".to_owned());
        }
        let ok = prefix.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
        if !ok {
            return Err(format!("its prefix {prefix:?} is not a DNS subdomain"));
        }
    }
    if name.is_empty() {
        return Err("its name part is empty".to_owned());
    }
    if name.len() > MAX_LABEL_VALUE {
        return Err(format!("its name part is longer than {MAX_LABEL_VALUE} characters"));
    }
    check_name_chars(name)
}

fn check_name_chars(value: &str) -> Result<(), String> {
    let bytes = value.as_bytes();
    let inner_ok = bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let ends_ok =
        bytes.first().is_some_and(u8::is_ascii_alphanumeric) && bytes.last().is_some_and(u8::is_ascii_alphanumeric);
    if inner_ok && ends_ok {
        Ok(())
    } else {
        Err("only letters, digits, `-`, `_` and `.` are allowed, starting and ending with a letter or digit".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_are_sorted_deduplicated_and_joined() {
        let t = Topology::new(["b-1", "a-1", "b-1"], Some("r".to_owned())).unwrap();
        assert_eq!(t.zones(), ["a-1", "b-1"]);
        assert_eq!(t.zone_label_value().as_deref(), Some("a-1__b-1"));
        assert_eq!(
            t.labels(),
            vec![(REGION_LABEL, "r".to_owned()), (ZONE_LABEL, "a-1__b-1".to_owned())]
        );
    }

    #[test]
    fn region_only_is_allowed_but_nothing_is_not() {
        let t = Topology::new(Vec::<String>::new(), Some("r1".to_owned())).unwrap();
        assert_eq!(t.zone_label_value(), None);
        assert_eq!(t.labels(), vec![(REGION_LABEL, "r1".to_owned())]);
        assert_eq!(Topology::new(Vec::<String>::new(), None), Err(TopologyError::Empty));
    }

    #[test]
    fn refused_values_are_escaped_once() {
        // Raw (a rule's capture) and already cleaned (a cloud answer's) alike.
        for value in ["east\u{1b}us", r"east\u{1b}us"] {
            let error = Topology::new(Vec::<String>::new(), Some(value.to_owned()))
                .unwrap_err()
                .to_string();
            assert!(error.starts_with(r#"region "east\u{1b}us" is not"#), "{error}");
        }
    }

    #[test]
    fn invalid_values_are_refused() {
        for bad in ["", "-a", "a-", "a/b", "a b", "zone__x", &"x".repeat(64)] {
            assert!(
                matches!(Topology::new([bad], None), Err(TopologyError::InvalidZone { .. })),
                "{bad:?}"
            );
        }
        assert!(matches!(
            Topology::new(["a"], Some(String::new())),
            Err(TopologyError::InvalidRegion { .. })
        ));
        let long: Vec<String> = (0..10).map(|i| format!("zone-{i}-abcd")).collect();
        assert!(matches!(
            Topology::new(long, None),
            Err(TopologyError::ZoneLabelTooLong { .. })
        ));
    }

    #[test]
    fn label_keys() {
        assert!(check_label_key("topology.gke.io/zone").is_ok());
        assert!(check_label_key("zone").is_ok());
        for bad in ["", "/zone", "Topology.io/zone", "a/", "a/b/c", "a..b/zone"] {
            assert!(check_label_key(bad).is_err(), "{bad:?}");
        }
    }
}
