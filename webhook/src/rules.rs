//! Rules files (`--rules FILE`): an ordered list of rules that give the topology of
//! volumes no built-in parser knows, e.g. on-premises CSI drivers. The first rule that
//! matches a volume wins. A file with any error is refused as a whole, naming the rule's
//! index and the reason, so that a typo never silently leaves volumes unlabeled.
//!
//! ```yaml
//! rules:
//!   - driver: csi.example.com            # or `inTree: cinder`, …
//!     volumeHandle: '^(?P<region>[a-z]+)/(?P<zone>[a-z0-9-]+)/'
//!     topologyKey: topology.csi.example.com/zone
//!   - inTree: vsphereVolume
//!     zones: [dc1-a]
//!     region: dc1
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use cloud_access::files::{FileError, read_regular_to_string};
use regex::Regex;
use serde::Deserialize;
use thiserror::Error;

use crate::builtin::csi_zone_key;
use crate::source::{InTree, VolumeIdentity, VolumeKind};
use crate::topology::{REGION_LABEL, Topology, TopologyError, check_label_key};

/// Largest rules file read; a rule is a few lines, so this is thousands of them, and a
/// path to something else (a log, a device) is refused rather than read.
pub const MAX_RULES_FILE_BYTES: u64 = 1024 * 1024;

/// A rules file that cannot be used.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RulesError {
    #[error("rules file {}: cannot read it: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: FileError,
    },
    #[error("rules file {}: not valid YAML: {source}", path.display())]
    Yaml {
        path: PathBuf,
        #[source]
        source: serde_yaml_ng::Error,
    },
    #[error("rules file {}: {reason}", path.display())]
    Layout { path: PathBuf, reason: String },
    #[error("rules file {}: rules[{index}]: {reason}", path.display())]
    Rule {
        path: PathBuf,
        index: usize,
        reason: String,
    },
    /// A rule for volumes an enabled lookup answers for: rules are tried first, so the
    /// lookup would never be asked for them (a fixed `zones` would win over the cloud).
    #[error(
        "{origin}: the rule for `{selector}` hides {flag}: rules are tried before lookups, so the lookup would never be asked for these volumes; delete the rule (the lookup answers for them) or drop {flag}"
    )]
    ShadowsLookup {
        origin: RuleOrigin,
        /// The rule's selector as written, e.g. `inTree: cinder`.
        selector: String,
        flag: &'static str,
    },
}

/// The volumes an enabled lookup answers for, as a rule would select them, and the
/// flag that turned it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookupScope {
    pub flag: &'static str,
    pub driver: &'static str,
    pub in_tree: Option<InTree>,
}

/// Where a rule was written: file and index in its `rules` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleOrigin {
    pub path: PathBuf,
    pub index: usize,
}

impl fmt::Display for RuleOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#rules[{}]", self.path.display(), self.index)
    }
}

/// The volumes a rule applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Selector {
    Driver(String),
    InTree(InTree),
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Driver(driver) => write!(f, "driver: {driver}"),
            Selector::InTree(source) => write!(f, "inTree: {}", source.name()),
        }
    }
}

/// One validated rule.
#[derive(Debug, Clone)]
pub struct Rule {
    origin: RuleOrigin,
    selector: Selector,
    volume_handle: Option<Regex>,
    zones: Vec<String>,
    region: Option<String>,
    topology_key: Option<String>,
}

/// The rule that matched a volume and what it gave.
#[derive(Debug, Clone)]
pub struct RuleMatch<'a> {
    pub origin: &'a RuleOrigin,
    /// The topology, or why the values the rule produced cannot be used.
    pub topology: Result<Topology, TopologyError>,
    /// The nodeAffinity key the rule names, if any.
    pub topology_key: Option<&'a str>,
}

impl Rule {
    /// Where the rule was written.
    pub fn origin(&self) -> &RuleOrigin {
        &self.origin
    }

    fn selects(&self, kind: &VolumeKind) -> bool {
        match (&self.selector, kind) {
            (Selector::Driver(want), VolumeKind::Csi { driver }) => want == driver,
            (Selector::InTree(want), VolumeKind::InTree(source)) => want == source,
            _ => false,
        }
    }

    fn apply(&self, volume: &VolumeIdentity) -> Option<RuleMatch<'_>> {
        if !self.selects(&volume.kind) {
            return None;
        }
        let mut zones = self.zones.clone();
        let mut region = self.region.clone();
        if let Some(regex) = &self.volume_handle {
            let captures = regex.captures(&volume.handle)?;
            if let Some(zone) = captures.name("zone") {
                zones = vec![zone.as_str().to_owned()];
            }
            if let Some(r) = captures.name("region") {
                region = Some(r.as_str().to_owned());
            }
        }
        Some(RuleMatch {
            origin: &self.origin,
            topology: Topology::new(zones, region),
            topology_key: self.topology_key.as_deref(),
        })
    }
}

