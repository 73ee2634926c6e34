//! The webhook as users install it (issue 26 item 4), on the tier's real node:
//!
//! - `make push` of `make image`'s archive to a TLS + htpasswd registry on
//!   127.0.0.1 (its digest from the push), the TLS Secret and caBundle from
//!   `pv-topology-webhook certs` as docs/webhook.md "Install without
//!   cert-manager" says, then `helm install` of charts/pv-topology-webhook with
//!   `certificates.source=secret`, `image.repository`/`image.digest` and a
//!   rules file for a driver no lookup covers (tests/data/cluster/node-webhook-rules.yaml);
//! - the control first: kubelet without a credential provider cannot pull
//!   the image (the pods stay `ImagePullBackOff`, the registry's 401 in the
//!   events); then kubelet with our plugin's `static` backend for that
//!   registry (`--image-credential-provider-config`) pulls it and the pods
//!   become Ready under the chart's own probes;
//! - the chart's securityContext as the running pod has it, and as the kernel
//!   has it for the container's process (/proc of the task `ctr` lists):
//!   uid/gid 65532, no capabilities, no_new_privs, a seccomp filter, a
//!   read-only root, the TLS Secret mounted read-only as a directory, its
//!   files 0440 in group 65532 (fsGroup);
//! - kube-apiserver reaches the pods through the chart's Service: it runs
//!   with `--enable-aggregator-routing=true` (it dials an endpoint of the
//!   Service's EndpointSlice, made by kube-controller-manager's
//!   endpointslice-controller; no kube-proxy here), over a veth from the host
//!   into the node's netns and a host route to the pod subnet. A PV created
//!   by hand gets its labels and nodeAffinity from the pod;
//! - the pod kube-apiserver's (HTTP/2) connection goes to, deleted during a
//!   stream of PV creations from 4 workers, loses none (the chart's preStop
//!   sleep and `--shutdown-delay`, then the drain).
//!
//! No control for the preStop sleep and the shutdown delay: upgraded to
//! `preStopSleep=0s shutdownDelay=0s`, the same delete lost no creation
//! either (4 runs of 4, 250-300 created each). Here the EndpointSlice change
//! reaches kube-apiserver within milliseconds (no kube-proxy, one node), and
//! the drain answers what is in flight and sends GOAWAY, after which the
//! apiserver dials the other endpoint: the window those settings cover (a
//! real cluster's endpoint propagation) does not open on this machine.
//!
//! Two replicas (the chart's default is 3): with `failurePolicy: Fail` one
//! replica left serving is what keeps creations going while the other
//! drains, and a third would only add a pull and a start on 2 CPU cores.
//! One TestCluster (with scheduler and controller manager), one registry,
//! one node.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use cluster_harness::{
    KubeletOptions, Node, NodeOptions, Registry, TestCluster, cluster_bin, pod_events, provider_binary, run_ok,
    wait_pod_event, waiting_reason, workspace_binary, workspace_root,
};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, Pod, Secret};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde::Deserialize as _;
use serde_json::{Value, json};

const RELEASE: &str = "pv-topology-webhook";
const NAMESPACE: &str = "pv-topology-webhook";
const SECRET: &str = "pv-topology-webhook-tls";
const SELECTOR: &str = "app.kubernetes.io/name=pv-topology-webhook,app.kubernetes.io/instance=pv-topology-webhook";
const DRIVER: &str = "csi.node-webhook.test";
/// The chart's pod and container user and group.
const CHART_UID: u32 = 65532;

/// helm with its own homes and the tier's admin kubeconfig.
struct Helm {
    home: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Helm {
    fn run(&self, args: &[&str]) -> String {
        let home = self.home.path();
        let out = run_ok(
            Command::new(cluster_bin("helm"))
                .args(args)
                .env("HELM_CACHE_HOME", home.join("cache"))
                .env("HELM_CONFIG_HOME", home.join("config"))
                .env("HELM_DATA_HOME", home.join("data"))
                .env("KUBECONFIG", &self.kubeconfig),
        )
        .unwrap_or_else(|e| panic!("{e:#}"));
        String::from_utf8(out.stdout).expect("helm writes UTF-8")
    }
}

fn objects(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).expect("helm's YAML"))
        .filter(|v| v.get("kind").is_some())
        .collect()
}

