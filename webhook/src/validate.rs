//! The validation: does what a PV says about where it can be used (its topology labels
//! and nodeAffinity) agree with where its disk is? Pure, like [`crate::decision`]: the
//! request, the topology resolved for its volume and the settings in, the answer out.
//!
//! A contradiction is anything that lets the scheduler put a pod where the disk cannot
//! be attached, or keeps it from every place the disk can: a zone label naming a zone
//! the disk is not in, a region label naming another region, a nodeAffinity term whose
//! zone or region requirement admits nodes outside the disk's zones or region, or
//! excludes all of them. A narrower claim (one of a regional disk's two zones) is not
//! one. Zones are checked only when the disk's zones are known (a zone-redundant disk
//! has none), the region only when its region is.
//!
//! Validating webhooks run after every mutating one, so this also catches a later
//! webhook (or a label UPDATE) undoing what the mutating path wrote.

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, PersistentVolume};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};

use crate::answer::{finish, forbidden, invalid_topology, lookup_failed, provisioner, skipped};
use crate::model::{
    Decision, DecisionConfig, LookupResult, OnContradiction, Outcome, Resolution, Resolved, ReviewObject, Subject,
    TopologySource, Volume,
};
use crate::source::identify_pv;
use crate::topology::{BETA_REGION_LABEL, BETA_ZONE_LABEL, REGION_LABEL, ZONE_LABEL, zones_of_label};

/// One thing a PV says that its disk contradicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contradiction {
    /// A topology label names a zone or region the disk is not in.
    Label { key: String, says: String, disk: String },
    /// A nodeAffinity term admits nodes where the disk is not, or none where it is.
    Affinity {
        term: usize,
        key: String,
        operator: String,
        values: Vec<String>,
        disk: String,
    },
}

impl fmt::Display for Contradiction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Contradiction::Label { key, says, disk } => write!(f, "label {key}={says:?}, but the disk is in {disk}"),
            Contradiction::Affinity {
                term,
                key,
                operator,
                values,
                disk,
            } => write!(
                f,
                "nodeAffinity term {term}: {key} {operator} {values:?}, but the disk is in {disk}"
            ),
        }
    }
}

/// What `pv` says that contradicts the topology resolved for its disk, in the order
/// labels, then nodeAffinity terms.
pub fn contradictions(pv: &PersistentVolume, resolved: &Resolved) -> Vec<Contradiction> {
    let disk_zones: BTreeSet<&str> = resolved.topology.zones().iter().map(String::as_str).collect();
    let disk_region = resolved.topology.region();
    let zones_text = || match disk_zones.len() {
        1 => format!("zone {}", disk_zones.iter().next().copied().unwrap_or_default()),
        _ => format!("zones {}", disk_zones.iter().copied().collect::<Vec<_>>().join(", ")),
    };
    let region_text = |region: &str| format!("region {region}");
    let mut found = Vec::new();

    let labels = pv.metadata.labels.as_ref();
    for key in [ZONE_LABEL, BETA_ZONE_LABEL] {
        let Some(says) = labels.and_then(|l| l.get(key)).filter(|v| !v.is_empty()) else {
            continue;
        };
        if !disk_zones.is_empty() && !zones_of_label(says).is_subset(&disk_zones) {
            found.push(Contradiction::Label {
                key: key.to_owned(),
                says: says.clone(),
                disk: zones_text(),
            });
        }
    }
    for key in [REGION_LABEL, BETA_REGION_LABEL] {
        let (Some(says), Some(region)) = (labels.and_then(|l| l.get(key)).filter(|v| !v.is_empty()), disk_region)
        else {
            continue;
        };
        if says != region {
            found.push(Contradiction::Label {
                key: key.to_owned(),
                says: says.clone(),
                disk: region_text(region),
            });
        }
    }

    let zone_keys: BTreeSet<&str> = [ZONE_LABEL, BETA_ZONE_LABEL]
        .into_iter()
        .chain(resolved.affinity.zone.as_deref())
        .collect();
    let region_keys: BTreeSet<&str> = [REGION_LABEL, BETA_REGION_LABEL]
        .into_iter()
        .chain(resolved.affinity.region.as_deref())
        .collect();
    let terms = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default();
    for (index, term) in terms.iter().enumerate() {
        for requirement in term.match_expressions.iter().flatten() {
            let key = requirement.key.as_str();
            let (allowed, disk): (BTreeSet<&str>, String) = if zone_keys.contains(key) && !disk_zones.is_empty() {
                (disk_zones.clone(), zones_text())
            } else if let (true, Some(region)) = (region_keys.contains(key), disk_region) {
                ([region].into(), region_text(region))
            } else {
                continue;
            };
            if !admits_only_and_some(requirement, &allowed) {
                found.push(Contradiction::Affinity {
                    term: index,
                    key: key.to_owned(),
                    operator: requirement.operator.clone(),
                    values: requirement.values.clone().unwrap_or_default(),
                    disk,
                });
            }
        }
    }
    found
}

/// Whether `requirement` admits only places in `allowed`, and at least one of them. Of
/// the operators, `In` can say so; `NotIn` can only fail to (by excluding them all);
/// `Exists` and `DoesNotExist` say nothing about which place.
fn admits_only_and_some(requirement: &NodeSelectorRequirement, allowed: &BTreeSet<&str>) -> bool {
    let values: BTreeSet<&str> = requirement.values.iter().flatten().map(String::as_str).collect();
    match requirement.operator.as_str() {
        "In" => values.is_subset(allowed) && !values.is_empty(),
        "NotIn" => !allowed.is_subset(&values),
        _ => true,
    }
}

