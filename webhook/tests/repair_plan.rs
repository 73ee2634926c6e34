//! `repair`'s decisions, pure (no cluster): the object recreated keeps every field the
//! operator set, field by field; which PVs and claims are refused and why; who writes
//! the topology after the dry run; and the steps from every state of the cluster a
//! killed run can leave, walked to the end. Fixtures: tests/data/webhook/repair/.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use pv_topology_webhook::audit::classify;
use pv_topology_webhook::model::{Resolution, Resolved};
use pv_topology_webhook::repair::plan::{
    JOURNAL_ANNOTATION, Journal, Observed, PROTECTION_FINALIZER, Step, TopologyClaims, Writer, check, next_step,
    recreated, wants_repair, writer,
};
use pv_topology_webhook::resolve::Resolver;
use pv_topology_webhook::rules::Rules;
use pv_topology_webhook::source::{VolumeIdentity, identify_pv};
use pv_topology_webhook::validate::contradictions;
use serde_json::{Value, json};

fn fixture<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let path = format!("{}/../tests/data/webhook/repair/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_slice(&std::fs::read(&path).expect(&path)).expect("a fixture")
}

fn bound_pv() -> PersistentVolume {
    fixture("pv-bound.json")
}

fn bound_claim() -> PersistentVolumeClaim {
    fixture("claim-bound.json")
}

async fn resolved(pv: &PersistentVolume) -> (VolumeIdentity, Resolved) {
    let identity = identify_pv(pv).expect("a GCE PD CSI volume");
    match Resolver::new(Rules::default()).resolve(&identity).await {
        Resolution::Resolved(resolved) => (identity, resolved),
        other => panic!("{other:?}"),
    }
}

fn to_value<T: serde::Serialize>(object: &T) -> Value {
    serde_json::to_value(object).unwrap()
}

