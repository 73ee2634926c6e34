//! `pv-topology-webhook repair`: gives bound PVs the nodeAffinity they lack (or that
//! contradicts their disk) the only way a PV's nodeAffinity can change: a new PV
//! object of the same name, on the same disk, bound to the same claim. Per PV, from
//! [`plan`]'s pure decisions: the journal is written on the claim first; the reclaim
//! policy is set to Retain and read back before anything is deleted; the PV is deleted
//! (its protection finalizer taken off: the claim keeps it bound until then) and
//! created again, its topology written by the webhook (when a dry run shows the
//! webhook writes what repair would) or by repair; the PV controller binds it to the
//! claim (the claim is never deleted; its `Lost` while the PV is away is undone by the
//! binding); the reclaim policy is given back; the journal goes once the PV is Bound
//! with its topology. A rerun after a kill at any point reads the journal and the
//! cluster and goes on from there.

use std::io::Write;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use serde_json::json;
use thiserror::Error;

use crate::apiserver::{self, ApiError, Apiserver, ConnectError};
use crate::audit::classify;
use crate::cli::{RepairArgs, Selection};
use crate::model::Resolution;
use crate::resolve::Resolver;
use crate::source::identify_pv;
use crate::validate::contradictions;

pub mod cluster;
pub mod plan;
pub mod report;

use self::cluster::{Cluster, PAUSE_VARIABLE};
use self::plan::{Journal, Observed, Step, check, next_step, recreated, wants_repair};
pub use self::report::{Row, RowStatus};

/// How often the controllers' work is looked at while waiting for it.
const POLL: Duration = Duration::from_millis(500);
/// The most requests that change something in one PV's repair (a handful are needed;
/// conflicts with other writers are tried again up to this).
const MAX_STEPS: usize = 24;

/// Why `repair` could not finish; each names the server, the PV or the variable.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RepairError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// `--pv` and `--all`: neither, or both.
    #[error("{0}")]
    Selection(&'static str),
    #[error("{PAUSE_VARIABLE}: {0:?} is not a number of API calls")]
    Pause(String),
    #[error("{server}: {what}: {error}{}", permission_hint(error))]
    Api {
        server: String,
        what: String,
        error: ApiError,
    },
    #[error("cannot write the report: {0}")]
    Output(#[source] std::io::Error),
}

/// The error of a request to `cluster`, `what` saying which.
fn failed(cluster: &Cluster, what: String) -> impl FnOnce(ApiError) -> RepairError {
    let server = cluster.server().to_owned();
    move |error| RepairError::Api { server, what, error }
}

fn permission_hint(error: &ApiError) -> &'static str {
    if error.is_forbidden() {
        " (repair needs the ClusterRole pv-topology-webhook-repair of manifests/webhook/repair)"
    } else {
        ""
    }
}

/// The whole of `repair`: unfinished repairs first, then the PVs selected; the plan
/// (without `--apply`) or the results, a row per PV. The exit status: 0 when no PV
/// was left alone, 2 when one was.
pub async fn run(args: &RepairArgs, resolver: &Resolver, out: impl Write) -> Result<u8, RepairError> {
    let pause_after = match std::env::var(PAUSE_VARIABLE) {
        Ok(text) => Some(text.trim().parse::<u64>().map_err(|_| RepairError::Pause(text))?),
        Err(_) => None,
    };
    let selection = args.selection().map_err(RepairError::Selection)?;
    let all = selection == Selection::All;
    // Said before anything else, whatever happens next.
    if !args.apply {
        eprintln!("repair: the plan only: nothing is changed (--apply repairs)");
    }
    if args.allow_in_use {
        eprintln!(
            "repair: --allow-in-use: a claim used by pods does not stop its PV's repair; the pods keep their mounts"
        );
    }
    let config = apiserver::config(&args.cluster).await?;
    let cluster = &Cluster::new(Apiserver::new(config, args.cluster.request_timeout)?, pause_after);
    let mut report = report::Report::new(out, args.output);

    // Unfinished repairs: their PV may be gone, only the claim knows of them.
    let mut done = Vec::new();
    for (namespace, name, journal) in cluster
        .unfinished()
        .await
        .map_err(failed(cluster, "cannot list PersistentVolumeClaims".to_owned()))?
    {
        let journal = match journal {
            Ok(journal) => journal,
            Err(reason) => {
                report.row(&Row::stuck(String::new(), format!("{namespace}/{name}"), reason))?;
                continue;
            }
        };
        if !all && !args.pv.contains(&journal.pv) {
            eprintln!(
                "repair: PV {} has an unfinished repair (claim {namespace}/{name}): rerun with --pv {} or --all",
                journal.pv, journal.pv
            );
            continue;
        }
        done.push(journal.pv.clone());
        let row = if args.apply {
            finish(cluster, args, &namespace, &name).await?
        } else {
            Row::planned_resume(&journal, format!("{namespace}/{name}"))
        };
        report.row(&row)?;
    }

    let mut selected: Vec<String> = args.pv.iter().filter(|n| !done.contains(n)).cloned().collect();
    if all {
        selected = select_all(cluster, resolver, &done).await?;
    }
    for name in selected {
        let row = repair_one(cluster, args, resolver, &name).await?;
        report.row(&row)?;
    }
    report.finish()
}

