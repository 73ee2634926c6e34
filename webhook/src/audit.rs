//! `pv-topology-webhook audit`: every PersistentVolume of a cluster, resolved as the
//! webhook would resolve it, and judged by the same code: what /mutate would add
//! ([`crate::decision::wanted`]) and what /validate would refuse
//! ([`crate::validate::contradictions`]). [`classify`] is pure (a PV and its
//! [`Resolution`] in, a [`Finding`] out); [`audit`] lists the PVs (paged), resolves and
//! classifies each, and with `--fix-labels` adds the missing labels by a merge patch.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde::Serialize;
use thiserror::Error;

use crate::cli::{AuditArgs, AuditOutput};
use crate::decision::{is_trusted, wanted};
use crate::model::{Resolution, Volume};
use crate::resolve::Resolver;
use crate::source::{VolumeIdentity, identify_pv};
use crate::validate::contradictions;

/// Where the recreate procedure is documented.
pub const REMEDY: &str = "docs/webhook.md, \"Migrating from the in-tree PersistentVolumeLabel plugin\"";
/// The field manager of `--fix-labels`' patches.
pub const FIELD_MANAGER: &str = "pv-topology-webhook-audit";

/// What `audit` says of one PV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Its topology is what /mutate would give it and agrees with its disk (or, when no
    /// topology is found for it, a provisioner's labels are trusted, as /mutate trusts
    /// them).
    Fine,
    /// Labels /mutate would add are absent; nodeAffinity is complete.
    MissingLabels,
    /// nodeAffinity requirements /mutate would add are absent (labels may be too).
    MissingAffinity,
    /// Its labels or nodeAffinity name a zone or region its disk is not in.
    Contradicts,
    /// A volume the webhook handles, whose topology could not be found.
    Unresolvable,
    /// A volume type the webhook knows nothing about: skipped, as /mutate skips it.
    NotOurs,
    /// Was [`Status::MissingLabels`]; `--fix-labels` added them.
    LabelsFixed,
}

impl Status {
    /// The name written in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Fine => "fine",
            Status::MissingLabels => "missing-labels",
            Status::MissingAffinity => "missing-affinity",
            Status::Contradicts => "contradicts",
            Status::Unresolvable => "unresolvable",
            Status::NotOurs => "not-ours",
            Status::LabelsFixed => "labels-fixed",
        }
    }

    /// Whether the PV needs nothing done (the exit status is 0 when all do not).
    pub fn is_fine(self) -> bool {
        matches!(self, Status::Fine | Status::NotOurs | Status::LabelsFixed)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of the report; the JSON output's field names are these (stable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The PV's name.
    pub name: String,
    /// The volume it stands for (`CSI <driver> volume "<handle>"`), when it is one the
    /// webhook reads.
    pub volume: Option<String>,
    pub status: Status,
    /// Why, in words: what is missing or contradicts and where, or why no topology.
    pub detail: String,
    /// Labels /mutate would add that the PV lacks.
    pub missing_labels: BTreeMap<String, String>,
    /// nodeAffinity requirements /mutate would add that the PV lacks (`KEY In [VALUES]`).
    pub missing_affinity: Vec<String>,
}