#[tokio::test]
async fn the_recreated_pv_keeps_every_field_the_operator_set() {
    let original = bound_pv();
    let (identity, resolved) = resolved(&original).await;
    let (bare, written) = recreated(&original, &identity, &resolved);
    let before = to_value(&original);
    for pv in [&bare, &written] {
        let after = to_value(pv);
        // What the apiserver and controllers own is gone.
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "finalizers",
            "managedFields",
        ] {
            assert!(after["metadata"].get(field).is_none(), "{field}: {after}");
        }
        assert!(after.get("status").is_none(), "{after}");
        assert_eq!(after["metadata"]["name"], "data-db-0");
        assert_eq!(after["metadata"]["annotations"], before["metadata"]["annotations"]);
        assert_eq!(after["metadata"]["labels"]["team"], "payments");
        // The spec, field by field: all but nodeAffinity and the reclaim policy.
        for field in [
            "capacity",
            "accessModes",
            "storageClassName",
            "mountOptions",
            "volumeMode",
            "csi",
        ] {
            assert_eq!(after["spec"][field], before["spec"][field], "spec.{field}");
        }
        assert_eq!(after["spec"]["csi"]["nodePublishSecretRef"]["name"], "pd-secret");
        assert_eq!(after["spec"]["csi"]["controllerExpandSecretRef"]["name"], "pd-expand");
        let mut claim_ref = before["spec"]["claimRef"].clone();
        claim_ref.as_object_mut().unwrap().remove("resourceVersion");
        assert_eq!(after["spec"]["claimRef"], claim_ref, "the same claim, its uid too");
        assert_eq!(after["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        let spec_fields: Vec<&String> = after["spec"].as_object().unwrap().keys().collect();
        let before_fields: Vec<&String> = before["spec"].as_object().unwrap().keys().collect();
        assert!(
            spec_fields.iter().all(|f| before_fields.contains(f)),
            "no field added: {spec_fields:?}"
        );
    }
    // The contradicting beta label and requirement are dropped; the operator's own
    // requirement stays.
    let bare_value = to_value(&bare);
    assert!(
        bare_value["metadata"]["labels"]
            .get("failure-domain.beta.kubernetes.io/zone")
            .is_none()
    );
    assert_eq!(
        bare_value["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"],
        json!([{"matchExpressions": [{"key": "node.example.com/pool", "operator": "In", "values": ["db"]}]}])
    );
    // The written one carries what /mutate would write, beside the operator's requirement.
    let claims = TopologyClaims::of(&written);
    assert_eq!(claims.labels["topology.kubernetes.io/zone"], "europe-west1-b");
    assert_eq!(claims.labels["topology.kubernetes.io/region"], "europe-west1");
    assert_eq!(
        claims.affinity_text(),
        vec!["node.example.com/pool In [db], topology.gke.io/zone In [europe-west1-b]".to_owned()]
    );
    assert!(contradictions(&written, &resolved).is_empty());
}

#[tokio::test]
async fn what_repair_is_for_and_what_it_leaves_alone() {
    let pv = bound_pv();
    let (identity, resolved) = resolved(&pv).await;
    let resolution = Resolution::Resolved(resolved.clone());
    let finding = classify(&pv, Some(&identity), &resolution);
    assert!(
        wants_repair(&finding, &contradictions(&pv, &resolved)).is_ok(),
        "{finding:?}"
    );
    // Written as /mutate would: nothing to repair.
    let (_, written) = recreated(&pv, &identity, &resolved);
    let finding = classify(&written, Some(&identity), &resolution);
    let reason = wants_repair(&finding, &contradictions(&written, &resolved)).unwrap_err();
    assert!(reason.starts_with("nothing to repair"), "{reason}");
    // Only a label contradicts: relabel, not recreate.
    let mut labels_only = written.clone();
    labels_only
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("topology.kubernetes.io/zone".into(), "europe-west1-d".into());
    let finding = classify(&labels_only, Some(&identity), &resolution);
    let reason = wants_repair(&finding, &contradictions(&labels_only, &resolved)).unwrap_err();
    assert!(reason.contains("kubectl label --overwrite pv data-db-0"), "{reason}");
    // A disk that cannot be resolved is left alone, saying why.
    let unresolved = Resolution::NotConfigured { flag: "--gce-lookup" };
    let finding = classify(&pv, Some(&identity), &unresolved);
    let reason = wants_repair(&finding, &[]).unwrap_err();
    assert!(
        reason.starts_with("left alone: ") && reason.contains("--gce-lookup"),
        "{reason}"
    );
}

#[test]
fn a_pv_is_recreated_only_when_bound_to_its_bound_claim_and_unused() {
    let pv = bound_pv();
    let claim = bound_claim();
    assert_eq!(check(&pv, Some(&claim), &[], false), Ok(()));
    let refused = |pv: &PersistentVolume, claim: Option<&PersistentVolumeClaim>, users: &[String]| {
        check(pv, claim, users, false).unwrap_err()
    };
    let users = vec!["db/db-0".to_owned(), "db/backup-x".to_owned()];
    let reason = refused(&pv, Some(&claim), &users);
    assert!(reason.contains("in use by pod(s) db/db-0, db/backup-x"), "{reason}");
    assert!(reason.contains("--allow-in-use"), "{reason}");
    assert_eq!(check(&pv, Some(&claim), &users, true), Ok(()));
    for phase in ["Pending", "Lost"] {
        let mut other = claim.clone();
        other.status.as_mut().unwrap().phase = Some(phase.to_owned());
        let reason = refused(&pv, Some(&other), &[]);
        assert!(
            reason.contains(&format!("claim db/data-db-0 is {phase}, not Bound")),
            "{reason}"
        );
    }
    let reason = refused(&pv, None, &[]);
    assert!(reason.contains("its claim db/data-db-0 does not exist"), "{reason}");
    let mut other = claim.clone();
    other.metadata.uid = Some("another".into());
    assert!(refused(&pv, Some(&other), &[]).contains("not the claim it was bound to"));
    let mut unbound = pv.clone();
    unbound.spec.as_mut().unwrap().claim_ref = None;
    unbound.status.as_mut().unwrap().phase = Some("Available".into());
    let reason = refused(&unbound, None, &[]);
    assert!(reason.starts_with("not bound to a claim (phase Available)"), "{reason}");
}

#[tokio::test]
async fn the_dry_run_says_who_writes_the_topology() {
    let pv = bound_pv();
    let (identity, resolved) = resolved(&pv).await;
    let (bare, written) = recreated(&pv, &identity, &resolved);
    assert_eq!(writer(&bare, &written, &written), Ok(Writer::Webhook));
    assert_eq!(writer(&bare, &written, &bare), Ok(Writer::Repair));
    let mut elsewhere = written.clone();
    elsewhere
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("topology.kubernetes.io/zone".into(), "europe-west1-d".into());
    let reason = writer(&bare, &written, &elsewhere).unwrap_err();
    assert!(reason.contains("europe-west1-d") && reason.contains("run repair with the webhook's topology flags"));
}

/// The cluster as the steps change it, as far as the PV controller and the PV
/// protection controller would.
struct Simulated {
    pv: Option<PersistentVolume>,
    claim: PersistentVolumeClaim,
    journal: Option<Journal>,
    users: Vec<String>,
    next_uid: u32,
    claim_written: bool,
}

impl Simulated {
    fn step(&self) -> Step {
        let journal = self.journal.as_ref().expect("a journal");
        next_step(
            journal,
            &Observed {
                pv: self.pv.as_ref(),
                claim: &self.claim,
                users: &self.users,
                allow_in_use: false,
            },
        )
    }

    /// Does `step`; then lets the controllers act.
    fn apply(&mut self, step: &Step) {
        let journal = self.journal.clone().expect("a journal");
        self.claim_written = matches!(
            step,
            Step::RecordNewPv { .. } | Step::WriteItOurselves | Step::ClearJournal { .. }
        );
        match step {
            Step::Retain => set_policy(self.pv.as_mut().unwrap(), "Retain"),
            Step::RestorePolicy { policy } => set_policy(self.pv.as_mut().unwrap(), policy),
            Step::Delete { uid, .. } => {
                let pv = self.pv.as_mut().unwrap();
                assert_eq!(pv.metadata.uid.as_ref(), Some(uid));
                assert_eq!(
                    pv.spec.as_ref().unwrap().persistent_volume_reclaim_policy.as_deref(),
                    Some("Retain"),
                    "never deleted before Retain"
                );
                pv.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ));
            }
            Step::Unprotect { finalizers, .. } => {
                self.pv.as_mut().unwrap().metadata.finalizers = Some(finalizers.clone());
            }
            Step::Create => {
                let mut pv = journal.create.clone();
                if journal.writer == Writer::Webhook {
                    pv.metadata
                        .labels
                        .get_or_insert_default()
                        .extend(journal.topology.labels.clone());
                    pv.spec.as_mut().unwrap().node_affinity = journal.topology.node_affinity.clone();
                }
                self.next_uid += 1;
                pv.metadata.uid = Some(format!("new-{}", self.next_uid));
                pv.metadata.finalizers = Some(vec![PROTECTION_FINALIZER.to_owned()]);
                pv.status = Some(Default::default());
                self.pv = Some(pv);
            }
            Step::ClearJournal { .. } => self.journal = None,
            Step::WriteItOurselves => self.journal = Some(journal.written_by_repair()),
            Step::RecordNewPv { uid } => {
                self.journal = Some(Journal {
                    new_uid: Some(uid.clone()),
                    ..journal
                })
            }
            Step::WaitBound | Step::WaitGone { .. } | Step::Stuck(_) => {}
        }
        self.controllers();
    }

    fn controllers(&mut self) {
        let claim_uid = self.claim.metadata.uid.clone();
        // The external-provisioner takes its finalizer off a PV that is to be retained.
        if let Some(pv) = self.pv.as_mut()
            && pv.spec.as_ref().unwrap().persistent_volume_reclaim_policy.as_deref() == Some("Retain")
            && let Some(finalizers) = pv.metadata.finalizers.as_mut()
        {
            finalizers.retain(|f| f != PROVISIONER_FINALIZER);
        }
        match self.pv.as_mut() {
            // Gone once no finalizer is left.
            Some(pv)
                if pv.metadata.deletion_timestamp.is_some()
                    && pv.metadata.finalizers.as_ref().is_none_or(Vec::is_empty) =>
            {
                self.pv = None;
                self.claim.status.as_mut().unwrap().phase = Some("Lost".into());
            }
            // The binder: a PV whose claimRef names the claim is bound at once; the
            // claim (Lost while the PV was away) when an update of it makes the
            // binder sync it (else at its resync, not modelled).
            Some(pv) if pv.spec.as_ref().unwrap().claim_ref.as_ref().unwrap().uid == claim_uid => {
                pv.status.get_or_insert_default().phase = Some("Bound".into());
                if self.claim_written {
                    self.claim.status.as_mut().unwrap().phase = Some("Bound".into());
                }
            }
            _ => {}
        }
    }
}

