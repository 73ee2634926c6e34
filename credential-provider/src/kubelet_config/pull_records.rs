//! What kubelet records of an image pulled with a provider's credentials,
//! and what it verifies again before another pod uses it (KEP-2535,
//! "ensure secret pulled images": feature gate KubeletEnsureSecretPulledImages,
//! alpha in 1.33, beta and on by default since 1.35). Followed from
//! k8s.io/kubernetes v1.37.2:
//! - pkg/credentialprovider/plugin/plugins.go (`Lookup`) and plugin.go
//!   (`provide`): a provider's credentials carry the pod's service account
//!   when kubelet got a service-account token for it (`tokenAttributes` and
//!   a pod with a service account), none otherwise;
//! - pkg/kubelet/images/image_manager.go (`trackedToImagePullCreds`): a
//!   pull with credentials that carry no source, or an anonymous pull, is
//!   recorded `NodePodsAccessible`; one with a service account's, recorded
//!   for that service account (namespace, name, UID);
//! - pkg/kubelet/images/pullmanager (`MustAttemptImagePull` and
//!   image_pull_policies.go): whether a pod may use an image already on the
//!   node without pulling it again with its own credentials.
//!
//! The decision is [`must_pull_again`]; the cluster tier compares it with
//! kubelet's own pull manager (`kubelet-credcheck pull-verify`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Provider;

/// `imagePullCredentialsVerificationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Policy {
    /// Any pod on the node may use any image present.
    NeverVerify,
    /// Images kubelet pulled are verified; those present otherwise are not.
    NeverVerifyPreloadedImages,
    /// Images of `preloadedImagesVerificationAllowlist` are never verified;
    /// every other one is, preloaded or not.
    NeverVerifyAllowlistedImages,
    /// Every image is verified, preloaded ones too.
    AlwaysVerify,
}

impl Policy {
    pub const ALL: [Policy; 4] = [
        Policy::NeverVerify,
        Policy::NeverVerifyPreloadedImages,
        Policy::NeverVerifyAllowlistedImages,
        Policy::AlwaysVerify,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Policy::NeverVerify => "NeverVerify",
            Policy::NeverVerifyPreloadedImages => "NeverVerifyPreloadedImages",
            Policy::NeverVerifyAllowlistedImages => "NeverVerifyAllowlistedImages",
            Policy::AlwaysVerify => "AlwaysVerify",
        }
    }

    fn parse(text: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == text)
    }
}

/// `preloadedImagesVerificationAllowlist`: images by name without tag or
/// digest, or every image under a prefix ending in `/*`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Allowlist {
    patterns: Vec<String>,
    /// Each pattern as kubelet normalizes it, read once.
    #[serde(skip)]
    normalized: Vec<(String, bool)>,
}

impl Allowlist {
    /// The patterns as kubelet's validation takes them
    /// (`getAllowlistImagePattern`); the first it refuses, with the reason.
    pub fn parse(patterns: &[String]) -> Result<Allowlist, String> {
        let normalized = patterns
            .iter()
            .map(|p| allowlist_pattern(p))
            .collect::<Result<_, _>>()?;
        Ok(Allowlist {
            patterns: patterns.to_vec(),
            normalized,
        })
    }

