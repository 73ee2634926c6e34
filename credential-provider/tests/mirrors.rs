//! Registry mirrors for every backend: the binary as kubelet runs it, with
//! mirrors from `--registry-mirror`, containerd's hosts.toml and CRI-O's
//! registries.conf (fixtures in tests/data/credential-provider/mirrors/),
//! for `static`, `passthrough`, `ecr` (against moto, signatures verified)
//! and `gcp` (against tests/fakes/gcp_server.py).

mod common;

use cluster_harness::Moto;
use common::aws_fake::{MOTO_PASSWORD, isolated_env, key_env};
use common::{Output, assert_one_line_failure, data, request, response, run, run_with_env};
use serde_json::Value;
use test_fakes::GcpFake;

const HUB_IMAGE: &str = "docker.io/library/nginx";

fn path(name: &str) -> String {
    data(&format!("mirrors/{name}")).display().to_string()
}

fn run_static(args: &[&str], image: &str) -> Output {
    let config = path("docker-config.json");
    let mut all = vec!["static", "--docker-config", config.as_str()];
    all.extend(args);
    run(&all, &request("v1", image, None))
}

fn success(what: &str, out: &Output) -> Value {
    assert_eq!(out.status, 0, "{what}: {}", out.stderr);
    response(&out.stdout)
}