const PROVISIONER_FINALIZER: &str = "external-provisioner.volume.kubernetes.io/finalizer";

fn set_policy(pv: &mut PersistentVolume, policy: &str) {
    pv.spec.as_mut().unwrap().persistent_volume_reclaim_policy = Some(policy.to_owned());
}

async fn journal(writer: Writer) -> Journal {
    let pv = bound_pv();
    let (identity, resolved) = resolved(&pv).await;
    let (bare, written) = recreated(&pv, &identity, &resolved);
    Journal::new(&pv, writer, bare, written)
}

/// Walks the steps from `cluster` to the end; the steps taken.
fn walk(cluster: &mut Simulated) -> Vec<String> {
    let mut taken = Vec::new();
    for _ in 0..20 {
        if cluster.journal.is_none() {
            return taken;
        }
        let step = cluster.step();
        taken.push(format!("{step:?}").split([' ', '{', '(']).next().unwrap().to_owned());
        if let Step::Stuck(reason) = &step {
            panic!("stuck: {reason} after {taken:?}");
        }
        cluster.apply(&step);
    }
    panic!("no end: {taken:?}");
}

#[tokio::test]
async fn from_every_state_a_rerun_can_meet_the_steps_end_bound_repaired_and_with_the_policy_back() {
    for writer in [Writer::Repair, Writer::Webhook] {
        let journal = journal(writer).await;
        let fresh = || Simulated {
            pv: Some(bound_pv()),
            claim: bound_claim(),
            journal: Some(journal.clone()),
            users: Vec::new(),
            next_uid: 0,
            claim_written: false,
        };
        let mut cluster = fresh();
        let taken = walk(&mut cluster);
        assert_eq!(
            taken,
            [
                "Retain",
                "Delete",
                "Unprotect",
                "Create",
                "RecordNewPv",
                "RestorePolicy",
                "ClearJournal"
            ],
            "{writer:?}"
        );
        // Each state along the way, as a killed run leaves it, ends the same.
        let mut states = vec![fresh()];
        let mut cluster = fresh();
        while cluster.journal.is_some() {
            let step = cluster.step();
            cluster.apply(&step);
            states.push(Simulated {
                pv: cluster.pv.clone(),
                claim: cluster.claim.clone(),
                journal: cluster.journal.clone(),
                users: Vec::new(),
                next_uid: cluster.next_uid,
                claim_written: false,
            });
        }
        for mut state in states {
            walk(&mut state);
            let pv = state.pv.as_ref().expect("a PV at the end");
            assert!(pv.metadata.uid.as_deref().unwrap().starts_with("new-"));
            assert_eq!(TopologyClaims::of(pv), journal.topology);
            assert_eq!(
                pv.spec.as_ref().unwrap().persistent_volume_reclaim_policy.as_deref(),
                Some("Delete")
            );
            assert_eq!(state.claim.status.as_ref().unwrap().phase.as_deref(), Some("Bound"));
        }
    }
}

