//! A registry mirror on the real node (issue 29 part 4): containerd's
//! `certs.d/docker.io/hosts.toml` sends Docker Hub pulls to a mirror that
//! wants credentials (distribution 2.8.2 with htpasswd over TLS, its
//! repositories under the path `proxy/`, as a Harbor proxy project or an
//! ECR pull-through prefix serves them: `override_path = true`), named in
//! a `[host]` table and as the `server`, so containerd never falls back to
//! Docker Hub: nothing leaves the machine.
//!
//! kubelet v1.37.2 runs our `static` backend for `docker.io` images with a
//! Docker config holding the mirror's credentials only
//! (`127.0.0.1:PORT/proxy`). The control first: without
//! `--containerd-hosts-dir` the plugin has nothing for `docker.io`, and the
//! pull of `docker.io/library/app:1` is refused with the mirror's 401. With
//! the flag naming containerd's own `config_path`, the plugin answers the
//! mirror's credentials under `docker.io`, kubelet hands them to containerd
//! with the image, containerd sends them to the mirror, and the pod runs.
//! `explain` with the same kubelet config says the mapping, and no secret
//! is in kubelet's or containerd's log.

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cluster_harness::registry::push;
use cluster_harness::{
    KubeletOptions, Node, NodeOptions, Registry, TestCluster, pause_image_archive, pod_events, pod_manifest,
    provider_binary, random_hex, wait_pod_running, waiting_reason,
};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::json;

const USER: &str = "mirror-puller";
const IMAGE: &str = "docker.io/library/app:1";
const PLUGIN: &str = "cloud-credential-provider";

/// The kubelet config: `static` for docker.io, with `extra` args.
fn provider_config(dir: &Path, docker_config: &Path, extra: &[String]) -> std::path::PathBuf {
    let mut args = vec![
        "static".to_owned(),
        "--docker-config".to_owned(),
        docker_config.display().to_string(),
    ];
    args.extend(extra.iter().cloned());
    let config = json!({
        "apiVersion": "kubelet.config.k8s.io/v1",
        "kind": "CredentialProviderConfig",
        "providers": [{
            "name": PLUGIN,
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
            "matchImages": ["docker.io"],
            "defaultCacheDuration": "10m",
            "args": args,
        }],
    });
    let name = if extra.is_empty() {
        "control.yaml"
    } else {
        "mirrored.yaml"
    };
    let path = dir.join(name);
    std::fs::write(&path, serde_yaml_ng::to_string(&config).expect("YAML")).expect("write the config");
    path
}

