//! `static` against real Docker config files.

mod common;

use common::{data, request, response, run};

fn run_static(config: &str, image: &str) -> common::Output {
    let path = data(config).display().to_string();
    run(&["static", "--docker-config", &path], &request("v1", image, None))
}

fn auth_keys(stdout: &str) -> Vec<String> {
    let response = response(stdout);
    response["auth"]
        .as_object()
        .map(|auth| auth.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn returns_every_entry_for_the_images_registry() {
    let out = run_static("docker-config.json", "registry.example.com/team-a/app");
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(
        auth_keys(&out.stdout),
        ["registry.example.com", "registry.example.com/team-b"]
    );
    let response = response(&out.stdout);
    assert_eq!(response["cacheKeyType"], "Registry");
    assert!(
        response.get("cacheDuration").is_none(),
        "no flag: kubelet's default applies"
    );
    assert_eq!(response["auth"]["registry.example.com"]["username"], "robot$team");
    assert_eq!(
        response["auth"]["registry.example.com"]["password"],
        "s3cr3t-team-password"
    );
}

#[test]
fn accepts_images_with_tags_and_digests_defensively() {
    let out = run_static("docker-config.json", "registry.example.com/team-a/app:v1@sha256:0123");
    assert_eq!(
        auth_keys(&out.stdout),
        ["registry.example.com", "registry.example.com/team-b"]
    );
}

#[test]
fn docker_hub_images_use_the_index_docker_io_entry() {
    for image in ["docker.io/library/nginx", "nginx", "library/nginx:1.27"] {
        let out = run_static("docker-config.json", image);
        assert_eq!(auth_keys(&out.stdout), ["https://index.docker.io/v1/"], "{image}");
    }
}

#[test]
fn wildcard_entries_and_ports() {
    let out = run_static("docker-config.json", "eu.mirror.example.net/x/y");
    assert_eq!(auth_keys(&out.stdout), ["*.mirror.example.net"]);
    let out = run_static("docker-config.json", "localhost:5000/app");
    assert_eq!(auth_keys(&out.stdout), ["localhost:5000"]);
    // Port 5001 is another registry; an entry without a port is too.
    let out = run_static("docker-config.json", "localhost:5001/app");
    assert!(auth_keys(&out.stdout).is_empty());
}

#[test]
fn no_matching_entry_is_an_empty_answer_not_an_error() {
    // ghcr.io has an empty entry (its secret lives in a credential store).
    for image in ["ghcr.io/org/app", "quay.io/org/app"] {
        let out = run_static("docker-config.json", image);
        assert_eq!(out.status, 0, "{}", out.stderr);
        assert!(auth_keys(&out.stdout).is_empty(), "{image}");
        assert_eq!(response(&out.stdout)["cacheKeyType"], "Registry");
    }
}

#[test]
fn a_broken_file_is_an_error_naming_the_file_and_entry() {
    let cases = [
        (
            "docker-config-bad-auth.json",
            r#"auths["registry.example.com"].auth is not base64"#,
        ),
        (
            "docker-config-no-colon.json",
            r#"auths["registry.example.com"].auth decodes to text without the ':'"#,
        ),
        ("docker-config-truncated.json", "is not valid JSON (line 1"),
        ("does-not-exist.json", "cannot read --docker-config"),
        ("response-static-v1.json", "\"auths\" is missing"),
    ];
    for (file, want) in cases {
        let out = run_static(file, "registry.example.com/app");
        assert_eq!(out.status, 1, "{file}");
        assert!(out.stdout.is_empty(), "{file}: {}", out.stdout);
        assert!(
            out.stderr.contains(want),
            "{file}: {:?} should contain {want:?}",
            out.stderr
        );
        assert!(
            out.stderr.contains(file),
            "{file}: the message names the file: {}",
            out.stderr
        );
    }
}

#[test]
fn flags_come_from_the_environment_too() {
    let path = data("docker-config.json").display().to_string();
    let out = common::run_with_env(
        &["static"],
        &request("v1", "registry.example.com/app", None),
        &[
            ("CLOUD_CREDENTIAL_PROVIDER_DOCKER_CONFIG", &path),
            ("CLOUD_CREDENTIAL_PROVIDER_CACHE_DURATION", "90m"),
        ],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(response(&out.stdout)["cacheDuration"], "1h30m0s");
}

#[test]
fn a_bad_cache_duration_names_the_flag() {
    let path = data("docker-config.json").display().to_string();
    let out = run(
        &["static", "--docker-config", &path, "--cache-duration", "1d"],
        &request("v1", "registry.example.com/app", None),
    );
    assert_eq!(out.status, 1);
    assert!(out.stderr.contains("--cache-duration"), "{}", out.stderr);
    assert!(out.stderr.contains("unknown unit \"d\""), "{}", out.stderr);
}

#[test]
fn only_a_regular_file_of_bounded_size_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.json");
    common::mkfifo(&fifo);
    let big = dir.path().join("big.json");
    std::fs::File::create(&big).unwrap().set_len(64 << 20).unwrap();
    let cases = [
        ("/dev/zero".into(), "is a character device, not a regular file"),
        (fifo, "is a FIFO, not a regular file"),
        (big.clone(), "larger than"),
    ];
    for (path, want) in cases {
        let shown = path.display().to_string();
        let out = run(
            &["static", "--docker-config", &shown],
            &request("v1", "registry.example.com/app", None),
        );
        common::assert_one_line_failure(&shown, &out, want);
        assert!(out.stderr.contains("--docker-config"), "{}", out.stderr);
        assert!(out.stderr.contains(&shown), "{}", out.stderr);
    }
}

#[test]
fn a_byte_order_mark_is_accepted_and_a_lone_password_refused() {
    let dir = tempfile::tempdir().unwrap();
    let with_bom = dir.path().join("bom.json");
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(std::fs::read(data("docker-config.json")).unwrap());
    std::fs::write(&with_bom, bytes).unwrap();
    let out = run(
        &["static", "--docker-config", &with_bom.display().to_string()],
        &request("v1", "registry.example.com/team-a/app", None),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(
        auth_keys(&out.stdout),
        ["registry.example.com", "registry.example.com/team-b"]
    );

    // A password without its username is as broken as the reverse.
    let lone = dir.path().join("lone.json");
    std::fs::write(
        &lone,
        r#"{"auths": {"registry.example.com": {"password": "lone-password-value"}}}"#,
    )
    .unwrap();
    let out = run(
        &["static", "--docker-config", &lone.display().to_string()],
        &request("v1", "registry.example.com/app", None),
    );
    common::assert_one_line_failure(
        "lone password",
        &out,
        r#"auths["registry.example.com"].username is missing next to "password""#,
    );
    assert!(!out.stderr.contains("lone-password-value"), "{}", out.stderr);
}

/// Issue 9's re-test: an entry with only an `identitytoken` (an OAuth
/// refresh token, which `docker login` keeps for some registries) was
/// skipped without a word. kubelet's answer carries a username and password
/// only, so the token is of no use to it: an error naming the entry, as for a
/// lone username or password. Next to `auth` it is ignored, as by kubelet.
#[test]
fn an_entry_with_only_an_identity_token_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("identity.json");
    std::fs::write(
        &file,
        r#"{"auths": {"registry.example.com": {"identitytoken": "identity-token-value-0123456789"}}}"#,
    )
    .unwrap();
    let out = run(
        &["static", "--docker-config", &file.display().to_string()],
        &request("v1", "registry.example.com/app", None),
    );
    common::assert_one_line_failure(
        "lone identity token",
        &out,
        r#"auths["registry.example.com"].identitytoken cannot be used"#,
    );
    assert!(!out.stderr.contains("identity-token-value"), "{}", out.stderr);

    std::fs::write(
        &file,
        r#"{"auths": {"registry.example.com": {"auth": "dTpw", "identitytoken": "identity-token-value-0123456789"}}}"#,
    )
    .unwrap();
    let out = run(
        &["static", "--docker-config", &file.display().to_string()],
        &request("v1", "registry.example.com/app", None),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
}