fn ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn webhook_pods(pods: &Api<Pod>) -> Vec<Pod> {
    pods.list(&ListParams::default().labels(SELECTOR))
        .await
        .expect("list the webhook's pods")
        .items
}

/// Waits until `count` webhook pods (none terminating) are Ready.
async fn wait_ready_pods(client: &kube::Client, count: usize, timeout: Duration, node: &Node) -> Vec<Pod> {
    let pods: &Api<Pod> = &Api::namespaced(client.clone(), NAMESPACE);
    let deadline = Instant::now() + timeout;
    loop {
        let all = webhook_pods(pods).await;
        let ready_pods: Vec<Pod> = all.iter().filter(|p| ready(p)).cloned().collect();
        if ready_pods.len() == count && all.len() == count {
            return ready_pods;
        }
        if Instant::now() > deadline {
            let mut events = Vec::new();
            for p in &all {
                let name = p.metadata.name.clone().unwrap_or_default();
                events.push((name.clone(), pod_events(client, NAMESPACE, &name).await));
            }
            panic!(
                "not {count} webhook pods Ready within {timeout:?}: {:#?}\nevents: {events:#?}\n{}",
                all.iter().map(|p| (&p.metadata.name, &p.status)).collect::<Vec<_>>(),
                node.logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The pod IPs the host (kube-apiserver) has established connections to on
/// the webhook's port 8443 (`ss`; nothing else on the host dials pod IPs).
fn apiserver_peers() -> Vec<String> {
    let out = run_ok(Command::new("ss").args(["-Htn", "state", "established"])).expect("ss");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .flat_map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .filter_map(|f| f.strip_suffix(":8443").map(str::to_string))
        .filter(|ip| ip.starts_with("10.244.0."))
        .collect()
}

/// Every field of `expected` is in `actual` with the same value (objects
/// compared key by key, everything else exactly).
fn assert_contains(actual: &Value, expected: &Value, what: &str) {
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => {
            for (key, value) in e {
                let here = format!("{what}.{key}");
                let found = a.get(key).unwrap_or_else(|| panic!("{here} missing: {actual}"));
                assert_contains(found, value, &here);
            }
        }
        _ => assert_eq!(actual, expected, "{what}"),
    }
}

/// A PV of the rules' driver, `region/zone/name` as its handle.
fn pv(name: &str, handle: &str) -> PersistentVolume {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "csi": {"driver": DRIVER, "volumeHandle": handle},
        },
    }))
    .expect("a PV")
}

/// `/proc/PID/status` field `name` of a process (e.g. `Uid`).
fn proc_status(pid: u32, name: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
        .trim()
        .to_string()
}

/// The mount options (per mount) of `mount_point` in the process's mount table.
fn mount_options(pid: u32, mount_point: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).expect("mountinfo");
    text.lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .filter(|f| f.len() > 5 && f[4] == mount_point)
        .map(|f| f[5].to_string())
        .next_back()
        .unwrap_or_else(|| panic!("{mount_point} not mounted in the container:\n{text}"))
}