/// Every PV `audit` would report as missing-affinity or contradicting its disk through
/// its nodeAffinity, and every unresolvable one (left alone, with the reason), less
/// those in `done`.
async fn select_all(cluster: &Cluster, resolver: &Resolver, done: &[String]) -> Result<Vec<String>, RepairError> {
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    for page in 1..=cluster::MAX_PAGES {
        let listed = cluster
            .pvs(token.as_deref())
            .await
            .map_err(failed(cluster, format!("cannot list PersistentVolumes (page {page})")))?;
        for pv in &listed.items {
            let name = pv.metadata.name.clone().unwrap_or_default();
            if done.contains(&name) {
                continue;
            }
            let Some(identity) = identify_pv(pv) else {
                continue;
            };
            let resolution = resolver.resolve(&identity).await;
            let finding = classify(pv, Some(&identity), &resolution);
            let wrong = match &resolution {
                Resolution::Resolved(resolved) => contradictions(pv, resolved),
                _ => Vec::new(),
            };
            if wants_repair(&finding, &wrong).is_ok() || finding.status == crate::audit::Status::Unresolvable {
                names.push(name);
            }
        }
        token = listed.continue_token;
        if token.is_none() {
            return Ok(names);
        }
    }
    Err(failed(cluster, "cannot list PersistentVolumes".to_owned())(
        ApiError::Transport(format!("more than {} pages", cluster::MAX_PAGES)),
    ))
}

/// The plan for PV `name`, and with `--apply` its repair.
async fn repair_one(cluster: &Cluster, args: &RepairArgs, resolver: &Resolver, name: &str) -> Result<Row, RepairError> {
    let Some(pv) = cluster
        .pv(name)
        .await
        .map_err(failed(cluster, format!("cannot read PV {name}")))?
    else {
        return Ok(Row::left_alone(
            name,
            None,
            "no PersistentVolume of that name".to_owned(),
        ));
    };
    let claim_ref = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    let claim_at = claim_ref.map(|r| {
        (
            r.namespace.clone().unwrap_or_default(),
            r.name.clone().unwrap_or_default(),
        )
    });
    let claim_text = claim_at.as_ref().map(|(ns, n)| format!("{ns}/{n}"));
    let Some(identity) = identify_pv(&pv) else {
        return Ok(Row::left_alone(
            name,
            claim_text,
            "left alone: not a volume the webhook handles".to_owned(),
        ));
    };
    let resolution = resolver.resolve(&identity).await;
    let finding = classify(&pv, Some(&identity), &resolution);
    let Resolution::Resolved(resolved) = &resolution else {
        return Ok(Row::left_alone(
            name,
            claim_text,
            format!("left alone: {}", finding.detail),
        ));
    };
    if let Err(reason) = wants_repair(&finding, &contradictions(&pv, resolved)) {
        return Ok(match finding.status {
            crate::audit::Status::Fine | crate::audit::Status::MissingLabels | crate::audit::Status::LabelsFixed => {
                Row::nothing_to_do(name, claim_text, reason)
            }
            _ => Row::left_alone(name, claim_text, reason),
        });
    }
    let (claim, users) = match &claim_at {
        Some((namespace, claim_name)) => {
            let claim = cluster
                .claim(namespace, claim_name)
                .await
                .map_err(failed(cluster, format!("cannot read claim {namespace}/{claim_name}")))?;
            let users = cluster.users(namespace, claim_name).await.map_err(failed(
                cluster,
                format!("cannot list the pods of namespace {namespace}"),
            ))?;
            (claim, users)
        }
        None => (None, Vec::new()),
    };
    if let Err(reason) = check(&pv, claim.as_ref(), &users, args.allow_in_use) {
        return Ok(Row::left_alone(name, claim_text, reason).with_pods(users));
    }
    let (Some(claim), Some((namespace, claim_name))) = (claim, claim_at) else {
        // check refuses a PV without its claim; said so all the same.
        return Ok(Row::left_alone(name, claim_text, "its claim cannot be read".to_owned()));
    };
    let (bare, written) = recreated(&pv, &identity, resolved);
    let mut probe = bare.clone();
    probe.metadata.name = None;
    probe.metadata.generate_name = Some("pv-topology-webhook-repair-check-".to_owned());
    let admitted = match cluster.dry_run(&probe).await {
        Ok(admitted) => admitted,
        // A webhook refusing it (or failing with failurePolicy Fail) would refuse the
        // real creation too: this PV is left alone, the others go on.
        Err(error) if error.to_string().contains("admission webhook") => {
            return Ok(Row::left_alone(
                name,
                claim_text,
                format!("the cluster's admission refuses the PV without its topology in a dry run: {error}"),
            ));
        }
        Err(error) => {
            return Err(failed(cluster, format!("cannot dry-run the creation of PV {name}"))(
                error,
            ));
        }
    };
    let writer = match plan::writer(&bare, &written, &admitted) {
        Ok(writer) => writer,
        Err(reason) => return Ok(Row::left_alone(name, claim_text, reason)),
    };
    let journal = Journal::new(&pv, writer, bare, written);
    let text = match journal.encode() {
        Ok(text) => text,
        Err(reason) => return Ok(Row::left_alone(name, claim_text, reason)),
    };
    if !args.apply {
        return Ok(Row::planned(&journal, claim_text.unwrap_or_default()).with_pods(users));
    }
    cluster
        .set_journal(
            &namespace,
            &claim_name,
            Some(&text),
            claim.metadata.resource_version.as_deref(),
        )
        .await
        .map_err(failed(
            cluster,
            format!("cannot write the journal on claim {namespace}/{claim_name}"),
        ))?;
    finish(cluster, args, &namespace, &claim_name).await
}