    /// The pattern `image` (as the pod spec names it) matches, if any.
    pub fn matching(&self, image: &str) -> Option<&str> {
        let name = without_tag_or_digest(image).unwrap_or_else(|_| image.to_owned());
        self.patterns
            .iter()
            .zip(&self.normalized)
            .find(|(_, (normal, wildcard))| {
                if *wildcard {
                    name.starts_with(normal.as_str())
                } else {
                    name == *normal
                }
            })
            .map(|(pattern, _)| pattern.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }
}

/// A pattern as kubelet normalizes it: `(prefix, true)` for `PREFIX/*`
/// (the `*` dropped), `(name, false)` for a name.
fn allowlist_pattern(pattern: &str) -> Result<(String, bool), String> {
    if pattern != pattern.trim() {
        return Err(format!("leading/trailing spaces are not allowed: {pattern}"));
    }
    let (trimmed, wildcard) = match pattern.strip_suffix("/*") {
        Some(prefix) => (format!("{prefix}/"), true),
        None => (pattern.to_owned(), false),
    };
    if trimmed.is_empty() {
        return Err(format!("the supplied pattern is too short: {pattern}"));
    }
    if trimmed.contains('*') {
        return Err(format!(
            "not a valid wildcard pattern, only patterns ending with '/*' are allowed: {pattern}"
        ));
    }
    if wildcard {
        if trimmed.len() == 1 {
            return Err("at least registry hostname is required".to_owned());
        }
        return Ok((trimmed, true));
    }
    let name = without_tag_or_digest(&trimmed).map_err(|e| format!("failed to parse as an image name: {e}"))?;
    if name != trimmed {
        return Err(format!(
            "neither tag nor digest is accepted in an image reference: {pattern}"
        ));
    }
    Ok((trimmed, false))
}

/// The image as the pod spec names it, without `:tag` and `@digest`, not
/// normalized (`nginx` stays `nginx`: kubelet's `trimImageTagDigest`).
pub fn without_tag_or_digest(image: &str) -> Result<String, String> {
    crate::image::parse(image)?;
    let name = image.split_once('@').map_or(image, |(name, _)| name);
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    Ok(match name[last_slash..].find(':') {
        Some(colon) => name[..last_slash + colon].to_owned(),
        None => name.to_owned(),
    })
}

/// A service account as kubelet's records name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceAccount {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// What kubelet's records say of an image on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// On the node, not pulled by kubelet (preloaded, or pulled by hand).
    Preloaded,
    /// Pulled with credentials of no pod's (a provider without a
    /// service-account token, the node's own config) or anonymously:
    /// `NodePodsAccessible`.
    NodeWide,
    /// Pulled with credentials from this service account's token.
    ServiceAccount(ServiceAccount),
}

/// Whether kubelet must pull `image` again, with the asking pod's own
/// credentials, before a pod of `pod_account` (none: a static pod) may use
/// it, when the pod's imagePullPolicy is IfNotPresent or Never (Always
/// pulls every time; with Never "must pull" means the pod fails with
/// ErrImageNeverPull). `MustAttemptImagePull`, for one credential record.
pub fn must_pull_again(
    policy: Policy,
    allowlist: &Allowlist,
    image: &str,
    record: &Record,
    pod_account: Option<&ServiceAccount>,
) -> bool {
    let pulled_by_kubelet = *record != Record::Preloaded;
    let verify = match policy {
        Policy::NeverVerify => false,
        Policy::NeverVerifyPreloadedImages => pulled_by_kubelet,
        Policy::NeverVerifyAllowlistedImages => allowlist.matching(image).is_none(),
        Policy::AlwaysVerify => true,
    };
    if !verify {
        return false;
    }
    if without_tag_or_digest(image).is_err() {
        return true;
    }
    match record {
        Record::Preloaded => true,
        Record::NodeWide => false,
        Record::ServiceAccount(recorded) => pod_account != Some(recorded),
    }
}

/// What kubelet records of an image pulled with `provider`'s credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "scope", rename_all = "kebab-case")]
pub enum Scope {
    /// The pod's service account, whose token kubelet sent; pods without one
    /// (static pods) get the provider only if it does not require one, and
    /// their pulls are recorded node-wide.
    ServiceAccount { pods_without_one_node_wide: bool },
    /// Node-wide: any pod on the node may use the image once pulled.
    Node,
}

/// The record scope of `provider`'s credentials.
pub fn scope(provider: &Provider) -> Scope {
    match &provider.token_attributes {
        Some(attributes) => Scope::ServiceAccount {
            pods_without_one_node_wide: attributes.require_service_account == Some(false),
        },
        None => Scope::Node,
    }
}

