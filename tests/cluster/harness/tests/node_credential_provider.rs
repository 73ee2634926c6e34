//! The credential provider on the real node, installed as the README says
//! (issue 26 item 1): `make dist`'s archive, installed by the README's
//! `install-node-programs.sh` into a scratch root exactly as
//! tests/dist/check.sh runs it (every absolute `/usr` and `/etc` path moved
//! under the root, `systemctl` lines dropped), its `CONFIG` the archive's
//! `examples/static.yaml` taken out with tar as the README shows for
//! `ecr.yaml` and edited only where the docs say (`matchImages`: the
//! registry's host; `--docker-config`: a Docker config.json with the
//! registry's credentials). kubelet v1.37.2 runs it
//! from `ROOT/usr/local/lib/kubelet/credential-providers` with the config
//! `ROOT/etc/kubernetes/credential-providers.yaml`, and pulls from
//! distribution 2.8.2 over TLS with htpasswd (harness `Registry`).
//!
//! The control comes first: the same pod on kubelet started without the two
//! provider flags stays in ErrImagePull/ImagePullBackOff with the registry's
//! 401. Then kubelet starts with them and that pod runs; N more pods of the
//! image cost no further exec (kubelet's cache holds our answer for its
//! `cacheDuration`, 10m), counted by kubelet's own histogram
//! `kubelet_credential_provider_plugin_duration_count` and, independently,
//! by the kernel (inotify: every exec opens the binary, every answer opens
//! the Docker config). kubelet discards a plugin's stderr when it succeeds
//! (plugin.go ExecPlugin shows it only in an error), so the plugin's own log
//! is read by running the installed binary by hand as the docs' "Debugging a
//! failed pull" step 4 does, at trace level. No secret of the Docker config
//! (password, base64 `user:password`, URL-encoded) may be in kubelet's log or
//! the plugin's stderr.
//!
//! One TestCluster, one registry and one node for the file; its tests are
//! serialised. `pod_to_running_plugin_vs_image_pull_secret` runs one pod
//! with an imagePullSecret and one with the provider in `make test`, and
//! more as bench/node-pull.sh's benchmark (BENCH_PODS).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cluster_harness::registry::push;
use cluster_harness::{
    KubeletOptions, Node, NodeOptions, Registry, TestCluster, pause_image_archive, pod_events, pod_manifest,
    random_hex, run_ok, wait_pod_event, wait_pod_running, waiting_reason, workspace_root,
};
use k8s_openapi::api::core::v1::{Pod, Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use serde_json::json;

const USER: &str = "puller";
const REPOSITORY: &str = "team/app:1";
/// The provider's `name` in the examples, and the binary's name in the bin dir.
const PLUGIN: &str = "cloud-credential-provider";
/// Pods of one image after the first: none of them may exec the plugin.
const MORE_PODS: usize = 4;
/// The metric kubelet's plugin package observes once per exec (metrics.go).
const EXEC_METRIC: &str =
    "kubelet_credential_provider_plugin_duration_count{plugin_name=\"cloud-credential-provider\"}";
/// The seconds those execs took, in sum.
const EXEC_SECONDS_METRIC: &str =
    "kubelet_credential_provider_plugin_duration_sum{plugin_name=\"cloud-credential-provider\"}";
/// kubelet just Ready is still busy starting: the benchmark waits this long first.
const SETTLE: Duration = Duration::from_secs(5);

/// One node per file: the tests take turns.
static NODE_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What the README's script installed, and the edit.
struct Installed {
    bin_dir: PathBuf,
    binary: PathBuf,
    config: PathBuf,
    docker_config: PathBuf,
    /// The user's CONFIG, which the script's `check-config` checked.
    user_config: PathBuf,
    /// What the script printed.
    check_output: String,
}

/// Fields drop in order: the node before the registry and the cluster.
struct Setup {
    node: Node,
    registry: Registry,
    cluster: TestCluster,
    installed: Installed,
    password: String,
    _root: tempfile::TempDir,
}

impl Setup {
    fn image(&self) -> String {
        format!("{}/{REPOSITORY}", self.registry.host())
    }

    fn with_provider(&self) -> KubeletOptions {
        KubeletOptions {
            credential_provider: Some((self.installed.config.clone(), self.installed.bin_dir.clone())),
            // The plugin inherits kubelet's environment: were it to fail,
            // kubelet would log its whole stderr at trace level.
            env: vec![("CLOUD_CREDENTIAL_PROVIDER_LOG_LEVEL".into(), "trace".into())],
            ..KubeletOptions::default()
        }
    }
}

fn dist_dir() -> PathBuf {
    std::env::var_os("DIST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/dist"))
}

