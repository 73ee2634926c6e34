//! `pv-topology-webhook audit`: every PersistentVolume of a cluster, resolved as the
//! webhook would resolve it, and judged by the same code: what /mutate would add
//! ([`crate::decision::wanted`]) and what /validate would refuse
//! ([`crate::validate::contradictions`]). [`classify`] is pure (a PV and its
//! [`Resolution`] in, a [`Finding`] out); [`run`] lists the PVs a page at a time
//! ([`crate::apiserver`], every answer bounded), resolves and classifies each, with
//! `--fix-labels` adds the missing labels by a merge patch, and writes each page's rows
//! before asking for the next ([`report`]), within `--deadline` and `--max-pages`.

use std::collections::{BTreeMap, HashSet};
use std::fmt::{self, Write as _};
use std::hash::{BuildHasher as _, RandomState};
use std::io::Write;
use std::time::{Duration, Instant};

use cloud_access::go_duration::format as duration;
use k8s_openapi::api::core::v1::PersistentVolume;
use serde::Serialize;
use thiserror::Error;

use crate::cli::AuditArgs;
use crate::decision::{is_trusted, wanted};
use crate::model::{Resolution, Volume};
use crate::resolve::Resolver;
use crate::source::{VolumeIdentity, identify_pv};
use crate::validate::contradictions;

pub mod report;

pub use self::report::{Progress, Report, render};
use crate::apiserver::{self, ApiError, Apiserver, ConnectError};

/// Where `repair`, which recreates a PV with its nodeAffinity, is explained.
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
            "nodeAffinity lacks {} (found by {}); nodeAffinity is immutable: `pv-topology-webhook repair --pv {}` recreates the PV keeping its disk and claim, see {REMEDY}",
            missing_affinity.join(", "),
            resolved.source,
            pv.metadata.name.as_deref().unwrap_or_default()
        );
        if trusted {
            detail.push_str(
                " (a provisioner's labels, which /mutate trusts and adds nothing to: repair writes the topology anew)",
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

/// Why `audit` could not finish; each names the server (or the flag) and the fix.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AuditError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error(
        "cannot list PersistentVolumes from {server} (page {page}): {error}{}",
        permission_hint(error)
    )]
    List {
        server: String,
        page: usize,
        error: ApiError,
    },
    #[error(
        "cannot list PersistentVolumes from {server}: the continue token of page {page} repeats an earlier page's (the apiserver pages in a loop)"
    )]
    RepeatedToken { server: String, page: usize },
    #[error(
        "cannot list PersistentVolumes from {server}: more than --max-pages {max} pages of --page-size {page_size} (raise --max-pages for a cluster this large)"
    )]
    MaxPages { server: String, max: u32, page_size: u32 },
    #[error("--deadline {} passed listing PersistentVolumes from {server}, at page {page} with {judged} PVs judged (raise --deadline, or find what is slow: the apiserver or a lookup)", duration(*.deadline))]
    Deadline {
        server: String,
        deadline: Duration,
        page: usize,
        judged: usize,
    },
    #[error("--fix-labels: {failed} PV(s) not patched at {server}; first, {name}: {message}")]
    Fix {
        server: String,
        failed: usize,
        name: String,
        message: String,
    },
    #[error("cannot write the report: {0}")]
    Output(#[source] std::io::Error),
}

/// What to check when the apiserver refused the client (401, 403): a network failure
/// or a server error is no RBAC matter.
fn permission_hint(error: &ApiError) -> &'static str {
    if error.is_unauthorized() {
        " (the apiserver did not accept the kubeconfig's credentials: an expired token or certificate, or another cluster's; the audit needs `list` on persistentvolumes)"
    } else if error.is_forbidden() {
        " (the audit needs `list` on persistentvolumes: the ClusterRole pv-topology-webhook-audit of manifests/webhook/audit)"
    } else {
        ""
    }
}

/// How far the audit got, kept outside the deadline's future so that its error can
/// say so.
#[derive(Debug, Default)]
struct Walked {
    pages: usize,
    judged: usize,
    fix_failed: usize,
    first_fix_failure: Option<(String, String)>,
}