/// The answer's keys and, for each, its username.
fn users(answer: &Value) -> Vec<(String, String)> {
    answer["auth"]
        .as_object()
        .map(|auth| {
            auth.iter()
                .map(|(key, entry)| (key.clone(), entry["username"].as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn pair(key: &str, user: &str) -> (String, String) {
    (key.to_owned(), user.to_owned())
}

#[test]
fn containerd_hosts_send_docker_hub_images_to_the_proxy_projects_credentials() {
    let hosts = path("certs.d");
    let answer = success(
        "hosts.toml",
        &run_static(&["--containerd-hosts-dir", &hosts], HUB_IMAGE),
    );
    assert_eq!(users(&answer), [pair("docker.io", "robot$proxy")]);
    assert_eq!(answer["auth"]["docker.io"]["password"], "proxy-project-password");
    assert_eq!(answer["cacheKeyType"], "Registry");
    // Negative twin: without the hosts, no entry serves Docker Hub.
    assert_eq!(users(&success("no mirrors", &run_static(&[], HUB_IMAGE))), []);
    // A registry whose hosts.toml names only itself is answered as without.
    let quay = success(
        "quay.io",
        &run_static(&["--containerd-hosts-dir", &hosts], "quay.io/org/app"),
    );
    assert_eq!(users(&quay), [pair("quay.io", "quay-user")]);
    // config_path's ':'-separated roots: the first holding the registry wins.
    let roots = format!("{}:{hosts}", path("certs.d-ecr"));
    let out = run_static(&["--containerd-hosts-dir", &roots], HUB_IMAGE);
    assert_eq!(
        users(&success("two roots", &out)),
        [],
        "the ECR cache is no Docker config entry"
    );
}

#[test]
fn the_flag_maps_a_registry_or_a_path() {
    let whole = success(
        "whole registry",
        &run_static(&["--registry-mirror", "docker.io:harbor.example.com"], HUB_IMAGE),
    );
    assert_eq!(users(&whole), [pair("docker.io", "robot$all")]);
    let project = success(
        "project path",
        &run_static(
            &["--registry-mirror", "docker.io:harbor.example.com/dockerhub-proxy"],
            HUB_IMAGE,
        ),
    );
    assert_eq!(users(&project), [pair("docker.io", "robot$proxy")]);
    // The variable, as a kubelet config's env gives it.
    let out = run_with_env(
        &["static", "--docker-config", &path("docker-config.json")],
        &request("v1", HUB_IMAGE, None),
        &[(
            "CLOUD_CREDENTIAL_PROVIDER_REGISTRY_MIRRORS",
            "quay.io:q.example,docker.io:harbor.example.com",
        )],
    );
    assert_eq!(users(&success("variable", &out)), [pair("docker.io", "robot$all")]);
}

#[test]
fn crio_prefixes_are_answered_per_image() {
    let conf = path("registries.conf");
    let team = success(
        "gcr.io/team",
        &run_static(&["--registries-conf", &conf], "gcr.io/team/app"),
    );
    assert_eq!(users(&team), [pair("gcr.io/team", "robot$all")]);
    assert_eq!(
        team["cacheKeyType"], "Image",
        "gcr.io's other repositories are not mirrored"
    );
    let other = success(
        "gcr.io/other",
        &run_static(&["--registries-conf", &conf], "gcr.io/other/app"),
    );
    assert_eq!(users(&other), []);
}

#[test]
fn passthrough_answers_the_pods_token_under_the_source() {
    let token = common::service_account_token(3600);
    let out = run(
        &[
            "passthrough",
            "--registry-mirror",
            "docker.io:harbor.example.com/dockerhub-proxy",
        ],
        &request("v1", HUB_IMAGE, Some(&token)),
    );
    let answer = success("passthrough", &out);
    assert_eq!(users(&answer), [pair("docker.io", "jwt")]);
    assert_eq!(answer["auth"]["docker.io"]["password"], token.as_str());
}

#[test]
fn ecr_pull_through_cache_answers_docker_hub_with_an_ecr_login() {
    let moto = Moto::start_authenticated();
    let mut env = isolated_env(&moto.url);
    env.extend(key_env(&moto.auth().user));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let hosts = path("certs.d-ecr");
    let out = run_with_env(
        &["ecr", "--containerd-hosts-dir", &hosts],
        &request("v1", HUB_IMAGE, None),
        &env,
    );
    let answer = success("ecr", &out);
    assert_eq!(users(&answer), [pair("docker.io", "AWS")]);
    assert_eq!(answer["auth"]["docker.io"]["password"], MOTO_PASSWORD);
    // Negative twin: a mirror that is no ECR registry fails with the mapping.
    let out = run_with_env(
        &[
            "ecr",
            "--registry-mirror",
            "docker.io:harbor.example.com/dockerhub-proxy",
        ],
        &request("v1", HUB_IMAGE, None),
        &env,
    );
    assert_one_line_failure(
        "not ECR",
        &out,
        "docker.io/library/nginx is pulled through the mirror harbor.example.com/dockerhub-proxy/library/nginx (--registry-mirror), whose credentials failed:",
    );
}

#[test]
fn artifact_registry_remote_repository_answers_with_the_nodes_token() {
    let fake = GcpFake::start();
    let endpoint = fake.base();
    let out = run_with_env(
        &[
            "gcp",
            "--sts-endpoint",
            &endpoint,
            "--iam-credentials-endpoint",
            &endpoint,
            "--registry-mirror",
            "docker.io:us-docker.pkg.dev/demo-project/dockerhub",
        ],
        &request("v1", HUB_IMAGE, None),
        &[("GCE_METADATA_HOST", &fake.host())],
    );
    let answer = success("gcp", &out);
    assert_eq!(users(&answer), [pair("docker.io", "_token")]);
    let password = answer["auth"]["docker.io"]["password"].as_str().unwrap_or_default();
    assert!(password.starts_with("ya29.metadata-"), "the metadata server's token");
    assert_eq!(answer["cacheKeyType"], "Registry");
}

#[test]
fn a_runtime_config_it_cannot_read_is_one_line_naming_the_field() {
    let out = run_static(&["--containerd-hosts-dir", &path("certs.d-broken")], HUB_IMAGE);
    assert_one_line_failure(
        "capability",
        &out,
        "capabilities holds \"fetch\": containerd knows pull, resolve and push",
    );
    assert!(
        out.stderr.contains("certs.d-broken/docker.io/hosts.toml"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("--containerd-hosts-dir"), "{}", out.stderr);
    let out = run_static(&["--registries-conf", &path("docker-config.json")], HUB_IMAGE);
    assert_one_line_failure("not TOML", &out, "not TOML");
    // A file that is not there names the flag that named it.
    let out = run_static(&["--registries-conf", "/nonexistent/registries.conf"], HUB_IMAGE);
    assert_one_line_failure(
        "missing",
        &out,
        "--registries-conf: /nonexistent/registries.conf: No such file",
    );
    // A bad flag is refused before any request is read.
    let out = run_static(&["--registry-mirror", "docker.io"], HUB_IMAGE);
    assert_one_line_failure("flag", &out, "is not SRC:DST");
}

/// A kubelet config in `dir` whose entries run this plugin (by name, or as
/// `harbor-credentials` in `bin`) with mirrors from the fixtures.
fn kubelet_config(dir: &std::path::Path) -> std::path::PathBuf {
    let config = dir.join("credential-provider-config.yaml");
    let text = format!(
        r#"apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: harbor-credentials
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: ["docker.io"]
  defaultCacheDuration: 10m
  args: [static, --docker-config, {docker_config}, --containerd-hosts-dir, {hosts}]
- name: cloud-credential-provider
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: ["docker.io", "gcr.io"]
  defaultCacheDuration: 10m
  args: [static, --docker-config, {docker_config}]
  env:
  - name: CLOUD_CREDENTIAL_PROVIDER_REGISTRIES_CONF
    value: {conf}
- name: other-plugin
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: ["docker.io"]
  defaultCacheDuration: 10m
"#,
        docker_config = path("docker-config.json"),
        hosts = path("certs.d"),
        conf = path("registries.conf"),
    );
    std::fs::write(&config, text).expect("write the config");
    config
}

/// The `mirror` of each provider in explain's JSON, by name.
fn mirrors_of(out: &Output) -> Vec<(String, Value)> {
    assert_eq!(out.status, 0, "{}", out.stderr);
    response(&out.stdout)["providers"]
        .as_array()
        .expect("providers")
        .iter()
        .map(|p| (p["name"].as_str().unwrap_or_default().to_owned(), p["mirror"].clone()))
        .collect()
}

#[test]
fn explain_shows_each_entrys_mapping() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let config = kubelet_config(tmp.path()).display().to_string();
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).expect("bin dir");
    for name in ["harbor-credentials", "cloud-credential-provider"] {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_cloud-credential-provider"), bin.join(name)).expect("link");
    }
    let bin = bin.display().to_string();
    let out = run(
        &["explain", "-o", "json", "--bin-dir", &bin, &config, "nginx:1.27"],
        b"",
    );
    let found = mirrors_of(&out);
    assert_eq!(found[0].0, "harbor-credentials");
    assert_eq!(found[0].1["target"], "harbor.example.com/dockerhub-proxy/library/nginx");
    assert_eq!(found[0].1["source_key"], "docker.io");
    assert_eq!(found[0].1["then_tries"], serde_json::json!(["registry-1.docker.io"]));
    assert_eq!(found[1].1, Value::Null, "registries.conf has no docker.io mirror");
    assert_eq!(found[2].1, Value::Null, "another plugin's mirrors are not known");
    // Without --bin-dir only the entry named after this plugin is read.
    let out = run(&["explain", "-o", "json", &config, "gcr.io/team/app"], b"");
    let found = mirrors_of(&out);
    assert_eq!(found[1].1["target"], "harbor.example.com/gcr-team/app");
    assert_eq!(found[1].1["source_key"], "gcr.io/team");
    // The text says the mapping, and where the credential goes on failure.
    let out = run(&["explain", "--bin-dir", &bin, &config, "nginx"], b"");
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("  mirror: pulled through the mirror harbor.example.com/dockerhub-proxy/library/nginx ("),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("when the mirror fails the runtime sends the same credential to registry-1.docker.io"),
        "{}",
        out.stdout
    );
}

#[test]
fn explain_says_when_an_entrys_mirrors_cannot_be_read() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let config = tmp.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: cloud-credential-provider\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  matchImages: [docker.io]\n  defaultCacheDuration: 1m\n  args: [static, --docker-config, x.json, --containerd-hosts-dir, {}]\n",
            path("certs.d-broken")
        ),
    )
    .expect("write");
    let out = run(&["explain", &config.display().to_string(), "nginx"], b"");
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("  mirror: cannot tell: ") && out.stdout.contains("capabilities holds \"fetch\""),
        "{}",
        out.stdout
    );
}

