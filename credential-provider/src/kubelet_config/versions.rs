//! Which kubelet reads the config: what its version and feature gates
//! change in the rules (`check-config --kubelet-version`,
//! `--kubelet-feature-gates`). KEP-4412's `tokenAttributes` came to the v1
//! config in 1.33 behind the alpha gate
//! `KubeletServiceAccountTokenForCredentialProviders` (off by default),
//! which is beta and on by default from 1.34, when `cacheType` was added
//! (kubernetes/kubernetes#128372 and #132617).

use std::fmt;

/// The feature gate kubelet checks before reading `tokenAttributes`.
pub const SERVICE_ACCOUNT_TOKEN_GATE: &str = "KubeletServiceAccountTokenForCredentialProviders";

/// The first minor version with `tokenAttributes` (alpha).
pub const TOKEN_ATTRIBUTES_SINCE: u32 = 33;
/// The first minor version with the gate on by default, and `cacheType`.
pub const TOKEN_GATE_ON_SINCE: u32 = 34;

/// The first minor version serving each API version, the same for the
/// config (`kubelet.config.k8s.io`) and the plugin protocol
/// (`credentialprovider.kubelet.k8s.io`): v1alpha1 with the feature (1.20,
/// alpha gate `KubeletCredentialProviders`, on by default from 1.24),
/// v1beta1 from 1.24 (kubernetes/kubernetes#108847), v1 from 1.26 when the
/// feature went GA (#111616). None has been removed: kubelet v1.37.2's
/// `pkg/credentialprovider/plugin` still registers all three.
pub const API_VERSIONS_SINCE: [(&str, u32); 3] = [("v1alpha1", 20), ("v1beta1", 24), ("v1", 26)];

/// The first minor version whose `--image-credential-provider-config` may
/// name a directory (kubernetes/kubernetes#131658, CHANGELOG-1.34).
pub const DIRECTORY_SINCE: u32 = 34;

/// A kubelet's version, `1.MINOR`: the patch level changes no rule here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubeletVersion {
    pub minor: u32,
}

impl KubeletVersion {
    /// `1.33`, `v1.33.4`, `1.34.0-rc.1`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad =
            || format!("{text:?} is not a Kubernetes version: use 1.MINOR or v1.MINOR.PATCH, such as 1.34 or v1.33.4");
        let core = text.strip_prefix('v').unwrap_or(text);
        let core = core.split_once(['-', '+']).map_or(core, |(core, _)| core);
        let parts: Vec<&str> = core.split('.').collect();
        let number = |part: &str| {
            (!part.is_empty() && part.len() <= 4 && part.bytes().all(|b| b.is_ascii_digit()))
                .then(|| part.parse::<u32>().ok())
                .flatten()
        };
        match parts.as_slice() {
            ["1", minor] | ["1", minor, _] if parts.iter().skip(1).all(|p| number(p).is_some()) => Ok(KubeletVersion {
                minor: number(minor).ok_or_else(bad)?,
            }),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for KubeletVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.minor)
    }
}

/// The gates of kubelet's `--feature-gates` that change a rule here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeatureGates {
    pub service_account_token: Option<bool>,
}

impl FeatureGates {
    /// kubelet's `--feature-gates` syntax, `NAME=BOOL[,NAME=BOOL...]`, with
    /// Go's `strconv.ParseBool` values; other gates are read and ignored.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut gates = FeatureGates::default();
        for item in text.split(',').map(str::trim).filter(|item| !item.is_empty()) {
            let Some((name, value)) = item.split_once('=') else {
                return Err(format!("{item:?} is not NAME=true or NAME=false"));
            };
            let value = match value.trim() {
                "1" | "t" | "T" | "true" | "TRUE" | "True" => true,
                "0" | "f" | "F" | "false" | "FALSE" | "False" => false,
                other => return Err(format!("{name}={other:?}: the value is true or false")),
            };
            if name.trim() == SERVICE_ACCOUNT_TOKEN_GATE {
                gates.service_account_token = Some(value);
            }
        }
        Ok(gates)
    }
}

/// The kubelet a config is checked for. The default is a kubelet of 1.34
/// or later with its default gates, the rules `validate` applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KubeletTarget {
    pub version: Option<KubeletVersion>,
    pub gates: FeatureGates,
}