#[tokio::test]
async fn a_finalizer_of_another_controller_is_waited_for_never_taken_off() {
    let journal = journal(Writer::Repair).await;
    let mut pv = bound_pv();
    set_policy(&mut pv, "Retain");
    pv.metadata.finalizers = Some(vec![PROVISIONER_FINALIZER.to_owned()]);
    pv.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    let claim = bound_claim();
    let observed = Observed {
        pv: Some(&pv),
        claim: &claim,
        users: &[],
        allow_in_use: false,
    };
    assert_eq!(
        next_step(&journal, &observed),
        Step::WaitGone {
            finalizers: vec![PROVISIONER_FINALIZER.to_owned()]
        }
    );
    // A PV being deleted whose policy is not Retain is never touched.
    let mut deleting = pv.clone();
    set_policy(&mut deleting, "Delete");
    let observed = Observed {
        pv: Some(&deleting),
        ..observed
    };
    assert!(matches!(next_step(&journal, &observed), Step::Stuck(reason) if reason.contains("not touched")));
}

#[tokio::test]
async fn pods_arriving_before_the_delete_put_everything_back() {
    let journal = journal(Writer::Repair).await;
    let mut cluster = Simulated {
        pv: Some(bound_pv()),
        claim: bound_claim(),
        journal: Some(journal),
        users: Vec::new(),
        next_uid: 0,
        claim_written: false,
    };
    let step = cluster.step();
    assert_eq!(step, Step::Retain);
    cluster.apply(&step);
    cluster.users = vec!["db/db-0".into()];
    let taken = walk(&mut cluster);
    assert_eq!(taken, ["RestorePolicy", "ClearJournal"]);
    let pv = cluster.pv.as_ref().unwrap();
    assert_eq!(pv.metadata.uid, bound_pv().metadata.uid, "the same PV, untouched");
    assert_eq!(
        pv.spec.as_ref().unwrap().persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
}

#[tokio::test]
async fn a_webhook_that_writes_something_else_than_the_dry_run_hands_over_to_repair() {
    let journal = journal(Writer::Webhook).await;
    let mut cluster = Simulated {
        pv: None,
        claim: bound_claim(),
        journal: Some(journal.clone()),
        users: Vec::new(),
        next_uid: 0,
        claim_written: false,
    };
    // The new PV as a changed webhook wrote it: no topology at all.
    let mut created = journal.create.clone();
    created.metadata.uid = Some("new-wrong".into());
    created.metadata.finalizers = Some(vec![PROTECTION_FINALIZER.to_owned()]);
    created.status = Some(Default::default());
    cluster.pv = Some(created);
    cluster.controllers();
    let taken = walk(&mut cluster);
    assert_eq!(
        taken,
        [
            "WriteItOurselves",
            "Delete",
            "Unprotect",
            "Create",
            "RecordNewPv",
            "RestorePolicy",
            "ClearJournal"
        ]
    );
    assert_eq!(TopologyClaims::of(cluster.pv.as_ref().unwrap()), journal.topology);
}

#[tokio::test]
async fn the_journal_is_read_back_from_the_claim_and_a_foreign_one_is_named() {
    let journal = journal(Writer::Repair).await;
    let mut claim = bound_claim();
    claim
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(JOURNAL_ANNOTATION.into(), journal.encode().unwrap());
    assert_eq!(Journal::on(&claim), Ok(Some(journal)));
    claim
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(JOURNAL_ANNOTATION.into(), "{\"something\": 1}".into());
    let error = Journal::on(&claim).unwrap_err();
    assert!(
        error.starts_with("claim db/data-db-0: annotation repair.pv-topology-webhook.io/journal"),
        "{error}"
    );
    assert_eq!(Journal::on(&bound_claim()), Ok(None));
}