impl Scope {
    /// One sentence for `explain`.
    pub fn describe(self) -> &'static str {
        match self {
            Scope::ServiceAccount {
                pods_without_one_node_wide: false,
            } => {
                "per service account: kubelet sends the pod's service-account token, and records the image as pulled by that service account (namespace, name, UID), whatever credentials the plugin answers with; a pod of another service account pulls it again with its own credentials"
            }
            Scope::ServiceAccount {
                pods_without_one_node_wide: true,
            } => {
                "per service account: kubelet sends the pod's service-account token, and records the image as pulled by that service account (namespace, name, UID), whatever credentials the plugin answers with; a pod of another service account pulls it again with its own credentials. A pod without a service account (a static pod) gets this provider's credentials without a token, recorded node-wide"
            }
            Scope::Node => {
                "node-wide: the node's credentials, recorded as NodePodsAccessible: any pod on this node can use the image once pulled, without credentials of its own"
            }
        }
    }
}

/// What a kubelet's configuration says about verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verification {
    /// Whether kubelet keeps pull records at all (the gate).
    pub records: bool,
    pub policy: Policy,
    pub allowlist: Allowlist,
    /// The KubeletConfiguration read, if one was.
    pub source: Option<PathBuf>,
}

impl Default for Verification {
    /// A kubelet of 1.35 or later with the defaults.
    fn default() -> Self {
        Verification {
            records: true,
            policy: Policy::NeverVerifyPreloadedImages,
            allowlist: Allowlist::default(),
            source: None,
        }
    }
}

/// A KubeletConfiguration file is a few kilobytes.
const MAX_KUBELET_CONFIG: u64 = 1 << 20;
const GATE: &str = "KubeletEnsureSecretPulledImages";

/// Why a KubeletConfiguration cannot be read for `explain --kubelet-config`.
#[derive(Debug, thiserror::Error)]
pub enum KubeletConfigError {
    #[error("--kubelet-config {0}")]
    File(#[source] cloud_access::files::FileError),
    #[error("--kubelet-config {path}: {reason}")]
    Invalid { path: String, reason: String },
}

/// The verification settings of a KubeletConfiguration file
/// (`kubelet.config.k8s.io/v1beta1`, JSON or YAML), refused where kubelet's
/// validation refuses them.
pub fn read_kubelet_config(path: &Path) -> Result<Verification, KubeletConfigError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct KubeletConfiguration {
        #[serde(default)]
        api_version: String,
        #[serde(default)]
        kind: String,
        #[serde(default)]
        image_pull_credentials_verification_policy: Option<String>,
        #[serde(default)]
        preloaded_images_verification_allowlist: Vec<String>,
        #[serde(default)]
        feature_gates: std::collections::BTreeMap<String, bool>,
    }
    let invalid = |reason: String| KubeletConfigError::Invalid {
        path: path.display().to_string(),
        reason,
    };
    let text =
        cloud_access::files::read_regular_to_string(path, MAX_KUBELET_CONFIG).map_err(KubeletConfigError::File)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let config: KubeletConfiguration = cloud_access::yaml::from_str(text).map_err(|e| invalid(e.to_string()))?;
    if config.kind != "KubeletConfiguration" || config.api_version != "kubelet.config.k8s.io/v1beta1" {
        return Err(invalid(format!(
            "apiVersion {:?} kind {:?}: not a kubelet.config.k8s.io/v1beta1 KubeletConfiguration",
            config.api_version, config.kind
        )));
    }
    let records = config.feature_gates.get(GATE).copied().unwrap_or(true);
    let set_policy = config
        .image_pull_credentials_verification_policy
        .filter(|p| !p.is_empty());
    if !records {
        if set_policy.is_some() || !config.preloaded_images_verification_allowlist.is_empty() {
            return Err(invalid(format!(
                "kubelet refuses imagePullCredentialsVerificationPolicy and preloadedImagesVerificationAllowlist with the feature gate {GATE} off"
            )));
        }
        return Ok(Verification {
            records,
            source: Some(path.to_owned()),
            ..Verification::default()
        });
    }
    let policy = match set_policy.as_deref() {
        None => Policy::NeverVerifyPreloadedImages,
        Some(name) => Policy::parse(name).ok_or_else(|| {
            invalid(format!(
                "imagePullCredentialsVerificationPolicy {name:?}: kubelet takes {}",
                Policy::ALL.map(Policy::name).join(", ")
            ))
        })?,
    };
    if !config.preloaded_images_verification_allowlist.is_empty() && policy != Policy::NeverVerifyAllowlistedImages {
        return Err(invalid(
            "preloadedImagesVerificationAllowlist: kubelet takes it only with imagePullCredentialsVerificationPolicy NeverVerifyAllowlistedImages".to_owned(),
        ));
    }
    let allowlist = Allowlist::parse(&config.preloaded_images_verification_allowlist)
        .map_err(|e| invalid(format!("preloadedImagesVerificationAllowlist: {e}")))?;
    Ok(Verification {
        records,
        policy,
        allowlist,
        source: Some(path.to_owned()),
    })
}

