//! The manifests of issue 16 under manifests/webhook/: the ValidatingWebhookConfiguration
//! sends PV CREATEs and UPDATEs to `/validate` on the mutating webhook's Service, scoped
//! as the mutating one is; the audit Job (audit/job/, rendered by kustomize) runs a
//! command line `pv-topology-webhook audit` accepts, as the read-only ServiceAccount of
//! audit/.

use clap::Parser as _;
use pv_topology_webhook::cli::{Cli, Command, ReportFormat};
use serde::Deserialize as _;
use serde_json::{Value, json};

mod manifests_support;
use manifests_support::*;

#[test]
fn the_validating_webhook_configuration_is_the_mutating_ones_twin_on_validate() {
    let objects = base();
    let config = &objects["ValidatingWebhookConfiguration/pv-topology-webhook"];
    let mutating = &objects["MutatingWebhookConfiguration/pv-topology-webhook"];
    let webhooks = config["webhooks"].as_array().expect("webhooks");
    assert_eq!(webhooks.len(), 1, "{webhooks:?}");
    let webhook = &webhooks[0];
    let twin = &mutating["webhooks"][0];
    assert_eq!(webhook["name"], "validate.pv-topology-webhook.io");
    assert_ne!(webhook["name"], twin["name"]);

    // The same server, on /validate.
    let service = &webhook["clientConfig"]["service"];
    assert_eq!(service["path"], "/validate");
    for field in ["name", "namespace", "port"] {
        assert_eq!(service[field], twin["clientConfig"]["service"][field], "{field}");
    }
    let svc = &objects[&format!("Service/{}", service["name"].as_str().expect("a Service name"))];
    assert_eq!(svc["metadata"]["namespace"], service["namespace"]);
    assert_eq!(svc["spec"]["ports"][0]["port"], service["port"]);
    assert_eq!(
        config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        mutating["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    );
    assert!(config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].is_string());

    // PV CREATE and UPDATE (a label UPDATE can contradict the disk too).
    let rules = webhook["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!(
        rules[0],
        json!({
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["persistentvolumes"],
            "scope": "Cluster"
        })
    );
    // Ignore: every PV UPDATE (the PV controller's too) goes through it; read-only.
    assert_eq!(webhook["failurePolicy"], "Ignore");
    assert_eq!(webhook["sideEffects"], "None");
    assert_eq!(webhook["admissionReviewVersions"], json!(["v1"]));
    // The same PVs reach both: the opt-out label and the handled sources.
    for field in ["objectSelector", "matchConditions", "matchPolicy", "timeoutSeconds"] {
        assert!(!webhook[field].is_null(), "{field} unset");
        assert_eq!(webhook[field], twin[field], "{field}");
    }
    assert!(webhook.get("reinvocationPolicy").is_none(), "a mutating field");
}

/// `kustomize` output as objects by `Kind/name`.
fn rendered(dir: &str) -> std::collections::BTreeMap<String, Value> {
    serde_yaml_ng::Deserializer::from_str(&render(&manifests_dir().join(dir)))
        .map(|doc| Value::deserialize(doc).expect("kustomize prints YAML"))
        .map(|o| {
            let key = format!(
                "{}/{}",
                o["kind"].as_str().expect("kind"),
                o["metadata"]["name"].as_str().expect("name")
            );
            (key, o)
        })
        .collect()
}

#[test]
fn the_audit_job_runs_a_valid_read_only_audit_as_the_audit_account() {
    let job_objects = rendered("audit/job");
    assert_eq!(
        job_objects.keys().collect::<Vec<_>>(),
        ["Job/pv-topology-webhook-audit"],
        "audit/job renders one Job"
    );
    let job = &job_objects["Job/pv-topology-webhook-audit"];
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    // The audit reads the apiserver with the account's token.
    assert_ne!(pod["automountServiceAccountToken"], false);
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1);
    let container = &containers[0];
    // The image's entrypoint is the binary: args alone.
    assert!(container.get("command").is_none(), "{container}");
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string argument"))
        .collect();
    let cli = Cli::try_parse_from(std::iter::once("pv-topology-webhook").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("the Job's args {args:?}: {e}"));
    let Command::Audit(audit) = cli.command else {
        panic!("the Job does not run audit: {args:?}");
    };
    assert_eq!(
        audit.output,
        ReportFormat::Json,
        "the report in the Job's log, for tools"
    );
    assert!(!audit.fix_labels, "the read-only account cannot patch PVs");
    assert!(
        audit.cluster.kubeconfig.is_none(),
        "in-cluster: the pod's ServiceAccount"
    );
    // The Job ends even if the audit cannot: its deadline is past the audit's own, so
    // the audit's line naming what was slow comes first.
    let job_deadline = job["spec"]["activeDeadlineSeconds"]
        .as_u64()
        .expect("activeDeadlineSeconds");
    assert!(
        job_deadline > audit.deadline.as_secs() + 60,
        "activeDeadlineSeconds {job_deadline} leaves the audit's --deadline {:?} a minute",
        audit.deadline
    );

    // The account it runs as is audit/'s, bound to a role that only reads PVs.
    let audit_objects = rendered("audit");
    let account_name = pod["serviceAccountName"].as_str().expect("serviceAccountName");
    let account = &audit_objects[&format!("ServiceAccount/{account_name}")];
    assert_eq!(account["metadata"]["namespace"], job["metadata"]["namespace"]);
    let bindings: Vec<&Value> = audit_objects
        .values()
        .filter(|o| o["kind"] == "ClusterRoleBinding")
        .filter(|b| {
            b["subjects"].as_array().into_iter().flatten().any(|s| {
                s["kind"] == "ServiceAccount"
                    && s["name"] == account_name
                    && s["namespace"] == account["metadata"]["namespace"]
            })
        })
        .collect();
    assert_eq!(bindings.len(), 1, "one binding of {account_name}: {bindings:?}");
    let role_ref = &bindings[0]["roleRef"];
    assert_eq!(role_ref["kind"], "ClusterRole");
    let role = &audit_objects[&format!("ClusterRole/{}", role_ref["name"].as_str().expect("a role"))];
    let rules = role["rules"].as_array().expect("rules");
    assert!(!rules.is_empty());
    for rule in rules {
        assert_eq!(rule["apiGroups"], json!([""]), "{rule}");
        assert_eq!(rule["resources"], json!(["persistentvolumes"]), "{rule}");
        for verb in rule["verbs"].as_array().expect("verbs") {
            assert!(
                ["get", "list"].contains(&verb.as_str().expect("a verb")),
                "{} may {verb}: not read-only",
                role_ref["name"]
            );
        }
    }
    // The patch role is apart (fix-labels/), for --fix-labels only.
    assert!(
        audit_objects
            .values()
            .all(|o| o["metadata"]["name"] != "pv-topology-webhook-audit-fix-labels"),
        "audit/ grants the fix-labels role"
    );
    assert!(manifests_dir().join("audit/fix-labels/kustomization.yaml").exists());
}