/// The whole of `audit`: lists every PV, a page at a time, judges each with `resolver`,
/// with `--fix-labels` patches the missing labels in, and writes each page's rows to
/// `out` before asking for the next. The exit status (0 or 2), after the summary on
/// stderr; an error once the report so far is closed.
pub async fn run(args: &AuditArgs, resolver: &Resolver, out: impl Write) -> Result<u8, AuditError> {
    let started = Instant::now();
    let config = apiserver::config(&args.cluster).await?;
    let apiserver = Apiserver::new(config, args.cluster.request_timeout)?;
    let mut report = Report::new(out, args.output);
    let mut walked = Walked::default();
    let deadline = tokio::time::Instant::from_std(started) + args.deadline;
    let walk = walk(args, &apiserver, resolver, &mut report, &mut walked, started);
    let result = match tokio::time::timeout_at(deadline, walk).await {
        Ok(result) => result,
        Err(_) => Err(AuditError::Deadline {
            server: apiserver.server().to_owned(),
            deadline: args.deadline,
            page: walked.pages + 1,
            judged: walked.judged,
        }),
    };
    // The rows so far stay a whole document, whatever stopped the audit; an audit that
    // judged nothing before its error writes nothing.
    if result.is_ok() || report.rows() > 0 {
        report.finish().map_err(AuditError::Output)?;
    }
    result?;
    if let Some((name, message)) = walked.first_fix_failure {
        return Err(AuditError::Fix {
            server: apiserver.server().to_owned(),
            failed: walked.fix_failed,
            name,
            message,
        });
    }
    eprintln!("{}", report.summary(walked.pages));
    Ok(report.exit_code())
}

async fn walk(
    args: &AuditArgs,
    apiserver: &Apiserver,
    resolver: &Resolver,
    report: &mut Report<impl Write>,
    walked: &mut Walked,
    started: Instant,
) -> Result<(), AuditError> {
    let max_pages = args.max_pages();
    let mut progress = Progress::starting(started);
    let mut token: Option<String> = None;
    // Hashes of the tokens seen: a token is up to a page's bytes, its hash 8.
    let hasher = RandomState::new();
    let mut seen = HashSet::new();
    loop {
        let page = walked.pages + 1;
        if page > max_pages as usize {
            return Err(AuditError::MaxPages {
                server: apiserver.server().to_owned(),
                max: max_pages,
                page_size: args.page_size,
            });
        }
        let listed = apiserver::list(apiserver, args.page_size, token.as_deref())
            .await
            .map_err(|error| AuditError::List {
                server: apiserver.server().to_owned(),
                page,
                error,
            })?;
        walked.pages = page;
        // The page's volumes in as few cloud calls as each cloud allows (EBS: 200 per
        // DescribeVolumes); each PV's own lookup is then answered from the cache.
        let identities: Vec<VolumeIdentity> = listed.items.iter().filter_map(identify_pv).collect();
        resolver.prefetch(&identities).await;
        drop(identities);
        let mut findings = Vec::with_capacity(listed.items.len());
        for pv in &listed.items {
            let mut finding = examine(resolver, pv).await;
            if args.fix_labels {
                fix(apiserver, &mut finding, walked).await;
            }
            findings.push(finding);
        }
        drop(listed.items);
        walked.judged += findings.len();
        report.page(&findings).map_err(AuditError::Output)?;
        if let Some(line) = progress.line(Instant::now(), walked.judged, page) {
            eprintln!("{line}");
        }
        token = listed.continue_token;
        let Some(next) = &token else {
            return Ok(());
        };
        if !seen.insert(hasher.hash_one(next)) {
            return Err(AuditError::RepeatedToken {
                server: apiserver.server().to_owned(),
                page,
            });
        }
    }
}

/// With `--fix-labels`: patches `finding`'s missing labels in (not a PV whose labels
/// contradict its disk); a refusal is counted in `walked`, the first kept.
async fn fix(apiserver: &Apiserver, finding: &mut Finding, walked: &mut Walked) {
    if finding.missing_labels.is_empty() || finding.status == Status::Contradicts {
        return;
    }
    // Only metadata.labels: labels are mutable, and nothing else is touched.
    match apiserver::patch_labels(apiserver, &finding.name, &finding.missing_labels, FIELD_MANAGER).await {
        Ok(()) => fixed(finding),
        Err(error) => {
            walked.fix_failed += 1;
            walked.first_fix_failure.get_or_insert_with(|| {
                let mut message = error.to_string();
                if error.is_forbidden() {
                    message.push_str(
                        " (--fix-labels needs `patch` on persistentvolumes: the ClusterRole pv-topology-webhook-audit-fix-labels of manifests/webhook/audit/fix-labels)",
                    );
                }
                (finding.name.clone(), message)
            });
        }
    }
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

/// The exit status for `findings`: 0 when every PV is fine, 2 when one is not.
pub fn exit_code(findings: &[Finding]) -> u8 {
    if findings.iter().all(|f| f.status.is_fine()) {
        0
    } else {
        2
    }
}