/// All rules, from every `--rules` file in the order given.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    rules: Vec<Rule>,
}

impl Rules {
    /// Loads and validates the files; their rules are concatenated in order.
    pub fn load(paths: &[PathBuf]) -> Result<Self, RulesError> {
        let mut rules = Vec::new();
        for path in paths {
            let text = read_regular_to_string(path, MAX_RULES_FILE_BYTES).map_err(|source| RulesError::Read {
                path: path.clone(),
                source,
            })?;
            rules.extend(Self::parse(path, &text)?.rules);
        }
        Ok(Self { rules })
    }

    /// Parses and validates one file's text; `path` is only used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<Self, RulesError> {
        let layout = |reason: &str| RulesError::Layout {
            path: path.to_owned(),
            reason: reason.to_owned(),
        };
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(|source| RulesError::Yaml {
            path: path.to_owned(),
            source,
        })?;
        let serde_yaml_ng::Value::Mapping(mut top) = doc else {
            return Err(layout("expected a mapping with a `rules` list at the top"));
        };
        let rules = top.remove("rules").ok_or_else(|| layout("there is no `rules` list"))?;
        if let Some((key, _)) = top.iter().next() {
            return Err(layout(&format!(
                "unknown top-level key {}; only `rules` is allowed",
                serde_yaml_ng::to_string(key).unwrap_or_default().trim_end()
            )));
        }
        let serde_yaml_ng::Value::Sequence(items) = rules else {
            return Err(layout("`rules` must be a list"));
        };
        let rules = items
            .into_iter()
            .enumerate()
            .map(|(index, item)| {
                let origin = RuleOrigin {
                    path: path.to_owned(),
                    index,
                };
                validate(origin, item).map_err(|reason| RulesError::Rule {
                    path: path.to_owned(),
                    index,
                    reason,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { rules })
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The first rule that matches the volume.
    pub fn resolve(&self, volume: &VolumeIdentity) -> Option<RuleMatch<'_>> {
        self.rules.iter().find_map(|rule| rule.apply(volume))
    }

    /// Refuses the first rule (in file order) written for volumes one of `lookups`
    /// answers for. Such a rule would answer before the lookup, for every volume of its
    /// driver or in-tree type its `volumeHandle` matches, so the lookup's flag would do
    /// nothing there. Built-in handle parsing needs no such check: it runs before the
    /// rules, and a rule only ever sees the handles it cannot place.
    pub fn refuse_shadowing(&self, lookups: &[LookupScope]) -> Result<(), RulesError> {
        for rule in &self.rules {
            let shadowed = lookups.iter().find(|scope| match &rule.selector {
                Selector::Driver(driver) => driver == scope.driver,
                Selector::InTree(source) => Some(*source) == scope.in_tree,
            });
            if let Some(scope) = shadowed {
                return Err(RulesError::ShadowsLookup {
                    origin: rule.origin.clone(),
                    selector: rule.selector.to_string(),
                    flag: scope.flag,
                });
            }
        }
        Ok(())
    }

    /// Whether some rule is written for this kind of volume (even if its `volumeHandle`
    /// does not match a given handle): such volumes are "recognized".
    pub fn names(&self, kind: &VolumeKind) -> bool {
        self.rules.iter().any(|rule| rule.selects(kind))
    }
}

/// A rule as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawRule {
    driver: Option<String>,
    in_tree: Option<String>,
    volume_handle: Option<String>,
    zones: Option<Vec<String>>,
    region: Option<String>,
    topology_key: Option<String>,
}

fn validate(origin: RuleOrigin, item: serde_yaml_ng::Value) -> Result<Rule, String> {
    let raw: RawRule = serde_yaml_ng::from_value(item).map_err(|e| e.to_string())?;
    let selector = match (raw.driver, raw.in_tree) {
        (Some(_), Some(_)) => return Err("set either `driver` or `inTree`, not both".into()),
        (None, None) => return Err("set `driver` (a CSI driver) or `inTree`".into()),
        (Some(driver), None) if driver.is_empty() => return Err("`driver` is empty".into()),
        (Some(driver), None) => Selector::Driver(driver),
        (None, Some(name)) => Selector::InTree(InTree::from_name(&name).ok_or_else(|| {
            let known: Vec<&str> = InTree::ALL.iter().map(|s| s.name()).collect();
            format!("`inTree: {name}` is not one of {}", known.join(", "))
        })?),
    };
    let volume_handle = raw
        .volume_handle
        .map(|pattern| {
            Regex::new(&pattern).map_err(|e| format!("`volumeHandle` is not a valid regular expression: {e}"))
        })
        .transpose()?;
    let (zone_group, region_group) = match &volume_handle {
        Some(regex) => {
            for name in regex.capture_names().flatten() {
                if name != "zone" && name != "region" {
                    return Err(format!(
                        "`volumeHandle` has a named group `{name}`; only `zone` and `region` are used"
                    ));
                }
            }
            let has = |n: &str| regex.capture_names().flatten().any(|g| g == n);
            (has("zone"), has("region"))
        }
        None => (false, false),
    };
    let zones = raw.zones.unwrap_or_default();
    if zone_group && !zones.is_empty() {
        return Err("both a `zone` group in `volumeHandle` and fixed `zones`; use one".into());
    }
    if region_group && raw.region.is_some() {
        return Err("both a `region` group in `volumeHandle` and a fixed `region`; use one".into());
    }
    if !zone_group && !region_group && zones.is_empty() && raw.region.is_none() {
        return Err(
            "it gives no topology: set `zones` and/or `region`, or named groups `zone`/`region` in `volumeHandle`"
                .into(),
        );
    }
    // Check fixed values now rather than on the first matching volume.
    if !zones.is_empty() || raw.region.is_some() {
        Topology::new(zones.iter().cloned(), raw.region.clone()).map_err(|e| e.to_string())?;
    }
    if raw.topology_key.as_deref() == Some(REGION_LABEL) {
        // The key holds the zones; zones under the region key match no node.
        return Err(format!(
            "`topologyKey` must be the node label for zones, not {REGION_LABEL}"
        ));
    }
    if let Some(key) = &raw.topology_key {
        check_label_key(key).map_err(|reason| format!("`topologyKey` {key:?} is not a valid label key: {reason}"))?;
    }
    if let Selector::Driver(driver) = &selector
        && raw.topology_key.is_none()
        && csi_zone_key(driver).is_none()
    {
        // A guessed key could make the PV unschedulable, which cannot be undone later.
        return Err(format!(
            "CSI driver {driver:?} has no built-in topology key; set `topologyKey` to the node label its nodes report their zone under"
        ));
    }
    Ok(Rule {
        origin,
        selector,
        volume_handle,
        zones,
        region: raw.region,
        topology_key: raw.topology_key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CINDER: LookupScope = LookupScope {
        flag: "--openstack-cinder-lookup",
        driver: "cinder.csi.openstack.org",
        in_tree: Some(InTree::Cinder),
    };

    fn rules(text: &str) -> Rules {
        Rules::parse(Path::new("r.yaml"), text).expect("valid rules")
    }

    #[test]
    fn the_first_rule_for_a_lookups_volumes_is_refused_by_position() {
        let both = rules(
            "rules:\n  - inTree: vsphereVolume\n    zones: [a]\n  - driver: cinder.csi.openstack.org\n    zones: [nova]\n  - inTree: cinder\n    zones: [nova]\n",
        );
        let error = both.refuse_shadowing(&[CINDER]).expect_err("refused");
        assert_eq!(
            error.to_string(),
            "r.yaml#rules[1]: the rule for `driver: cinder.csi.openstack.org` hides --openstack-cinder-lookup: rules are tried before lookups, so the lookup would never be asked for these volumes; delete the rule (the lookup answers for them) or drop --openstack-cinder-lookup"
        );
        let in_tree = rules("rules:\n  - inTree: cinder\n    volumeHandle: '^v-'\n    zones: [nova]\n");
        let error = in_tree.refuse_shadowing(&[CINDER]).expect_err("refused");
        assert!(
            error
                .to_string()
                .starts_with("r.yaml#rules[0]: the rule for `inTree: cinder` hides"),
            "{error}"
        );
        // No lookup on, or one for other volumes: the rules stand.
        both.refuse_shadowing(&[]).expect("no lookup");
        let vsphere = LookupScope {
            flag: "--vsphere-lookup",
            driver: "csi.vsphere.vmware.com",
            in_tree: Some(InTree::VsphereVolume),
        };
        assert!(matches!(
            both.refuse_shadowing(&[vsphere]),
            Err(RulesError::ShadowsLookup {
                flag: "--vsphere-lookup",
                ..
            })
        ));
        in_tree.refuse_shadowing(&[vsphere]).expect("another lookup");
        Rules::default().refuse_shadowing(&[CINDER, vsphere]).expect("no rules");
    }
}