impl KubeletTarget {
    fn at_least(&self, minor: u32) -> bool {
        self.version.is_none_or(|v| v.minor >= minor)
    }

    /// Whether its v1 config type has `tokenAttributes` at all.
    pub fn knows_token_attributes(&self) -> bool {
        self.at_least(TOKEN_ATTRIBUTES_SINCE)
    }

    /// The first version serving API `version` (`v1`, `v1beta1`, the part
    /// after the group), when this kubelet is older; `None` when it serves
    /// it (or the version is unknown: another rule names that).
    pub fn lacks_api_version(&self, version: &str) -> Option<u32> {
        let since = API_VERSIONS_SINCE.iter().find(|(name, _)| *name == version)?.1;
        (!self.at_least(since)).then_some(since)
    }

    /// The API versions this kubelet serves, for a message.
    pub fn served_api_versions(&self) -> Vec<&'static str> {
        API_VERSIONS_SINCE
            .iter()
            .filter(|(_, since)| self.at_least(*since))
            .map(|(name, _)| *name)
            .collect()
    }

    /// Whether `--image-credential-provider-config` may be a directory.
    pub fn reads_directories(&self) -> bool {
        self.at_least(DIRECTORY_SINCE)
    }

    /// Whether its `tokenAttributes` has `cacheType` (then required).
    pub fn knows_cache_type(&self) -> bool {
        self.at_least(TOKEN_GATE_ON_SINCE)
    }

    /// Whether the service-account token gate is on.
    pub fn token_gate_on(&self) -> bool {
        self.gates
            .service_account_token
            .unwrap_or_else(|| self.at_least(TOKEN_GATE_ON_SINCE))
    }

    /// How to name this kubelet in a message.
    pub fn describe(&self) -> String {
        match self.version {
            Some(version) => format!("kubelet {version}"),
            None => "kubelet".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        for (text, minor) in [("1.33", 33), ("v1.34.2", 34), ("1.35.0-rc.1", 35), ("v1.30.1+k3s1", 30)] {
            assert_eq!(KubeletVersion::parse(text), Ok(KubeletVersion { minor }), "{text}");
        }
        for bad in ["", "latest", "2.1", "1", "1.x", "1.33.4.5", "v", "1.-3", "1.99999"] {
            let error = KubeletVersion::parse(bad).unwrap_err();
            assert!(error.contains("1.34"), "{bad}: {error}");
        }
    }

    #[test]
    fn feature_gates() {
        let on = FeatureGates::parse("A=false, KubeletServiceAccountTokenForCredentialProviders=true")
            .expect("the gates parse");
        assert_eq!(on.service_account_token, Some(true));
        assert_eq!(
            FeatureGates::parse("A=true").expect("the gates parse"),
            FeatureGates::default()
        );
        assert!(FeatureGates::parse("A").is_err());
        assert!(FeatureGates::parse("A=yes").is_err());
    }

    #[test]
    fn targets() {
        let at = |minor| KubeletTarget {
            version: Some(KubeletVersion { minor }),
            gates: FeatureGates::default(),
        };
        assert!(KubeletTarget::default().token_gate_on() && KubeletTarget::default().knows_cache_type());
        assert!(!at(32).knows_token_attributes());
        assert!(at(33).knows_token_attributes() && !at(33).token_gate_on() && !at(33).knows_cache_type());
        assert!(at(34).token_gate_on() && at(34).knows_cache_type());
        let gated = KubeletTarget {
            gates: FeatureGates {
                service_account_token: Some(true),
            },
            ..at(33)
        };
        assert!(gated.token_gate_on());
        assert_eq!(at(25).lacks_api_version("v1"), Some(26));
        assert_eq!(at(26).lacks_api_version("v1"), None);
        assert_eq!(at(23).lacks_api_version("v1beta1"), Some(24));
        assert_eq!(at(37).lacks_api_version("v1alpha1"), None);
        assert_eq!(at(19).lacks_api_version("v1alpha1"), Some(20));
        assert_eq!(at(25).served_api_versions(), ["v1alpha1", "v1beta1"]);
        assert!(KubeletTarget::default().lacks_api_version("v1").is_none());
        assert!(!at(33).reads_directories() && at(34).reads_directories());
        assert!(KubeletTarget::default().reads_directories());
    }
}