#[test]
fn token_exchange_is_asked_for_the_mirror_and_answered_under_the_source() {
    use common::token_server::{OPAQUE_TOKEN, TokenServer};
    let server = TokenServer::start();
    let token = common::service_account_token(3600);
    let url = server.url("/opaque");
    let out = run(
        &[
            "token-exchange",
            "--token-endpoint",
            &url,
            "--registry-mirror",
            "quay.io:harbor.example.com/quay-proxy",
        ],
        &request("v1", "quay.io/org/app", Some(&token)),
    );
    let answer = success("token-exchange", &out);
    assert_eq!(users(&answer), [pair("quay.io", "oauth2accesstoken")]);
    assert_eq!(answer["auth"]["quay.io"]["password"], OPAQUE_TOKEN);
    assert_eq!(server.last_form()["subject_token"], token.as_str());
}

#[test]
fn acr_takes_the_runtimes_mirrors_too() {
    use test_fakes::AzureFake;
    let fake = AzureFake::start();
    let base = fake.base();
    let config = test_fakes::azure::azure_data("managed-identity.json")
        .display()
        .to_string();
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("mcr.microsoft.com");
    std::fs::create_dir(&dir).expect("host dir");
    std::fs::write(
        dir.join("hosts.toml"),
        "[host.\"https://demo.azurecr.io\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
    )
    .expect("hosts.toml");
    let hosts = tmp.path().display().to_string();
    let run_acr = |extra: &[&str]| {
        let mut args = vec![
            "acr",
            config.as_str(),
            "--imds-endpoint",
            base.as_str(),
            "--authority-host",
            base.as_str(),
            "--registry-endpoint",
            base.as_str(),
        ];
        args.extend(extra);
        run(&args, &request("v1", "mcr.microsoft.com/oss/app", None))
    };
    let answer = success("acr", &run_acr(&["--containerd-hosts-dir", &hosts]));
    assert_eq!(
        users(&answer),
        [pair("mcr.microsoft.com", "00000000-0000-0000-0000-000000000000")]
    );
    // Without the hosts, mcr.microsoft.com is no ACR registry: nothing.
    let out = run_acr(&[]);
    assert_eq!(users(&success("no mirror", &out)), []);
}