async fn wait_refused(client: &kube::Client, name: &str, timeout: Duration) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let deadline = Instant::now() + timeout;
    loop {
        let pod = pods.get(name).await.expect("get pod");
        let events = pod_events(client, "default", name).await;
        if matches!(
            waiting_reason(&pod).as_deref(),
            Some("ErrImagePull" | "ImagePullBackOff")
        ) && events.iter().any(|e| e.contains("401 Unauthorized"))
        {
            return events;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: no refused pull within {timeout:?}: {events:#?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_hub_through_a_mirror_that_wants_credentials() {
    let root = tempfile::Builder::new()
        .prefix("node-registry-mirror-")
        .tempdir()
        .expect("a scratch root");
    let password = format!("m+r/{}", random_hex(12));
    let creds = format!("{USER}:{password}");
    let registry = Registry::start_htpasswd(USER, &password).expect("the mirror");
    push(
        &pause_image_archive().expect("the pause image"),
        &registry,
        "proxy/library/app:1",
        &creds,
    )
    .expect("push the image under the mirror's proxy path");
    let mirror = registry.host();
    let ca = format!("{:?}", registry.ca_path().display().to_string());
    // The mirror in a [host] table (containerd refuses a file without one)
    // and as the server, so that nothing after it is tried.
    let hosts_toml = format!(
        "server = \"https://{mirror}/v2/proxy\"\n\
         override_path = true\n\
         ca = {ca}\n\
         \n\
         [host.\"https://{mirror}/v2/proxy\"]\n\
         \x20 capabilities = [\"pull\", \"resolve\"]\n\
         \x20 override_path = true\n\
         \x20 ca = {ca}\n"
    );
    let cluster = TestCluster::start().await;
    let node = Node::create(
        &cluster,
        NodeOptions {
            relay_ports: vec![registry.port()],
            hosts_toml: vec![("docker.io".to_owned(), hosts_toml)],
            ..NodeOptions::default()
        },
    )
    .expect("node");
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client(), "default");
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "default"}})).expect("sa"),
        )
        .await
        .expect("create ServiceAccount default");

    let bin_dir = root.path().join("bin");
    std::fs::create_dir(&bin_dir).expect("bin dir");
    std::os::unix::fs::symlink(provider_binary(), bin_dir.join(PLUGIN)).expect("link the plugin");
    let docker_config = root.path().join("config.json");
    std::fs::write(
        &docker_config,
        json!({"auths": {format!("{mirror}/proxy"): {"auth": STANDARD.encode(&creds)}}}).to_string(),
    )
    .expect("config.json");
    let control = provider_config(root.path(), &docker_config, &[]);
    let certs_dir = node.certs_dir().display().to_string();
    let mirrored = provider_config(
        root.path(),
        &docker_config,
        &["--containerd-hosts-dir".to_owned(), certs_dir.clone()],
    );
    let client = cluster.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod =
        |name: &str| -> Pod { serde_json::from_value(pod_manifest(name, node.name(), IMAGE, "Always")).expect("pod") };

    // The control: the plugin runs, but nothing serves docker.io.
    node.start_kubelet(KubeletOptions {
        credential_provider: Some((control, bin_dir.clone())),
        ..KubeletOptions::default()
    })
    .expect("kubelet starts");
    node.wait_ready(&client, Duration::from_secs(120)).await.expect("Ready");
    pods.create(&PostParams::default(), &pod("control"))
        .await
        .expect("create control");
    let events = wait_refused(&client, "control", Duration::from_secs(90)).await;
    let refusal = events
        .iter()
        .find(|e| e.contains("401 Unauthorized"))
        .expect("the refusal");
    assert!(
        refusal.contains(&format!("pulling from host {mirror} failed")),
        "containerd pulled from the mirror and was refused there: {refusal}"
    );

    // With containerd's own hosts: the mirror's credentials under docker.io.
    node.stop_kubelet();
    node.start_kubelet(KubeletOptions {
        credential_provider: Some((mirrored.clone(), bin_dir.clone())),
        ..KubeletOptions::default()
    })
    .expect("kubelet starts again");
    node.wait_ready(&client, Duration::from_secs(120))
        .await
        .expect("Ready again");
    pods.create(&PostParams::default(), &pod("mirrored"))
        .await
        .expect("create mirrored");
    wait_pod_running(&client, "default", "mirrored", Duration::from_secs(90))
        .await
        .unwrap_or_else(|e| panic!("{e}\nkubelet:\n{}", node.logs()));

    // explain, with the config kubelet ran, says the mapping.
    let out = std::process::Command::new(provider_binary())
        .args(["explain", "--bin-dir"])
        .arg(&bin_dir)
        .arg(&mirrored)
        .arg(IMAGE)
        .output()
        .expect("explain");
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    let line = format!(
        "  mirror: pulled through the mirror {mirror}/proxy/library/app ({certs_dir}/docker.io/hosts.toml): the backend is \
         asked for it, and its credential is answered under docker.io"
    );
    assert!(said.lines().any(|l| l == line), "explain said:\n{said}");

    let logs = node.logs();
    for secret in [password.clone(), STANDARD.encode(&creds)] {
        assert!(!logs.contains(&secret), "a secret in the node's logs");
    }
}