/// The finding for `pv`, whose volume is `identity` (none: not ours) with the topology
/// `resolution` resolved for it: pure, the same judgement as /mutate and /validate.
pub fn classify(pv: &PersistentVolume, identity: Option<&VolumeIdentity>, resolution: &Resolution) -> Finding {
    let finding = |status, detail: String| Finding {
        name: pv.metadata.name.clone().unwrap_or_default(),
        volume: identity.map(ToString::to_string),
        status,
        detail,
        missing_labels: BTreeMap::new(),
        missing_affinity: Vec::new(),
    };
    let Some(identity) = identity else {
        return finding(Status::NotOurs, "not a volume the webhook handles".to_owned());
    };
    let trusted = is_trusted(pv);
    let resolved = match resolution {
        Resolution::Resolved(resolved) => resolved,
        _ if trusted => return finding(Status::Fine, trusted_detail()),
        Resolution::Unrecognized => {
            return finding(
                Status::NotOurs,
                "no built-in knowledge, rule or lookup is about this driver".to_owned(),
            );
        }
        Resolution::Placeholder => {
            return finding(
                Status::Unresolvable,
                "the volume ID is the provisioning placeholder".to_owned(),
            );
        }
        Resolution::NotConfigured { flag } => {
            return finding(
                Status::Unresolvable,
                format!("no topology source is configured for it; enable one with {flag}"),
            );
        }
        Resolution::Invalid { source, reason } => {
            return finding(
                Status::Unresolvable,
                format!("{source} gave an unusable topology ({reason})"),
            );
        }
        Resolution::LookupFailed { lookup, error } => {
            return finding(Status::Unresolvable, format!("lookup {lookup} failed: {error}"));
        }
    };
    let found = contradictions(pv, resolved);
    if !found.is_empty() {
        let listed = found.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
        return finding(Status::Contradicts, format!("{listed} (found by {})", resolved.source));
    }
    // A provisioner's labels, trusted by /mutate, are judged here all the same: a PV
    // without nodeAffinity can be scheduled anywhere, whoever labelled it.
    let volume = Volume {
        pv,
        identity: identity.clone(),
        affinity_too_large: false,
    };
    let after = wanted(&volume, resolved, &mut Vec::new());
    let have = pv.metadata.labels.as_ref();
    let missing_labels: BTreeMap<String, String> = after
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(key, _)| have.and_then(|l| l.get(*key)).is_none_or(String::is_empty))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let missing_affinity = missing_requirements(pv, &after);
    let labels_text = || {
        missing_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (status, detail) = if !missing_affinity.is_empty() {
        let mut detail = format!(
            "nodeAffinity lacks {} (found by {}); nodeAffinity is immutable: recreate the PV keeping the disk, see {REMEDY}",
            missing_affinity.join(", "),
            resolved.source
        );
        if trusted {
            detail.push_str(
                " (drop its topology labels from the saved object: /mutate trusts a provisioned PV's labels and adds nothing)",
            );
        }
        if !missing_labels.is_empty() {
            let _ = write!(detail, "; labels to add: {}", labels_text());
        }
        (Status::MissingAffinity, detail)
    } else if !missing_labels.is_empty() {
        (
            Status::MissingLabels,
            format!(
                "labels to add: {} (found by {}); --fix-labels adds them",
                labels_text(),
                resolved.source
            ),
        )
    } else {
        (
            Status::Fine,
            format!("agrees with its disk (found by {})", resolved.source),
        )
    };
    Finding {
        missing_labels,
        missing_affinity,
        ..finding(status, detail)
    }
}

fn trusted_detail() -> String {
    "labeled by its provisioner (trusted, as /mutate trusts it)".to_owned()
}

/// The requirements of `after`'s nodeAffinity that `pv`'s lacks, as `KEY In [VALUES]`
/// (/mutate adds the same ones to every term, so they are listed once).
fn missing_requirements(pv: &PersistentVolume, after: &PersistentVolume) -> Vec<String> {
    let terms = |pv: &PersistentVolume| {
        pv.spec
            .as_ref()
            .and_then(|s| s.node_affinity.as_ref())
            .and_then(|a| a.required.as_ref())
            .map(|r| r.node_selector_terms.clone())
            .unwrap_or_default()
    };
    let before = terms(pv);
    let mut missing = Vec::new();
    for (index, term) in terms(after).iter().enumerate() {
        let had = before.get(index).and_then(|t| t.match_expressions.as_ref());
        for requirement in term.match_expressions.iter().flatten() {
            if had.is_some_and(|h| h.contains(requirement)) {
                continue;
            }
            let text = format!(
                "{} {} [{}]",
                requirement.key,
                requirement.operator,
                requirement.values.as_deref().unwrap_or_default().join(", ")
            );
            if !missing.contains(&text) {
                missing.push(text);
            }
        }
    }
    missing
}

/// The finding for `pv`, resolved with `resolver`.
pub async fn examine(resolver: &Resolver, pv: &PersistentVolume) -> Finding {
    let Some(identity) = identify_pv(pv) else {
        return classify(pv, None, &Resolution::Unrecognized);
    };
    let resolution = resolver.resolve(&identity).await;
    classify(pv, Some(&identity), &resolution)
}

/// Why `audit` could not finish.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AuditError {
    #[error("--kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot find the cluster (--kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster): {0}")]
    Infer(#[source] kube::config::InferConfigError),
    #[error("--context: {0}")]
    Context(#[source] kube::config::KubeconfigError),
    #[error("cannot make a client for the cluster: {0}")]
    Client(#[source] kube::Error),
    #[error("cannot list PersistentVolumes (the audit needs `list` on persistentvolumes): {0}")]
    List(String),
    #[error("--fix-labels: {failed} PV(s) not patched; first, {name}: {message}")]
    Fix {
        failed: usize,
        name: String,
        message: String,
    },
}

/// What the apiserver said (its Status message and code), or the client's error.
fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} ({} {})", status.message, status.code, status.reason),
        other => other.to_string(),
    }
}