/// The host pid of the task of `container_id` (`containerd://ID`).
fn task_pid(node: &Node, container_id: &str) -> u32 {
    let id = container_id.trim_start_matches("containerd://");
    let out = run_ok(node.ctr().args(["tasks", "ls"])).expect("ctr tasks ls");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first() == Some(&id)).then(|| f[1].parse().expect("a pid"))
        })
        .unwrap_or_else(|| panic!("no task {id}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[tokio::test]
async fn the_chart_installed_on_a_real_node_mutates_pvs_through_its_service() {
    let t_all = Instant::now();
    let mut cluster = TestCluster::start_with_apiserver_args(&["--enable-aggregator-routing=true"]).await;
    cluster.start_scheduler().expect("kube-scheduler");
    cluster
        .start_controller_manager(&[
            "deployment-controller",
            "replicaset-controller",
            "endpointslice-controller",
            "serviceaccount-controller",
            // Removes the node.kubernetes.io/not-ready taint kubelet registers
            // the Node with, once it is Ready.
            "node-lifecycle-controller",
        ])
        .expect("kube-controller-manager");
    let client = cluster.client();

    // The registry and the documented push; the digest is what the chart gets.
    let archive = workspace_root().join("target/image/pv-topology-webhook.tar");
    assert!(archive.is_file(), "{} missing: run make image", archive.display());
    let password = format!("pw-{}", std::process::id());
    let creds = format!("puller:{password}");
    let registry = Registry::start_htpasswd("puller", &password).expect("the htpasswd registry");
    let auth = registry.auth_file(Some(&creds)).expect("an auth file");
    let t0 = Instant::now();
    let pushed = run_ok(
        Command::new("make")
            .current_dir(workspace_root())
            .args(["-s", "push"])
            .arg(format!("REGISTRY={}", registry.host()))
            .arg(format!("IMAGE_ARCHIVE={}", archive.display()))
            .arg(format!("PUSH_FLAGS={}", registry.push_flags(&auth))),
    )
    .expect("make push");
    let push_took = t0.elapsed();
    let line = String::from_utf8_lossy(&pushed.stdout).trim().to_string();
    let digest = line
        .rsplit_once('(')
        .and_then(|(_, d)| d.strip_suffix(')'))
        .filter(|d| d.starts_with("sha256:"))
        .unwrap_or_else(|| panic!("no digest in make push's line: {line}"))
        .to_string();
    let repository = format!("{}/pv-topology-webhook", registry.host());

    // Our plugin for that registry: static.yaml edited where the docs say
    // (matchImages, --docker-config).
    let scratch = tempfile::tempdir().expect("scratch");
    let bin_dir = scratch.path().join("credential-providers");
    std::fs::create_dir(&bin_dir).expect("bin dir");
    std::fs::copy(provider_binary(), bin_dir.join("cloud-credential-provider")).expect("install the plugin");
    let docker_config = scratch.path().join("config.json");
    let basic = base64::engine::general_purpose::STANDARD.encode(&creds);
    std::fs::write(
        &docker_config,
        json!({"auths": {registry.host(): {"auth": basic}}}).to_string(),
    )
    .expect("config.json");
    let shipped = std::fs::read_to_string(workspace_root().join("manifests/credential-provider/static.yaml"))
        .expect("static.yaml");
    let mut config: Value = serde_yaml_ng::from_str(&shipped).expect("static.yaml parses");
    let provider = &mut config["providers"][0];
    provider["matchImages"] = json!([registry.host()]);
    let args = provider["args"].as_array_mut().expect("args");
    let docker_arg = args
        .iter_mut()
        .find(|a| a.as_str().is_some_and(|a| a.starts_with("--docker-config=")))
        .expect("--docker-config in static.yaml");
    *docker_arg = json!(format!("--docker-config={}", docker_config.display()));
    let provider_config = scratch.path().join("credential-providers.yaml");
    std::fs::write(&provider_config, serde_yaml_ng::to_string(&config).expect("YAML")).expect("write config");

    let node = Node::create(
        &cluster,
        NodeOptions {
            relay_ports: vec![registry.port()],
            registry_cas: vec![(registry.host(), registry.ca_path().to_path_buf())],
            ..NodeOptions::default()
        },
    )
    .expect("node");
    let route = node
        .route_pod_subnet_from_host()
        .expect("a route from the host to the pod subnet");

    // The control: kubelet without our provider.
    node.start_kubelet(KubeletOptions::default()).expect("kubelet starts");
    node.wait_ready(&client, Duration::from_secs(120))
        .await
        .expect("the Node becomes Ready");

    // Certificates as docs/webhook.md "Install without cert-manager" makes them.
    let certs = scratch.path().join("webhook-certs");
    let out = run_ok(
        Command::new(workspace_binary("pv-topology-webhook", "PV_TOPOLOGY_WEBHOOK_BIN"))
            .args(["certs", "--service", RELEASE, "--namespace", NAMESPACE, "--out-dir"])
            .arg(&certs)
            .args(["--validity", "8760h"]),
    )
    .expect("pv-topology-webhook certs");
    let ca_bundle = String::from_utf8(out.stdout).expect("UTF-8").trim().to_string();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("namespace"),
        )
        .await
        .expect("create the namespace");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let read = |f: &str| std::fs::read_to_string(certs.join(f)).expect("a certs file");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": SECRET},
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": read("tls.crt"), "tls.key": read("tls.key")},
    }))
    .expect("secret");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create the TLS Secret");

    let helm = Helm {
        home: tempfile::tempdir().expect("helm home"),
        kubeconfig: cluster.kubeconfig.clone(),
    };
    let chart = workspace_root().join("charts/pv-topology-webhook");
    let rules = workspace_root().join("tests/data/cluster/node-webhook-rules.yaml");
    let sets = [
        "certificates.source=secret".to_string(),
        format!("certificates.secretName={SECRET}"),
        format!("certificates.caBundle={ca_bundle}"),
        format!("image.repository={repository}"),
        format!("image.digest={digest}"),
        "replicas=2".to_string(),
        "podDisruptionBudget.minAvailable=1".to_string(),
    ];
    let rules_set = format!("rules.content={}", rules.display());
    let mut args = vec![
        "install",
        RELEASE,
        chart.to_str().expect("UTF-8 path"),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        "--set-file",
        &rules_set,
    ];
    for s in &sets {
        args.extend(["--set", s.as_str()]);
    }
    let t0 = Instant::now();
    eprintln!("{}", helm.run(&args));
    let manifest = objects(&helm.run(&["get", "manifest", RELEASE, "--namespace", NAMESPACE]));
    let deployment = manifest
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment in the release");
    let rendered = &deployment["spec"]["template"]["spec"];
    assert_eq!(
        rendered["containers"][0]["image"],
        format!("{repository}@{digest}").as_str()
    );

    // Without the provider: the pods cannot pull (anonymous: the registry's 401).
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let all = webhook_pods(&pods).await;
        if all.len() == 2
            && all
                .iter()
                .all(|p| waiting_reason(p).as_deref() == Some("ImagePullBackOff"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no ImagePullBackOff on both pods within 120s: {:#?}\n{}",
            all.iter().map(|p| (&p.metadata.name, &p.status)).collect::<Vec<_>>(),
            node.logs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let backoff_after = t0.elapsed();
    let first = webhook_pods(&pods).await[0].metadata.name.clone().expect("name");
    // kubelet posts events apart from the pod's status: wait for it.
    let events = wait_pod_event(&client, NAMESPACE, &first, Duration::from_secs(30), |e| {
        e.starts_with("Failed:") && e.contains("401 Unauthorized")
    })
    .await
    .expect("the webhook pod's refused pull event");
    eprintln!("without the provider, {first}: {events:#?}");

    // With our provider: pulled and Ready under the chart's probes.
    node.stop_kubelet();
    let t0 = Instant::now();
    node.start_kubelet(KubeletOptions {
        credential_provider: Some((provider_config.clone(), bin_dir.clone())),
        ..KubeletOptions::default()
    })
    .expect("kubelet with the provider");
    let running = wait_ready_pods(&client, 2, Duration::from_secs(180), &node).await;
    let ready_after = t0.elapsed();
    // containerd's pull was authorized (htpasswd: only puller's password is; the registry's own log).
    let authorized_pull = registry.log_text().lines().any(|l| {
        l.contains("msg=\"authorized request\"")
            && l.contains("http.request.useragent=\"containerd/")
            && l.contains("/v2/pv-topology-webhook/manifests/")
    });
    assert!(
        authorized_pull,
        "no authorized pull by containerd in the registry's log"
    );

    for pod in &running {
        let spec = serde_json::to_value(pod.spec.as_ref().expect("spec")).expect("JSON");
        let name = pod.metadata.name.as_deref().expect("name");
        // The chart's securityContext, probes and TLS volume, as the pod has them.
        assert_eq!(spec["securityContext"], rendered["securityContext"], "{name}");
        assert_eq!(
            spec["securityContext"],
            json!({"runAsNonRoot": true, "runAsUser": CHART_UID, "runAsGroup": CHART_UID,
                   "fsGroup": CHART_UID, "seccompProfile": {"type": "RuntimeDefault"}}),
            "{name}"
        );
        let container = &spec["containers"][0];
        let chart_container = &rendered["containers"][0];
        for field in [
            "securityContext",
            "readinessProbe",
            "livenessProbe",
            "lifecycle",
            "args",
        ] {
            // The apiserver adds its defaults (scheme, timeoutSeconds): the chart's fields as it set them.
            assert_contains(&container[field], &chart_container[field], &format!("{name}: {field}"));
        }
        assert_eq!(
            container["securityContext"],
            json!({"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true,
                   "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}),
            "{name}"
        );
        assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
        assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
        let tls_volume = spec["volumes"]
            .as_array()
            .expect("volumes")
            .iter()
            .find(|v| v["name"] == "tls")
            .expect("the tls volume");
        assert_eq!(tls_volume["secret"]["secretName"], SECRET);
        assert_eq!(tls_volume["secret"]["defaultMode"], 0o440);

        // The process, as the kernel sees it.
        let status = pod.status.as_ref().expect("status");
        let container_status = &status.container_statuses.as_ref().expect("container statuses")[0];
        assert!(container_status.ready, "{name}");
        assert_eq!(container_status.restart_count, 0, "{name}");
        let pid = task_pid(&node, container_status.container_id.as_deref().expect("container ID"));
        let uid = CHART_UID.to_string();
        let all_uid = [uid.as_str(); 4].join("\t");
        assert_eq!(proc_status(pid, "Uid"), all_uid, "{name}");
        assert_eq!(proc_status(pid, "Gid"), all_uid, "{name}");
        for caps in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            assert_eq!(proc_status(pid, caps), "0000000000000000", "{name}: {caps}");
        }
        assert_eq!(proc_status(pid, "NoNewPrivs"), "1", "{name}");
        // 2: SECCOMP_MODE_FILTER (containerd's RuntimeDefault profile).
        assert_eq!(proc_status(pid, "Seccomp"), "2", "{name}");
        let root_options = mount_options(pid, "/");
        assert!(
            root_options.split(',').any(|o| o == "ro"),
            "{name}: / is {root_options}"
        );
        let tls_options = mount_options(pid, "/etc/pv-topology-webhook/tls");
        assert!(
            tls_options.split(',').any(|o| o == "ro"),
            "{name}: tls is {tls_options}"
        );
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        for file in ["tls.crt", "tls.key"] {
            use std::os::unix::fs::MetadataExt;
            let path = root.join("etc/pv-topology-webhook/tls").join(file);
            let meta = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(meta.mode() & 0o777, 0o440, "{name}: {file}");
            assert_eq!(meta.gid(), CHART_UID, "{name}: {file}");
        }
        assert_eq!(
            std::fs::read_to_string(root.join("etc/pv-topology-webhook/tls/tls.crt")).expect("tls.crt"),
            read("tls.crt")
        );
    }

    // The Service's EndpointSlice lists both pods, Ready: what the apiserver dials.
    let ips: Vec<String> = running
        .iter()
        .map(|p| p.status.as_ref().and_then(|s| s.pod_ip.clone()).expect("pod IP"))
        .collect();
    for ip in &ips {
        let ip: Ipv4Addr = ip.parse().expect("IPv4");
        assert_eq!(ip.octets()[..3], [10, 244, 0], "{ip}");
    }
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NAMESPACE);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = slices
            .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={RELEASE}")))
            .await
            .expect("list EndpointSlices");
        let mut ready_ips: Vec<String> = listed
            .items
            .iter()
            .flat_map(|s| s.endpoints.iter())
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
            .flat_map(|e| e.addresses.iter().cloned())
            .collect();
        ready_ips.sort();
        let mut want = ips.clone();
        want.sort();
        if ready_ips == want {
            break;
        }
        assert!(Instant::now() < deadline, "EndpointSlices {ready_ips:?}, pods {want:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // The stored configuration names the Service (no URL): the apiserver resolves it.
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let stored =
        serde_json::to_value(configs.get(RELEASE).await.expect("the MutatingWebhookConfiguration")).expect("JSON");
    let client_config = &stored["webhooks"][0]["clientConfig"];
    assert_eq!(
        client_config["service"],
        json!({"name": RELEASE, "namespace": NAMESPACE, "path": "/mutate", "port": 443})
    );
    assert!(client_config.get("url").is_none(), "{client_config}");
    assert_eq!(client_config["caBundle"], ca_bundle.as_str());

    // A PV made by hand: labelled and given nodeAffinity by the webhook in the pod.
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let created = pvs
        .create(&PostParams::default(), &pv("by-hand", "region-1/zone-1b/disk-1"))
        .await
        .expect("create a PV");
    let labels = created.metadata.labels.clone().unwrap_or_default();
    eprintln!(
        "by-hand: labels {labels:?}, nodeAffinity {}",
        serde_json::to_string(&created.spec.as_ref().and_then(|s| s.node_affinity.clone())).expect("JSON")
    );
    assert_eq!(
        labels,
        BTreeMap::from([
            ("topology.kubernetes.io/region".to_string(), "region-1".to_string()),
            ("topology.kubernetes.io/zone".to_string(), "zone-1b".to_string()),
        ]),
    );
    let affinity = serde_json::to_value(created.spec.as_ref().and_then(|s| s.node_affinity.clone())).expect("JSON");
    assert_eq!(
        affinity,
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.csi.node-webhook.test/zone", "operator": "In", "values": ["zone-1b"]}
        ]}]}})
    );

    // A pod deleted during a stream of PV creations: none lost.
    let t0 = Instant::now();
    let (made, failures) = stream_during_delete(&client, &pods, &node, "a").await;
    let stream_took = t0.elapsed();
    eprintln!("stream with the chart's preStop and shutdown delay: {made} created, failures {failures:?}");
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(made >= 20, "only {made} PVs created during the delete");

    drop(route);
    eprintln!(
        "node_webhook: make push {push_took:.1?}; ImagePullBackOff on both pods {backoff_after:.1?} after helm install; \
         both Ready {ready_after:.1?} after kubelet with the provider; stream {stream_took:.1?}; total {:.1?}",
        t_all.elapsed()
    );
}

