//! The install without cert-manager (docs/webhook.md, issue 25 item 3), on
//! validation.rs's cluster: `certs` (for 127.0.0.1 too, as the apiserver reaches the
//! webhook there), the ConfigMap and kustomization the docs write, rendered by the
//! real kustomize with the component `manifests/webhook/components/no-cert-manager`,
//! and every rendered object applied to the real kube-apiserver, with the TLS Secret
//! `kubectl create secret tls` makes. Only the two configurations' `clientConfig.service`
//! becomes `clientConfig.url` (no pod runs here); their caBundle and failurePolicy are
//! the render's. `/validate` (failurePolicy Ignore: with no caBundle it would pass
//! everything) refuses a PV that contradicts its disk, and `/mutate` labels one.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cluster_harness::webhook::{Webhook, certs};
use cluster_harness::{cluster_bin, run_ok, workspace_root};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::{PersistentVolume, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::discovery::{Discovery, Scope};
use serde::Deserialize as _;
use serde_json::{Value, json};

use crate::common::*;

const NAMESPACE: &str = "pv-topology-webhook";
const SECRET: &str = "pv-topology-webhook-tls";

/// The documented kustomization: the base, the caBundle's ConfigMap, the component.
fn write_install(dir: &Path, ca_bundle: &str) -> std::path::PathBuf {
    std::os::unix::fs::symlink(workspace_root().join("manifests"), dir.join("manifests")).expect("a symlink");
    let install = dir.join("webhook-install");
    std::fs::create_dir(&install).expect("webhook-install");
    std::fs::write(
        install.join("ca-bundle.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pv-topology-webhook-ca-bundle\ndata:\n  caBundle: {ca_bundle}\n"
        ),
    )
    .expect("ca-bundle.yaml");
    std::fs::write(
        install.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../manifests/webhook\n  - ca-bundle.yaml\ncomponents:\n  - ../{}\n",
            pv_topology_webhook::certs::NO_CERT_MANAGER_COMPONENT
        ),
    )
    .expect("kustomization.yaml");
    install
}

/// The render's two webhook configurations pointed at `webhook` by URL, the path of
/// each `clientConfig.service` kept; the caBundle checked and kept.
fn routed_to(object: &mut Value, webhook: &Webhook, ca_bundle: &str) {
    let port_url = webhook.url();
    let base = port_url.trim_end_matches("/mutate");
    for each in object["webhooks"].as_array_mut().expect("webhooks") {
        let client = &mut each["clientConfig"];
        assert_eq!(client["caBundle"], ca_bundle, "the component set the caBundle");
        let path = client["service"]["path"].as_str().expect("a service path").to_owned();
        *client = json!({"url": format!("{base}{path}"), "caBundle": client["caBundle"].clone()});
    }
}

