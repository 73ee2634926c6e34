//! `explain`: which providers kubelet runs for an image, and for each
//! pattern of each provider why it matches or not; what kubelet records of
//! an image pulled with each one's credentials, and what its
//! `imagePullCredentialsVerificationPolicy` verifies again
//! ([`super::pull_records`]).

use serde::Serialize;

use super::CredentialProviderConfig;
use super::pull_records::{self, Scope, Verification};
use crate::MAX_ERROR_LINE;
use crate::cli::OutputFormat;
use crate::matching;
use crate::mirror::Mirroring;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// The image as given.
    pub image: String,
    /// What kubelet matches: the repository without tag or digest.
    pub repository: String,
    /// The providers kubelet runs, in config order.
    pub runs: Vec<String>,
    pub providers: Vec<ProviderVerdict>,
    /// What kubelet verifies again before a pod uses the image once it is
    /// on the node.
    pub verification: VerificationVerdict,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerificationVerdict {
    /// The KubeletConfiguration read (`null`: kubelet 1.35+ defaults).
    pub kubelet_config: Option<String>,
    /// Whether kubelet keeps pull records (KubeletEnsureSecretPulledImages).
    pub records: bool,
    pub policy: &'static str,
    /// The allowlist entry the image matches (NeverVerifyAllowlistedImages).
    pub allowlisted_by: Option<String>,
    pub says: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderVerdict {
    pub name: String,
    /// The file it came from.
    pub file: String,
    pub runs: bool,
    pub patterns: Vec<PatternVerdict>,
    /// What kubelet records of an image pulled with its credentials.
    pub record: Scope,
    /// The registry mirror the image is pulled through under this entry's
    /// command line (entries that run this plugin; `null`: none).
    pub mirror: Option<Mirroring>,
    /// Why the entry's mirrors could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PatternVerdict {
    pub pattern: String,
    pub matches: bool,
    /// The first of kubelet's checks it fails: `url`, `port`,
    /// `host-labels`, `path` or `host-label`; `null` when it matches.
    pub check: Option<&'static str>,
    pub reason: String,
}

/// Every provider's verdict on `image` (which kubelet can parse), for a
/// kubelet that verifies as `verification` says.
pub fn explain(config: &CredentialProviderConfig, image: &str, verification: &Verification) -> Explanation {
    let repository = crate::image::repository(image);
    let providers: Vec<ProviderVerdict> = config
        .providers
        .iter()
        .zip(&config.sources)
        .map(|(provider, source)| {
            let patterns: Vec<PatternVerdict> = provider
                .match_images
                .iter()
                .map(|pattern| match matching::compare(pattern, &repository) {
                    Ok(()) => PatternVerdict {
                        pattern: pattern.clone(),
                        matches: true,
                        check: None,
                        reason: "matches".into(),
                    },
                    Err(mismatch) => PatternVerdict {
                        pattern: pattern.clone(),
                        matches: false,
                        check: Some(mismatch.check()),
                        reason: mismatch.to_string(),
                    },
                })
                .collect();
            ProviderVerdict {
                name: provider.name.clone(),
                file: source.display().to_string(),
                runs: patterns.iter().any(|p| p.matches),
                patterns,
                record: pull_records::scope(provider),
                mirror: None,
                mirror_error: None,
            }
        })
        .collect();
    Explanation {
        image: image.to_owned(),
        runs: providers.iter().filter(|p| p.runs).map(|p| p.name.clone()).collect(),
        repository,
        providers,
        verification: VerificationVerdict {
            kubelet_config: verification.source.as_ref().map(|p| p.display().to_string()),
            records: verification.records,
            policy: verification.policy.name(),
            allowlisted_by: verification.allowlist.matching(image).map(str::to_owned),
            says: verification.describe(image),
        },
    }
}

impl Explanation {
    /// Each running provider's mirror, from `lookup` (`None`: an entry
    /// whose mirrors cannot be known, such as another plugin's).
    pub fn with_mirrors(
        mut self,
        config: &CredentialProviderConfig,
        lookup: impl Fn(&super::Provider, &str) -> Option<Result<Option<Mirroring>, String>>,
    ) -> Self {
        for (verdict, provider) in self.providers.iter_mut().zip(&config.providers) {
            if !verdict.runs {
                continue;
            }
            match lookup(provider, &self.repository) {
                Some(Ok(mirror)) => verdict.mirror = mirror,
                Some(Err(error)) => verdict.mirror_error = Some(error),
                None => {}
            }
        }
        self
    }

    /// 0 when a provider runs, 2 when none does.
    pub fn exit_code(&self) -> std::process::ExitCode {
        std::process::ExitCode::from(if self.runs.is_empty() { 2 } else { 0 })
    }

    pub fn render(&self, format: OutputFormat) -> String {
        match format {
            OutputFormat::Json => format!("{}\n", serde_json::to_string_pretty(self).unwrap_or_default()),
            OutputFormat::Text => self.text(),
        }
    }

    /// A summary line, then per provider a line and one per pattern. Every
    /// line is escaped: names and patterns are text from the config.
    fn text(&self) -> String {
        let mut lines = Vec::new();
        let runs = if self.runs.is_empty() {
            "no provider runs for it".to_owned()
        } else {
            format!("kubelet runs {}", self.runs.join(", "))
        };
        lines.push(format!("{}: kubelet looks up {}; {runs}", self.image, self.repository));
        for provider in &self.providers {
            let verdict = if provider.runs { "runs" } else { "does not run" };
            lines.push(format!("{}: {verdict} ({})", provider.name, provider.file));
            for pattern in &provider.patterns {
                lines.push(format!("  {}: {}", pattern.pattern, pattern.reason));
            }
            if provider.runs {
                if let Some(mirror) = &provider.mirror {
                    lines.push(format!("  mirror: {}", mirror.describe()));
                }
                if let Some(error) = &provider.mirror_error {
                    lines.push(format!("  mirror: cannot tell: {error}"));
                }
                lines.push(format!("  record: {}", provider.record.describe()));
            }
        }
        let config = match &self.verification.kubelet_config {
            Some(path) => format!("KubeletConfiguration {path}"),
            None => "kubelet 1.35+ defaults; --kubelet-config reads the node's".to_owned(),
        };
        lines.push(format!(
            "once on the node (imagePullPolicy IfNotPresent or Never; Always pulls every time) [{config}]: {}",
            self.verification.says
        ));
        lines
            .iter()
            .map(|line| format!("{}\n", cloud_access::logging::clean_text(line, &[], MAX_ERROR_LINE)))
            .collect()
    }
}