/// Creates PVs of the rules' driver from 4 workers, deletes one Ready pod,
/// and stops once the Deployment's replacement is Ready and the deleted pod is
/// gone. Returns how many were created (each checked for its zone label) and
/// every failure.
async fn stream_during_delete(client: &kube::Client, pods: &Api<Pod>, node: &Node, tag: &str) -> (usize, Vec<String>) {
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let made = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for worker in 0..4 {
        let (pvs, stop, made) = (pvs.clone(), stop.clone(), made.clone());
        let tag = tag.to_string();
        workers.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let name = format!("stream-{tag}-{worker}-{i}");
                i += 1;
                match pvs
                    .create(&PostParams::default(), &pv(&name, "region-1/zone-1c/disk"))
                    .await
                {
                    Ok(created) => {
                        let zone = created
                            .metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get("topology.kubernetes.io/zone").cloned());
                        if zone.as_deref() != Some("zone-1c") {
                            failures.push(format!("{name}: created without its zone: {zone:?}"));
                        }
                        made.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => failures.push(format!("{name}: {e}")),
                }
            }
            failures
        }));
    }
    // Some creations before the delete.
    let deadline = Instant::now() + Duration::from_secs(30);
    while made.load(Ordering::SeqCst) < 10 {
        assert!(Instant::now() < deadline, "the stream does not create PVs");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The pod kube-apiserver's connection goes to (HTTP/2: one connection
    // carries every review), so that the delete is felt.
    let serving = apiserver_peers();
    let victim = webhook_pods(pods)
        .await
        .into_iter()
        .filter(ready)
        .find(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.pod_ip.as_ref())
                .is_some_and(|ip| serving.contains(ip))
        })
        .and_then(|p| p.metadata.name)
        .unwrap_or_else(|| panic!("no Ready pod has the apiserver's connection; connections to: {serving:?}"));
    pods.delete(&victim, &DeleteParams::default())
        .await
        .expect("delete a webhook pod");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let all = webhook_pods(pods).await;
        let gone = all.iter().all(|p| p.metadata.name.as_deref() != Some(victim.as_str()));
        if gone && all.len() == 2 && all.iter().all(ready) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{victim} not replaced within 120s: {:#?}\n{}",
            all.iter().map(|p| (&p.metadata.name, &p.status)).collect::<Vec<_>>(),
            node.logs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let mut failures = Vec::new();
    for worker in workers {
        failures.extend(worker.await.expect("a stream worker"));
    }
    (made.load(Ordering::SeqCst), failures)
}