/// Runs after validation.rs's own checks, its webhook stopped: replaces its
/// configurations with the render's.
pub async fn the_component_s_render_validates_and_mutates(client: &kube::Client) {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let certs_dir = dir.path().join("webhook-certs");
    let (_, ca_bundle) = certs(&certs_dir);
    let install = write_install(dir.path(), &ca_bundle);
    let out = run_ok(Command::new(cluster_bin("kustomize-render")).arg(&install)).expect("kustomize-render");
    let mut objects: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&String::from_utf8_lossy(&out.stdout))
        .map(|doc| Value::deserialize(doc).expect("rendered YAML"))
        .collect();
    for object in &objects {
        let what = format!("{} {}", object["kind"], object["metadata"]["name"]);
        assert!(
            !object["apiVersion"]
                .as_str()
                .expect("apiVersion")
                .starts_with("cert-manager.io/"),
            "{what}: cert-manager's object left"
        );
        assert!(
            object["metadata"]["annotations"]
                .get("cert-manager.io/inject-ca-from")
                .is_none(),
            "{what}: inject-ca-from left"
        );
        assert_ne!(
            object["metadata"]["name"], "pv-topology-webhook-ca-bundle",
            "the local ConfigMap is applied"
        );
    }
    // The old configurations go first, so that only the render's can answer.
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    for name in [cluster_harness::webhook::CONFIGURATION] {
        let _ = mutating.delete(name, &DeleteParams::default()).await;
        let _ = validating.delete(name, &DeleteParams::default()).await;
    }

    let webhook = Webhook::start(&certs_dir.join("tls.crt"), &certs_dir.join("tls.key"), &[], &[]);
    let mut routed = 0;
    for object in &mut objects {
        if object["apiVersion"] == "admissionregistration.k8s.io/v1" {
            routed_to(object, &webhook, &ca_bundle);
            routed += 1;
        }
    }
    assert_eq!(routed, 2, "both configurations rendered");
    // Namespace first, then the rest, as `kubectl apply -k` orders them.
    objects.sort_by_key(|o| o["kind"] != "Namespace");
    let discovery = Discovery::new(client.clone()).run().await.expect("discovery");
    let apply = PatchParams::apply("no-cert-manager-test").force();
    for (n, object) in objects.iter().enumerate() {
        let api_version = object["apiVersion"].as_str().expect("apiVersion");
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, object["kind"].as_str().expect("kind"));
        let (resource, caps) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("{gvk:?}: not served"));
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                object["metadata"]["namespace"].as_str().expect("a namespace"),
                &resource,
            ),
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let name = object["metadata"]["name"].as_str().expect("a name");
        api.patch(name, &apply, &Patch::Apply(object))
            .await
            .unwrap_or_else(|e| panic!("apply {gvk:?} {name}: {e}"));
        if n == 0 {
            // kubectl -n pv-topology-webhook create secret tls pv-topology-webhook-tls --cert=… --key=…
            let secret: Secret = serde_json::from_value(json!({
                "metadata": {"name": SECRET, "namespace": NAMESPACE},
                "type": "kubernetes.io/tls",
                "stringData": {
                    "tls.crt": std::fs::read_to_string(certs_dir.join("tls.crt")).expect("tls.crt"),
                    "tls.key": std::fs::read_to_string(certs_dir.join("tls.key")).expect("tls.key"),
                },
            }))
            .expect("a Secret");
            Api::<Secret>::namespaced(client.clone(), NAMESPACE)
                .create(&PostParams::default(), &secret)
                .await
                .expect("create the TLS Secret");
        }
    }
    let mounted = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("the Deployment")["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .any(|v| v["secret"]["secretName"] == SECRET);
    assert!(mounted, "the Deployment mounts the Secret made as documented");

    // Until the apiserver has both new configurations: a lying probe refused by the
    // new webhook (the old one is stopped, its message could come from no other), and
    // a good one labelled.
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let lying = |name: &str| {
        let mut pv = gce_pd(name, "europe-west1-b");
        pv.spec.as_mut().expect("a spec").node_affinity = Some(
            serde_json::from_value(zone_affinity("topology.gke.io/zone", "europe-west1-c"))
                .expect("a VolumeNodeAffinity"),
        );
        pv
    };
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let refused = pvs
            .create(&dry, &lying("ncm-probe"))
            .await
            .is_err_and(|e| message(&e).contains("but the disk is in zone europe-west1-b"));
        let labelled = pvs
            .create(&dry, &gce_pd("ncm-probe-good", "europe-west1-b"))
            .await
            .is_ok_and(|pv| labels(&pv)[ZONE] == "europe-west1-b");
        if refused && labelled {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the render's configurations never took effect:\n{}",
            webhook.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let post = PostParams::default();
    let refused = pvs
        .create(&post, &lying("ncm-lying"))
        .await
        .expect_err("/validate refuses it");
    let text = message(&refused);
    assert!(
        text.contains("nodeAffinity term 0: topology.gke.io/zone In [\"europe-west1-c\"]")
            && text.contains("but the disk is in zone europe-west1-b"),
        "{text}"
    );
    let created = pvs
        .create(&post, &gce_pd("ncm-good", "europe-west1-b"))
        .await
        .expect("created");
    assert_eq!(labels(&created)[ZONE], "europe-west1-b", "/mutate labelled it");
    assert!(
        webhook.counter("pv_topology_webhook_admission_requests_total", "check=\"validate\"") > 0,
        "/validate was called:\n{}",
        webhook.log()
    );
    eprintln!(
        "no-cert-manager component: rendered, applied and checked in {:?}",
        started.elapsed()
    );
}