/// A client for the cluster `args` name: `--kubeconfig` (with `--context`), else
/// kube's inference ($KUBECONFIG, ~/.kube/config, the in-cluster service account).
pub async fn client(args: &AuditArgs) -> Result<kube::Client, AuditError> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match (&args.kubeconfig, &args.context) {
        (Some(path), _) => {
            let kubeconfig_error = |source| AuditError::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let kubeconfig = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(kubeconfig_error)?
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(AuditError::Context)?,
        (None, None) => kube::Config::infer().await.map_err(AuditError::Infer)?,
    };
    kube::Client::try_from(config).map_err(AuditError::Client)
}

/// Lists every PV (pages of `page_size`), classifies each with `resolver` and, with
/// `fix_labels`, patches the missing labels in. The findings, in the apiserver's order;
/// a failed patch is an error after the rest were tried, the findings with it.
pub async fn audit(
    client: kube::Client,
    resolver: &Resolver,
    page_size: u32,
    fix_labels: bool,
) -> Result<(Vec<Finding>, Option<AuditError>), AuditError> {
    let api: Api<PersistentVolume> = Api::all(client);
    let mut findings = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(page_size);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let page = api.list(&params).await.map_err(|e| AuditError::List(describe(&e)))?;
        for pv in &page.items {
            findings.push(examine(resolver, pv).await);
        }
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    if !fix_labels {
        return Ok((findings, None));
    }
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let (mut failed, mut first) = (0, None);
    for finding in &mut findings {
        if finding.missing_labels.is_empty() || finding.status == Status::Contradicts {
            continue;
        }
        // Only metadata.labels: labels are mutable, and nothing else is touched.
        let patch = serde_json::json!({"metadata": {"labels": &finding.missing_labels}});
        match api.patch(&finding.name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => fixed(finding),
            Err(source) => {
                failed += 1;
                first.get_or_insert_with(|| {
                    let mut message = describe(&source);
                    if matches!(&source, kube::Error::Api(status) if status.code == 403) {
                        message.push_str(
                            " (--fix-labels needs `patch` on persistentvolumes: the ClusterRole pv-topology-webhook-audit-fix-labels of manifests/webhook/audit/fix-labels)",
                        );
                    }
                    (finding.name.clone(), message)
                });
            }
        }
    }
    let failure = first.map(|(name, message)| AuditError::Fix { failed, name, message });
    Ok((findings, failure))
}

/// `finding` after its missing labels were added.
pub fn fixed(finding: &mut Finding) {
    let added = std::mem::take(&mut finding.missing_labels);
    let added = added
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ");
    match finding.status {
        Status::MissingLabels => {
            finding.status = Status::LabelsFixed;
            finding.detail = format!("labels added: {added}");
        }
        _ => {
            if let Some(cut) = finding.detail.find("; labels to add: ") {
                finding.detail.truncate(cut);
            }
            let _ = write!(finding.detail, "; labels added: {added}");
        }
    }
}

/// The report in the chosen format, ending with a newline.
pub fn render(findings: &[Finding], output: AuditOutput) -> String {
    match output {
        AuditOutput::Json => {
            // Serializing strings and maps of strings cannot fail.
            let mut text = serde_json::to_string_pretty(findings).unwrap_or_else(|_| "[]".to_owned());
            text.push('\n');
            text
        }
        AuditOutput::Table => table(findings),
    }
}

fn table(findings: &[Finding]) -> String {
    let rows: Vec<[String; 4]> = findings
        .iter()
        .map(|f| {
            [
                f.name.clone(),
                f.volume.clone().unwrap_or_else(|| "-".to_owned()),
                f.status.to_string(),
                f.detail.clone(),
            ]
        })
        .collect();
    let header = ["NAME", "VOLUME", "STATUS", "DETAIL"].map(str::to_owned);
    let mut widths = [0usize; 3];
    for row in std::iter::once(&header).chain(&rows) {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let _ = writeln!(
            text,
            "{:w0$}  {:w1$}  {:w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
    }
    text
}

/// The exit status for `findings`: 0 when every PV is fine, 2 when one is not.
pub fn exit_code(findings: &[Finding]) -> u8 {
    if findings.iter().all(|f| f.status.is_fine()) {
        0
    } else {
        2
    }
}