/// The README's `install-node-programs.sh`, its paths moved under `root` and
/// systemctl dropped, as tests/dist/check.sh rewrites it (sed).
fn readme_install_script(root: &Path) -> Vec<String> {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).expect("README.md");
    let root = root.display();
    let lines: Vec<String> = readme
        .lines()
        .skip_while(|l| !l.starts_with("# install-node-programs.sh"))
        .take_while(|l| !l.starts_with("```"))
        .map(|l| {
            let l = l
                .replace(" /usr/", &format!(" {root}/usr/"))
                .replace(" /etc/", &format!(" {root}/etc/"));
            match l.strip_prefix("/usr/") {
                Some(rest) => format!("{root}/usr/{rest}"),
                None if l.starts_with("systemctl ") => ":".to_string(),
                None => l,
            }
        })
        .collect();
    assert!(
        lines.iter().any(|l| l.starts_with("install -D")),
        "README.md: no install-node-programs.sh script"
    );
    lines
}

fn run_script(lines: &[String], work: &Path, file: &str, config: &Path) -> String {
    let script = work.join(file);
    std::fs::write(&script, lines.join("\n") + "\n").expect("the script");
    let out = run_ok(
        Command::new("sh")
            .arg("-eu")
            .arg(&script)
            .current_dir(work)
            .env("VERSION", env!("CARGO_PKG_VERSION"))
            .env("CONFIG", config),
    )
    .unwrap_or_else(|e| panic!("README.md's install script ({file}) failed: {e:#}"));
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The edit the docs name for `static`: `matchImages` to the registry's
/// host, `--docker-config` to the node's Docker config (its /etc path under
/// `root`, as every other path). Nothing else changes.
fn edit_static_example(example: &str, registry_host: &str, root: &Path) -> String {
    let mut out = Vec::new();
    let mut in_match_images = false;
    let mut docker_config_lines = 0;
    for line in example.lines() {
        if in_match_images {
            if line.trim_start().starts_with("- ") {
                continue;
            }
            in_match_images = false;
        }
        if line.trim() == "matchImages:" {
            in_match_images = true;
            out.push(line.to_string());
            let indent = &line[..line.len() - line.trim_start().len()];
            out.push(format!("{indent}  - \"{registry_host}\""));
            continue;
        }
        if line.contains("--docker-config=/etc/") {
            docker_config_lines += 1;
            out.push(line.replace(
                "--docker-config=/etc/",
                &format!("--docker-config={}/etc/", root.display()),
            ));
            continue;
        }
        out.push(line.to_string());
    }
    assert_eq!(
        docker_config_lines, 1,
        "static.yaml: one --docker-config line\n{example}"
    );
    out.join("\n") + "\n"
}

/// `make dist`'s archives installed by the README's script into `root`,
/// CONFIG written from the archive's static.yaml and edited, then checked and
/// installed by the script.
fn install_as_the_readme_says(root: &Path, registry: &Registry, creds: &str) -> Installed {
    let dist = dist_dir();
    let version = env!("CARGO_PKG_VERSION");
    let archive = dist.join(format!("{PLUGIN}-{version}-x86_64-linux.tar.gz"));
    assert!(
        archive.is_file(),
        "{} is missing: run `make dist` (make test builds it before the cluster tier)",
        archive.display()
    );
    let work = root.join("work");
    std::fs::create_dir_all(&work).expect("work dir");
    for entry in std::fs::read_dir(&dist).expect("target/dist") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("name").to_string_lossy().into_owned();
        if name.ends_with(".tar.gz") || name == "SHA256SUMS" {
            std::fs::copy(&path, work.join(&name)).expect("copy an archive");
        }
    }
    // The user writes CONFIG from the archive's static.yaml as the README
    // shows (tar -xzO, its example for ecr.yaml), and edits it where the
    // docs say; the script checks it, then installs it.
    let top = format!("{PLUGIN}-{version}-x86_64-linux");
    let out = run_ok(
        Command::new("tar")
            .arg("-xzOf")
            .arg(&archive)
            .arg(format!("{top}/examples/static.yaml")),
    )
    .expect("static.yaml from the archive");
    let example = String::from_utf8(out.stdout).expect("static.yaml is UTF-8");
    let shipped = std::fs::read_to_string(workspace_root().join("manifests/credential-provider/static.yaml"))
        .expect("static.yaml");
    assert_eq!(example, shipped, "the archive's static.yaml is not the repository's");
    let user_config = work.join("credential-providers.yaml");
    std::fs::write(&user_config, edit_static_example(&example, &registry.host(), root)).expect("write CONFIG");
    let docker_config = root.join("etc/kubernetes/registry-auth/config.json");
    std::fs::create_dir_all(docker_config.parent().expect("parent")).expect("registry-auth dir");
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&docker_config)
            .expect("config.json");
        let body = json!({"auths": {registry.host(): {"auth": STANDARD.encode(creds)}}});
        file.write_all(body.to_string().as_bytes()).expect("write config.json");
    }
    let check_output = run_script(&readme_install_script(root), &work, "install.sh", &user_config);
    let config = root.join("etc/kubernetes/credential-providers.yaml");
    assert_eq!(
        std::fs::read_to_string(&config).expect("the installed config"),
        std::fs::read_to_string(&user_config).expect("CONFIG"),
        "the script installed another file than CONFIG"
    );
    let bin_dir = root.join("usr/local/lib/kubelet/credential-providers");
    Installed {
        binary: bin_dir.join(PLUGIN),
        bin_dir,
        config,
        docker_config,
        user_config,
        check_output,
    }
}