/// What a validation request is about: a PV CREATE, or an UPDATE that changes its
/// topology labels or nodeAffinity (others are the apiserver's business, and judging
/// them would block the PV controller's own updates of a PV created before this check).
pub fn subject(request: &AdmissionRequest<ReviewObject>) -> Subject<'_> {
    let skip = |outcome| Subject::Skip { outcome, warning: None };
    let is_pv = request.resource.group.is_empty()
        && request.resource.resource == "persistentvolumes"
        && request.sub_resource.is_none();
    if !is_pv || !matches!(request.operation, Operation::Create | Operation::Update) {
        return skip(Outcome::NotApplicable);
    }
    let Some(Ok(pv)) = request.object.as_ref().map(ReviewObject::persistent_volume) else {
        return skip(Outcome::Unreadable);
    };
    if request.operation == Operation::Update {
        let old = request.old_object.as_ref().map(ReviewObject::persistent_volume);
        if let Some(Ok(old)) = old
            && same_topology_claims(old, pv)
        {
            return skip(Outcome::NotApplicable);
        }
    }
    match identify_pv(pv) {
        Some(identity) => Subject::Volume(Volume {
            pv,
            identity,
            affinity_too_large: request.object.as_ref().is_some_and(ReviewObject::affinity_too_large),
        }),
        None => skip(Outcome::Unrecognized),
    }
}

/// Whether two PVs say the same about where they can be used: the zone/region labels
/// (standard and beta; an absent label map says what an empty one says) and nodeAffinity.
fn same_topology_claims(old: &PersistentVolume, new: &PersistentVolume) -> bool {
    let label = |pv: &PersistentVolume, key: &str| pv.metadata.labels.as_ref().and_then(|l| l.get(key)).cloned();
    let affinity = |pv: &PersistentVolume| pv.spec.as_ref().and_then(|s| s.node_affinity.clone());
    [ZONE_LABEL, REGION_LABEL, BETA_ZONE_LABEL, BETA_REGION_LABEL]
        .iter()
        .all(|key| label(old, key) == label(new, key))
        && affinity(old) == affinity(new)
}

/// The answer to a validation request about `volume`, given the topology resolved for
/// it: allowed when nothing contradicts the disk; otherwise refused (or, with
/// `--on-contradiction=warn`, allowed with a warning) with a message naming the volume,
/// what the PV says and where the disk is. Without a topology there is nothing to judge
/// against: allowed, except that a failed lookup follows `--on-lookup-error` for a
/// hand-made PV; a provisioned one (`pv.kubernetes.io/provisioned-by`) is admitted with
/// a warning, its provisioner's topology being authoritative.
pub fn judge(
    request: &AdmissionRequest<ReviewObject>,
    volume: &Volume<'_>,
    resolution: &Resolution,
    config: &DecisionConfig,
) -> Decision {
    let response = AdmissionResponse::from(request);
    let identity = &volume.identity;
    match resolution {
        Resolution::Resolved(resolved) => {
            let source = Some(resolved.source.clone());
            let result = matches!(resolved.source, TopologySource::Lookup(_)).then_some(LookupResult::Success);
            let found = contradictions(volume.pv, resolved);
            if found.is_empty() {
                return finish(response, Outcome::Consistent, source, result, Vec::new());
            }
            let listed = found.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
            let cause = format!("{identity}: {listed} (found by {})", resolved.source);
            match config.on_contradiction {
                OnContradiction::Deny => {
                    let refusal = format!(
                        "{cause}; pods using it could be scheduled where it cannot be attached (--on-contradiction=deny)"
                    );
                    finish(
                        forbidden(response, refusal),
                        Outcome::Contradicts,
                        source,
                        result,
                        Vec::new(),
                    )
                }
                OnContradiction::Warn => finish(
                    response,
                    Outcome::Contradicts,
                    source,
                    result,
                    vec![format!("{cause}; admitted (--on-contradiction=warn)")],
                ),
            }
        }
        Resolution::LookupFailed { lookup, error } => {
            let cause = format!("cannot check the topology of {identity}: lookup {lookup} failed: {error}");
            match provisioner(volume.pv) {
                // The provisioner placed the disk: its topology is authoritative, and a
                // cloud-API hiccup must not refuse dynamically provisioned PVs.
                Some(by) => finish(
                    response,
                    Outcome::LookupFailed,
                    Some(TopologySource::Lookup(lookup.clone())),
                    Some(error.result()),
                    vec![format!(
                        "{cause}; admitted unchecked: provisioned by {by}, whose topology is authoritative \
                         (--on-lookup-error applies to hand-made PVs only)"
                    )],
                ),
                None => lookup_failed(response, cause, lookup, error, config),
            }
        }
        Resolution::Placeholder => skipped(request, Outcome::Placeholder, None),
        Resolution::NotConfigured { .. } => skipped(request, Outcome::NotConfigured, None),
        Resolution::Unrecognized => skipped(request, Outcome::Unrecognized, None),
        Resolution::Invalid { source, reason } => invalid_topology(response, volume, source, reason),
    }
}