/// Carries out the repair journaled on claim `namespace/name`, from wherever it is.
async fn finish(cluster: &Cluster, args: &RepairArgs, namespace: &str, name: &str) -> Result<Row, RepairError> {
    let claim_text = format!("{namespace}/{name}");
    let mut steps = 0;
    let mut waiting: Option<(Step, tokio::time::Instant)> = None;
    let mut last_journal: Option<Journal> = None;
    let mut outcome: Option<bool> = None;
    loop {
        let claim: PersistentVolumeClaim = match cluster
            .claim(namespace, name)
            .await
            .map_err(failed(cluster, format!("cannot read claim {claim_text}")))?
        {
            Some(claim) => claim,
            None => {
                let pv = last_journal.as_ref().map(|j| j.pv.clone()).unwrap_or_default();
                return Ok(Row::stuck(
                    pv,
                    claim_text,
                    "the claim is gone: the repair cannot go on".to_owned(),
                ));
            }
        };
        let journal = match Journal::on(&claim) {
            Ok(Some(journal)) => journal,
            Ok(None) => {
                let pv = last_journal.as_ref().map(|j| j.pv.clone()).unwrap_or_default();
                return Ok(match (outcome, last_journal) {
                    (Some(true), Some(journal)) => Row::repaired(&journal, claim_text),
                    (Some(false), _) => Row::left_alone(
                        &pv,
                        Some(claim_text),
                        "pods started using the claim during the repair: everything put back (stop them, then run repair again)"
                            .to_owned(),
                    ),
                    _ => Row::nothing_to_do(&pv, Some(claim_text), "the repair was finished by another run".to_owned()),
                });
            }
            Err(reason) => return Ok(Row::stuck(String::new(), claim_text, reason)),
        };
        let pv: Option<PersistentVolume> = cluster
            .pv(&journal.pv)
            .await
            .map_err(failed(cluster, format!("cannot read PV {}", journal.pv)))?;
        let original_alive = pv.as_ref().is_some_and(|pv| {
            pv.metadata.uid.as_deref() == Some(journal.original_uid.as_str())
                && pv.metadata.deletion_timestamp.is_none()
        });
        let users = if original_alive && !args.allow_in_use {
            cluster.users(namespace, name).await.map_err(failed(
                cluster,
                format!("cannot list the pods of namespace {namespace}"),
            ))?
        } else {
            Vec::new()
        };
        let step = next_step(
            &journal,
            &Observed {
                pv: pv.as_ref(),
                claim: &claim,
                users: &users,
                allow_in_use: args.allow_in_use,
            },
        );
        let pv_name = journal.pv.clone();
        last_journal = Some(journal.clone());
        let is_wait = matches!(step, Step::WaitBound | Step::WaitGone { .. });
        if is_wait {
            let since = match &waiting {
                Some((waited, since)) if *waited == step => *since,
                _ => tokio::time::Instant::now(),
            };
            if since.elapsed() > args.wait {
                let what = match &step {
                    Step::WaitGone { finalizers } => format!(
                        "PV {pv_name} is still there after --wait {}: finalizers {} remain (their controllers did not take them off)",
                        cloud_access::go_duration::format(args.wait),
                        finalizers.join(", ")
                    ),
                    _ => format!(
                        "PV {pv_name} and claim {claim_text} are not both Bound after --wait {} (is kube-controller-manager's PV binder running?); the journal is kept: run repair again",
                        cloud_access::go_duration::format(args.wait)
                    ),
                };
                return Ok(Row::stuck(pv_name, claim_text, what));
            }
            waiting = Some((step, since));
            tokio::time::sleep(POLL).await;
            continue;
        }
        waiting = None;
        steps += 1;
        if steps > MAX_STEPS {
            return Ok(Row::stuck(
                pv_name,
                claim_text,
                format!(
                    "no progress after {MAX_STEPS} changes (another writer?); the journal is kept: run repair again"
                ),
            ));
        }
        // A conflict (the object changed since it was read) is read again and decided anew.
        let result = match &step {
            Step::Retain => cluster
                .patch_pv(&pv_name, &retain_patch(pv.as_ref(), plan::RETAIN))
                .await
                .map(drop),
            Step::RestorePolicy { policy } => cluster
                .patch_pv(&pv_name, &retain_patch(pv.as_ref(), policy))
                .await
                .map(drop),
            Step::Delete { uid, resource_version } => cluster.delete_pv(&pv_name, uid, resource_version).await,
            Step::Unprotect {
                resource_version,
                finalizers,
            } => cluster
                .patch_pv(
                    &pv_name,
                    &json!({"metadata": {"resourceVersion": resource_version, "finalizers": finalizers}}),
                )
                .await
                .map(drop),
            Step::Create => match cluster.create(&journal.create).await {
                Err(error) if error.is_conflict() => Ok(()),
                other => other.map(drop),
            },
            Step::RecordNewPv { uid } => {
                let recorded = Journal {
                    new_uid: Some(uid.clone()),
                    ..journal.clone()
                };
                let text = match recorded.encode() {
                    Ok(text) => text,
                    Err(reason) => return Ok(Row::stuck(pv_name, claim_text, reason)),
                };
                cluster
                    .set_journal(namespace, name, Some(&text), claim.metadata.resource_version.as_deref())
                    .await
            }
            Step::WriteItOurselves => {
                let mine = journal.written_by_repair();
                let text = match mine.encode() {
                    Ok(text) => text,
                    Err(reason) => return Ok(Row::stuck(pv_name, claim_text, reason)),
                };
                cluster
                    .set_journal(namespace, name, Some(&text), claim.metadata.resource_version.as_deref())
                    .await
            }
            Step::ClearJournal { done } => {
                outcome = Some(*done);
                cluster
                    .set_journal(namespace, name, None, claim.metadata.resource_version.as_deref())
                    .await
            }
            Step::Stuck(reason) => return Ok(Row::stuck(pv_name, claim_text, reason.clone())),
            Step::WaitBound | Step::WaitGone { .. } => Ok(()),
        };
        match result {
            Ok(()) => {}
            Err(error) if error.is_conflict() || error.is_not_found() => {}
            Err(error) => return Err(failed(cluster, format!("PV {pv_name}: {}", step_name(&step)))(error)),
        }
    }
}

/// A merge patch of the reclaim policy, conditional on the PV read.
fn retain_patch(pv: Option<&PersistentVolume>, policy: &str) -> serde_json::Value {
    let mut patch = json!({"spec": {"persistentVolumeReclaimPolicy": policy}});
    if let Some(version) = pv.and_then(|pv| pv.metadata.resource_version.as_deref()) {
        patch["metadata"] = json!({"resourceVersion": version});
    }
    patch
}

fn step_name(step: &Step) -> &'static str {
    match step {
        Step::Retain => "cannot set its reclaim policy to Retain",
        Step::RestorePolicy { .. } => "cannot give back its reclaim policy",
        Step::Delete { .. } => "cannot delete it",
        Step::Unprotect { .. } => "cannot take its protection finalizer off",
        Step::Create => "cannot create it again",
        Step::WriteItOurselves | Step::RecordNewPv { .. } | Step::ClearJournal { .. } => {
            "cannot write the journal on its claim"
        }
        Step::WaitBound | Step::WaitGone { .. } | Step::Stuck(_) => "waiting",
    }
}