async fn set_up() -> Setup {
    let root = tempfile::Builder::new()
        .prefix("node-credential-provider-")
        .tempdir()
        .expect("a scratch root");
    // '+' and '/' make the URL-encoded form differ from the raw one.
    let password = format!("p+w/{}", random_hex(12));
    let creds = format!("{USER}:{password}");
    let registry = Registry::start_htpasswd(USER, &password).expect("the htpasswd registry");
    push(
        &pause_image_archive().expect("the pause image"),
        &registry,
        REPOSITORY,
        &creds,
    )
    .expect("push the image");
    let t0 = Instant::now();
    let installed = install_as_the_readme_says(root.path(), &registry, &creds);
    eprintln!(
        "node credential provider: installed by the README's script in {:.1?}",
        t0.elapsed()
    );
    let cluster = TestCluster::start().await;
    let node = Node::create(
        &cluster,
        NodeOptions {
            relay_ports: vec![registry.port()],
            registry_cas: vec![(registry.host(), registry.ca_path().to_path_buf())],
            ..NodeOptions::default()
        },
    )
    .expect("node");
    // No kube-controller-manager: the default ServiceAccount is made here.
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client(), "default");
    let account = serde_json::from_value(json!({"metadata": {"name": "default"}})).expect("sa");
    accounts
        .create(&PostParams::default(), &account)
        .await
        .expect("create ServiceAccount default");
    Setup {
        node,
        registry,
        cluster,
        installed,
        password,
        _root: root,
    }
}

fn pod(name: &str, node: &str, image: &str, pull_secret: Option<&str>) -> Pod {
    let mut pod = pod_manifest(name, node, image, "Always");
    if let Some(secret) = pull_secret {
        pod["spec"]["imagePullSecrets"] = json!([{"name": secret}]);
    }
    serde_json::from_value(pod).expect("pod")
}