impl Verification {
    /// What kubelet verifies again for `image`, in one paragraph for
    /// `explain` (imagePullPolicy IfNotPresent or Never).
    pub fn describe(&self, image: &str) -> String {
        if !self.records {
            return format!(
                "{GATE} is off: kubelet keeps no pull records, so any pod on this node can use an image once it is present, whichever credentials pulled it"
            );
        }
        let policy = self.policy.name();
        match self.policy {
            Policy::NeverVerify => format!(
                "{policy}: kubelet never verifies again: any pod on this node can use the image once it is present, whatever the record says"
            ),
            Policy::NeverVerifyPreloadedImages => format!(
                "{policy}: once kubelet has pulled the image, a pod the record does not cover pulls it again with its own credentials (a node-wide record covers every pod); an image present before kubelet pulled it is not verified"
            ),
            Policy::NeverVerifyAllowlistedImages => match self.allowlist.matching(image) {
                Some(pattern) => format!(
                    "{policy}: the image matches preloadedImagesVerificationAllowlist entry {pattern:?}, so it is never verified: any pod on this node can use it once present"
                ),
                None => format!(
                    "{policy}: the image matches no preloadedImagesVerificationAllowlist entry (entries compare the image as the pod spec writes it, without tag or digest), so a pod the record does not cover pulls it again with its own credentials (a node-wide record covers every pod), even when it was present before kubelet pulled it"
                ),
            },
            Policy::AlwaysVerify => format!(
                "{policy}: a pod the record does not cover pulls the image again with its own credentials (a node-wide record covers every pod), even when it was present before kubelet pulled it"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(name: &str) -> ServiceAccount {
        ServiceAccount {
            namespace: "team".to_owned(),
            name: name.to_owned(),
            uid: format!("uid-{name}"),
        }
    }

    #[test]
    fn allowlist_patterns_as_kubelet_validates_and_matches_them() {
        for (bad, why) in [
            (" reg.io/app", "spaces"),
            ("reg.io/*/app", "only patterns ending with '/*'"),
            ("/*", "registry hostname"),
            ("reg.io/app:1", "neither tag nor digest"),
            ("", "too short"),
        ] {
            let error = Allowlist::parse(&[bad.to_owned()]).expect_err("refused");
            assert!(error.contains(why), "{bad:?}: {error}");
        }
        let list = Allowlist::parse(&["reg.io/team/*".to_owned(), "nginx".to_owned()]).expect("test setup");
        assert_eq!(list.matching("reg.io/team/app:1"), Some("reg.io/team/*"));
        assert_eq!(list.matching("reg.io/team"), None, "the prefix keeps its slash");
        assert_eq!(list.matching("nginx:1.27"), Some("nginx"));
        assert_eq!(list.matching("docker.io/library/nginx"), None, "not normalized");
    }

    #[test]
    fn what_must_be_pulled_again() {
        let none = Allowlist::default();
        let image = "reg.io/team/app:1";
        let a = account("a");
        let b = account("b");
        let recorded = Record::ServiceAccount(a.clone());
        use Policy::*;
        let cases: [(Policy, &Record, Option<&ServiceAccount>, bool); 12] = [
            (NeverVerify, &recorded, Some(&b), false),
            (NeverVerifyPreloadedImages, &Record::Preloaded, Some(&b), false),
            (NeverVerifyPreloadedImages, &Record::NodeWide, None, false),
            (NeverVerifyPreloadedImages, &recorded, Some(&a), false),
            (NeverVerifyPreloadedImages, &recorded, Some(&b), true),
            (NeverVerifyPreloadedImages, &recorded, None, true),
            (NeverVerifyAllowlistedImages, &Record::Preloaded, Some(&a), true),
            (NeverVerifyAllowlistedImages, &Record::NodeWide, Some(&a), false),
            (AlwaysVerify, &Record::Preloaded, Some(&a), true),
            (AlwaysVerify, &Record::NodeWide, Some(&b), false),
            (AlwaysVerify, &recorded, Some(&a), false),
            (AlwaysVerify, &recorded, Some(&b), true),
        ];
        for (policy, record, pod, want) in cases {
            assert_eq!(
                must_pull_again(policy, &none, image, record, pod),
                want,
                "{policy:?} {record:?} {pod:?}"
            );
        }
        let listed = Allowlist::parse(&["reg.io/team/*".to_owned()]).expect("test setup");
        assert!(!must_pull_again(
            NeverVerifyAllowlistedImages,
            &listed,
            image,
            &recorded,
            Some(&b)
        ));
    }

    #[test]
    fn a_kubelet_configuration_is_read_as_kubelet_validates_it() {
        let dir = tempfile::tempdir().expect("test setup");
        let write = |text: &str| {
            let path = dir.path().join("kubelet.yaml");
            std::fs::write(
                &path,
                format!("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n{text}"),
            )
            .expect("test setup");
            path
        };
        let read = |text: &str| read_kubelet_config(&write(text));
        assert_eq!(read("").expect("test setup").policy, Policy::NeverVerifyPreloadedImages);
        let allow = read("imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\npreloadedImagesVerificationAllowlist: [\"reg.io/base/*\"]\n").expect("test setup");
        assert_eq!(allow.allowlist.matching("reg.io/base/debian:12"), Some("reg.io/base/*"));
        let off = read("featureGates:\n  KubeletEnsureSecretPulledImages: false\n").expect("test setup");
        assert!(!off.records);
        for (text, want) in [
            (
                "imagePullCredentialsVerificationPolicy: Sometimes\n",
                "kubelet takes NeverVerify, NeverVerifyPreloadedImages",
            ),
            (
                "preloadedImagesVerificationAllowlist: [\"reg.io/*\"]\n",
                "only with imagePullCredentialsVerificationPolicy NeverVerifyAllowlistedImages",
            ),
            (
                "imagePullCredentialsVerificationPolicy: NeverVerifyAllowlistedImages\npreloadedImagesVerificationAllowlist: [\"reg.io/a:1\"]\n",
                "neither tag nor digest",
            ),
            (
                "featureGates: {KubeletEnsureSecretPulledImages: false}\nimagePullCredentialsVerificationPolicy: AlwaysVerify\n",
                "with the feature gate KubeletEnsureSecretPulledImages off",
            ),
        ] {
            let error = read(text).expect_err("refused").to_string();
            assert!(error.starts_with("--kubelet-config "), "{error}");
            assert!(error.contains(want), "{text:?}: {error}");
        }
        let path = dir.path().join("other.yaml");
        std::fs::write(&path, "apiVersion: v1\nkind: ConfigMap\n").expect("test setup");
        assert!(
            read_kubelet_config(&path)
                .expect_err("refused")
                .to_string()
                .contains("not a kubelet.config.k8s.io/v1beta1 KubeletConfiguration")
        );
    }
}