/// kubelet's count of plugin execs (absent before the first: 0).
fn plugin_execs_by_metric(node: &Node) -> u64 {
    plugin_metric(node, EXEC_METRIC) as u64
}

/// A sample of kubelet's /metrics (0 when absent).
fn plugin_metric(node: &Node, series: &str) -> f64 {
    let metrics = node.kubelet_metrics().expect("kubelet /metrics");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series))
        .map(|v| v.trim().parse().expect("a number"))
        .unwrap_or(0.0)
}

/// Opens of files, counted by the kernel: an exec opens the binary, the
/// `static` backend opens the Docker config once per answer.
struct Opens {
    inotify: Inotify,
    names: HashMap<WatchDescriptor, &'static str>,
    counts: HashMap<&'static str, u64>,
}

impl Opens {
    fn watch(files: &[(&'static str, &Path)]) -> Opens {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).expect("inotify");
        let mut names = HashMap::new();
        for (name, path) in files {
            let wd = inotify
                .add_watch(*path, AddWatchFlags::IN_OPEN)
                .unwrap_or_else(|e| panic!("inotify watch on {}: {e}", path.display()));
            names.insert(wd, *name);
        }
        Opens {
            inotify,
            names,
            counts: HashMap::new(),
        }
    }

    fn count(&mut self, name: &str) -> u64 {
        while let Ok(events) = self.inotify.read_events() {
            for event in events {
                if event.mask.contains(AddWatchFlags::IN_OPEN)
                    && let Some(name) = self.names.get(&event.wd)
                {
                    *self.counts.entry(name).or_default() += 1;
                }
            }
        }
        self.counts.get(name).copied().unwrap_or(0)
    }
}

/// No secret in any encoding: raw, Basic's base64 of `user:password`, URL-encoded.
fn assert_no_secret(text: &str, user: &str, password: &str, what: &str) {
    let basic = STANDARD.encode(format!("{user}:{password}"));
    let encoded: String = url::form_urlencoded::byte_serialize(password.as_bytes()).collect();
    for form in [password, basic.as_str(), encoded.as_str()] {
        assert!(!text.contains(form), "{what} holds a secret of the Docker config");
    }
}

async fn wait_pull_refused(client: &kube::Client, name: &str, timeout: Duration) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let deadline = Instant::now() + timeout;
    loop {
        let pod = pods.get(name).await.expect("get pod");
        let reason = waiting_reason(&pod);
        let events = pod_events(client, "default", name).await;
        if matches!(reason.as_deref(), Some("ErrImagePull" | "ImagePullBackOff"))
            && events
                .iter()
                .any(|e| e.starts_with("Failed:") && e.contains("401 Unauthorized"))
        {
            return events;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: no refused pull within {timeout:?}: {:?} {:?}\nevents: {events:#?}",
            reason,
            pod.status.as_ref().and_then(|s| s.phase.clone())
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Creation → Running, polled every 50 ms.
async fn time_to_running(client: &kube::Client, pod: &Pod) -> Duration {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let name = pod.metadata.name.clone().expect("name");
    let t0 = Instant::now();
    pods.create(&PostParams::default(), pod).await.expect("create pod");
    let deadline = t0 + Duration::from_secs(120);
    loop {
        let got = pods.get(&name).await.expect("get pod");
        if got.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
            return t0.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "{name} not Running within 120s: {:?}\nevents: {:#?}",
            got.status,
            pod_events(client, "default", &name).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn delete_and_wait(client: &kube::Client, name: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.delete(name, &DeleteParams::default().grace_period(0))
        .await
        .expect("delete pod");
    let deadline = Instant::now() + Duration::from_secs(60);
    while pods.get_opt(name).await.expect("get pod").is_some() {
        assert!(Instant::now() < deadline, "{name} not deleted within 60s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The plugin run by hand as kubelet runs it (the entry's args, its env),
/// as the docs' debugging step 4 does, at trace level: its stderr.
fn plugin_stderr_by_hand(installed: &Installed, image: &str) -> String {
    let config: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&installed.config).expect("config")).expect("YAML");
    let args: Vec<String> = config["providers"][0]["args"]
        .as_sequence()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("an arg").to_string())
        .collect();
    let request = json!({
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "kind": "CredentialProviderRequest",
        "image": image,
    });
    let mut child = Command::new(&installed.binary)
        .args(&args)
        .env("CLOUD_CREDENTIAL_PROVIDER_LOG_LEVEL", "trace")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the plugin");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(request.to_string().as_bytes())
            .expect("write the request");
    }
    let out = child.wait_with_output().expect("the plugin's output");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "the plugin failed ({}): {stderr}", out.status);
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON answer");
    assert_eq!(
        answer["kind"], "CredentialProviderResponse",
        "the plugin's answer's kind"
    );
    stderr
}

#[tokio::test]
async fn the_provider_installed_as_the_readme_says_pulls_once_for_many_pods() {
    let _turn = NODE_TURN.lock().await;
    let t_start = Instant::now();
    let setup = set_up().await;
    let t_set_up = t_start.elapsed();
    let client = setup.cluster.client();
    let node = &setup.node;
    let image = setup.image();
    eprintln!(
        "node credential provider: check-config as the script ran it:\n{}",
        setup.installed.check_output.trim()
    );
    let checked = format!("{}: valid (1 provider)", setup.installed.user_config.display());
    assert!(
        setup.installed.check_output.lines().any(|l| l == checked),
        "check-config said: {}",
        setup.installed.check_output
    );

    // The control: kubelet without the provider flags pulls anonymously.
    node.start_kubelet(KubeletOptions::default()).expect("kubelet starts");
    node.wait_ready(&client, Duration::from_secs(120))
        .await
        .expect("the Node becomes Ready");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("app-0", node.name(), &image, None))
        .await
        .expect("create app-0");
    let t0 = Instant::now();
    let events = wait_pull_refused(&client, "app-0", Duration::from_secs(90)).await;
    let t_control = t0.elapsed();
    let refusal = events
        .iter()
        .find(|e| e.starts_with("Failed:") && e.contains("401 Unauthorized"))
        .expect("the refusal");
    eprintln!("node credential provider: without the provider: {refusal}");
    let host = setup.registry.host();
    assert_eq!(
        *refusal,
        format!(
            "Failed: Failed to pull image \"{image}\": failed to pull and unpack image \"{image}\": failed to resolve \
             reference \"{image}\": pulling from host {host} failed with status code [manifests 1]: 401 Unauthorized"
        ),
        "containerd 1.6.20's words for the registry's 401"
    );

    // The provider removed from the config literally: kubelet refuses an
    // empty providers list and exits 1 (config.go, kuberuntime_manager.go),
    // so "without the provider" is kubelet without the two flags.
    node.stop_kubelet();
    let removed = setup
        .installed
        .config
        .with_file_name("credential-providers-removed.yaml");
    let mut config: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&setup.installed.config).expect("config")).expect("YAML");
    config["providers"] = serde_yaml_ng::Value::Sequence(Vec::new());
    std::fs::write(&removed, serde_yaml_ng::to_string(&config).expect("YAML")).expect("write the copy");
    let logged = node.kubelet_log().len();
    node.start_kubelet(KubeletOptions {
        credential_provider: Some((removed, setup.installed.bin_dir.clone())),
        ..KubeletOptions::default()
    })
    .expect("kubelet starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = node.kubelet_exited() {
            break status;
        }
        assert!(Instant::now() < deadline, "kubelet ran on with an empty providers list");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status.code(), Some(1), "kubelet's exit with an empty providers list");
    let log = node.kubelet_log();
    let line = log[logged..]
        .lines()
        .find(|l| l.contains("Failed to register CRI auth plugins"))
        .unwrap_or_else(|| panic!("kubelet's log has no refusal:\n{}", &log[logged..]));
    assert!(line.contains("at least 1 item in plugins is required"), "{line}");
    eprintln!("node credential provider: providers: [] makes kubelet exit 1: {line}");

    // The same pod once kubelet runs with the provider.
    let mut opens = Opens::watch(&[
        ("binary", &setup.installed.binary),
        ("docker config", &setup.installed.docker_config),
    ]);
    let t0 = Instant::now();
    node.start_kubelet(setup.with_provider())
        .expect("kubelet starts with the provider");
    wait_pod_running(&client, "default", "app-0", Duration::from_secs(120))
        .await
        .expect("app-0 runs with the provider");
    let t_first = t0.elapsed();
    assert_eq!(
        plugin_execs_by_metric(node),
        1,
        "execs for the first pod (kubelet's metric)"
    );
    assert_eq!(opens.count("binary"), 1, "execs for the first pod (the binary's opens)");
    assert_eq!(
        opens.count("docker config"),
        1,
        "answers for the first pod (config.json's opens)"
    );

    // N more pods of the image at once: kubelet's cache answers.
    let t0 = Instant::now();
    for i in 1..=MORE_PODS {
        pods.create(
            &PostParams::default(),
            &pod(&format!("app-{i}"), node.name(), &image, None),
        )
        .await
        .expect("create a pod");
    }
    for i in 1..=MORE_PODS {
        wait_pod_running(&client, "default", &format!("app-{i}"), Duration::from_secs(120))
            .await
            .expect("the pod runs");
    }
    let t_more = t0.elapsed();
    let by_metric = plugin_execs_by_metric(node);
    let by_binary = opens.count("binary");
    let by_config = opens.count("docker config");
    let log = node.kubelet_log();
    let by_log = log
        .matches("Getting image credentials from external exec plugin")
        .count();
    eprintln!(
        "node credential provider: {} pods, plugin execs: {by_metric} (kubelet's metric), {by_binary} (binary opened), \
         {by_config} (config.json opened), {by_log} (kubelet's V(5) log)",
        MORE_PODS + 1
    );
    assert_eq!(by_metric, 1, "execs for {} pods (kubelet's metric)", MORE_PODS + 1);
    assert_eq!(by_binary, 1, "execs for {} pods (the binary's opens)", MORE_PODS + 1);
    assert_eq!(by_config, 1, "answers for {} pods (config.json's opens)", MORE_PODS + 1);
    assert_eq!(by_log, 1, "execs for {} pods (kubelet's log)", MORE_PODS + 1);
    // imagePullPolicy Always: every pod pulled, with the cached credentials.
    // kubelet posts its events asynchronously: a Running pod's `Pulled` event
    // may come a moment later (seen once missing), so it is waited for.
    let pulled = format!("Pulled: Successfully pulled image \"{image}\"");
    for i in 0..=MORE_PODS {
        let name = format!("app-{i}");
        wait_pod_event(&client, "default", &name, Duration::from_secs(30), |e| {
            e.starts_with(&pulled)
        })
        .await
        .unwrap_or_else(|e| panic!("{name} was not pulled: {e:#}"));
    }

    // No secret of the Docker config in kubelet's log or the plugin's stderr
    // (the forms looked for are the config's own: its `auth` is the base64 one).
    let config_json = std::fs::read_to_string(&setup.installed.docker_config).expect("config.json");
    assert!(config_json.contains(&STANDARD.encode(format!("{USER}:{}", setup.password))));
    let stderr = plugin_stderr_by_hand(&setup.installed, &image);
    assert!(
        stderr.contains("credential response"),
        "the plugin logged no answer at trace level:\n{stderr}"
    );
    eprintln!(
        "node credential provider: the plugin's stderr at trace level:\n{}",
        stderr.trim()
    );
    assert_no_secret(&stderr, USER, &setup.password, "the plugin's stderr");
    assert_no_secret(&node.kubelet_log(), USER, &setup.password, "kubelet's log");
    assert_no_secret(
        &setup.installed.check_output,
        USER,
        &setup.password,
        "check-config's output",
    );

    let t0 = Instant::now();
    drop(setup);
    eprintln!(
        "node credential provider: set-up (registry, install, cluster, node) {t_set_up:.1?}, control refused in \
         {t_control:.1?}, provider kubelet start → app-0 Running {t_first:.1?}, {MORE_PODS} more pods Running \
         {t_more:.1?}, teardown {:.1?}, total {:.1?}",
        t0.elapsed(),
        t_start.elapsed()
    );
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// bench/node-pull.sh: creation → Running of a pod whose private image is
/// pulled with an imagePullSecret (kubelet without the provider) and with
/// the provider (the first pod execs it, the rest hit kubelet's cache).
/// BENCH_PODS pods each (default 1: `make test` checks that both ways run
/// and cost one exec; bench/node-pull.sh asks for more), one at a time,
/// each deleted before the next; the image's layers are in containerd from
/// the warm-up pod.
#[tokio::test]
async fn pod_to_running_plugin_vs_image_pull_secret() {
    let _turn = NODE_TURN.lock().await;
    let pods_each: usize = std::env::var("BENCH_PODS")
        .ok()
        .map(|v| v.parse().expect("BENCH_PODS: a number"))
        .unwrap_or(1);
    let setup = set_up().await;
    let client = setup.cluster.client();
    let node = &setup.node;
    let image = setup.image();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let docker_config = std::fs::read_to_string(&setup.installed.docker_config).expect("config.json");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "registry-auth"},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": docker_config},
    }))
    .expect("secret");
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create the pull secret");

    node.start_kubelet(KubeletOptions::default()).expect("kubelet starts");
    node.wait_ready(&client, Duration::from_secs(120))
        .await
        .expect("the Node becomes Ready");
    tokio::time::sleep(SETTLE).await;
    let warm = time_to_running(&client, &pod("warm-up", node.name(), &image, Some("registry-auth"))).await;
    delete_and_wait(&client, "warm-up").await;
    let mut with_secret = Vec::new();
    for i in 0..pods_each {
        let name = format!("secret-{i}");
        with_secret.push(time_to_running(&client, &pod(&name, node.name(), &image, Some("registry-auth"))).await);
        delete_and_wait(&client, &name).await;
    }

    node.stop_kubelet();
    node.start_kubelet(setup.with_provider())
        .expect("kubelet starts with the provider");
    node.wait_ready(&client, Duration::from_secs(120))
        .await
        .expect("the Node is Ready again");
    tokio::time::sleep(SETTLE).await;
    let mut with_plugin = Vec::new();
    for i in 0..pods_each {
        let name = format!("plugin-{i}");
        with_plugin.push(time_to_running(&client, &pod(&name, node.name(), &image, None)).await);
        delete_and_wait(&client, &name).await;
    }
    let execs = plugin_execs_by_metric(node);
    let exec_seconds = plugin_metric(node, EXEC_SECONDS_METRIC);
    let ms = |d: &Duration| format!("{:.0}", d.as_secs_f64() * 1000.0);
    println!(
        "node-pull: warm-up pod (layers pulled, imagePullSecret): {} ms",
        ms(&warm)
    );
    println!(
        "node-pull: imagePullSecret: {pods_each} pods, median {} ms (each: {})",
        ms(&median(with_secret.clone())),
        with_secret.iter().map(ms).collect::<Vec<_>>().join(" ")
    );
    println!(
        "node-pull: plugin: {pods_each} pods, {execs} exec(s) taking {:.1} ms (kubelet's histogram), first pod {} ms, \
         median {} ms (each: {})",
        exec_seconds * 1000.0,
        ms(&with_plugin[0]),
        ms(&median(with_plugin.clone())),
        with_plugin.iter().map(ms).collect::<Vec<_>>().join(" ")
    );
    assert_eq!(execs, 1, "{pods_each} pods within cacheDuration: one exec");
}
