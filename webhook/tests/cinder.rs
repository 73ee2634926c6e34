//! OpenStack Cinder volume topology: the lookup against the fake of Keystone v3 and
//! Cinder v3 (tests/fakes/openstack_server.py, on one loopback port that the config's
//! `auth-url` points at; Cinder's endpoints come from its catalog), alone and behind
//! the shared cache and the reviewer. Nothing here reaches a real OpenStack. The pure
//! parts (which volumes, keys, labels of a volume; config errors; catalog choice) are
//! tested in `src/cinder.rs` and `cloud/src/openstack/`.

mod common;

use std::io::Write;
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cloud_access::openstack::OpenStackConfig;
use common::{Answer, create_review, csi, patched, pv};
use pv_topology_webhook::decision::DecisionConfig;
use pv_topology_webhook::lookup::cinder::{CinderLookup, NAME};
use pv_topology_webhook::lookup::{CachedLookup, LookupError, TopologyLookup};
use pv_topology_webhook::resolve::Resolver;
use pv_topology_webhook::review::Reviewer;
use pv_topology_webhook::rules::Rules;
use pv_topology_webhook::source::{InTree, VolumeIdentity};
use pv_topology_webhook::topology::Topology;
use serde_json::{Value, json};
use test_fakes::OpenStackFake as Fake;
use test_fakes::openstack::{PROJECT, TOKENS, openstack_data};

const DRIVER: &str = "cinder.csi.openstack.org";
const ZONAL: &str = "5a1c9e0e-1f6e-4d55-9a3e-3b0f4e0c7d11";
const NO_AZ: &str = "6b2d0f1f-2a7f-4e66-8b4f-4c1a5f1d8e22";
const SLOW: &str = "7c3e1a2a-3b80-4f77-9c5a-5d2b6a2e9f33";
const REGION_TWO: &str = "8d4f2b3b-4c91-4088-8d6b-6e3c7b3f0a44";
const UNKNOWN: &str = "9e5a3c4c-5da2-4199-9e7c-7f4d8c4a1b55";
const APP_SECRET: &str = "appcred-secret-Zq8x-do-not-log";
const PASSWORD: &str = "password-Xy7-do-not-log";
const APP_CREDENTIAL: &str = "application-credential-id = 7d3c5f0e8a1b4c2d9e6f0a1b2c3d4e5f\n";

fn get(prefix: &str, volume: &str) -> String {
    Fake::volume_get(prefix, volume)
}

/// `cloud.conf` for the fake: its Keystone, RegionOne, then `extra` lines (which win).
fn config_with(fake: &Fake, extra: &str) -> OpenStackConfig {
    let text = format!("[Global]\nauth-url = {}\nregion = RegionOne\n{extra}", fake.auth_url());
    OpenStackConfig::parse_cloud_conf(Path::new("cloud.conf"), &text, false).unwrap()
}

/// The application credential of the scenario.
fn config(fake: &Fake) -> OpenStackConfig {
    config_with(
        fake,
        &format!("{APP_CREDENTIAL}application-credential-secret = {APP_SECRET}\n"),
    )
}

fn lookup_of(config: &OpenStackConfig, deadline: Duration) -> CinderLookup {
    // As in main: one crypto provider for every rustls user in the process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    CinderLookup::new(config, deadline).unwrap()
}

fn in_tree(id: &str) -> VolumeIdentity {
    VolumeIdentity::in_tree(InTree::Cinder, id)
}

fn zones_and_region(topology: &Topology) -> (Vec<String>, Option<String>) {
    (topology.zones().to_vec(), topology.region().map(str::to_owned))
}

fn zoned(zone: &str, region: &str) -> (Vec<String>, Option<String>) {
    (vec![zone.to_owned()], Some(region.to_owned()))
}

fn region_only(region: &str) -> (Vec<String>, Option<String>) {
    (Vec::new(), Some(region.to_owned()))
}

fn terms(answer: &Answer) -> Value {
    patched(answer, "/spec/nodeAffinity")["required"]["nodeSelectorTerms"].clone()
}

#[tokio::test]
async fn in_tree_and_csi_volumes_get_zone_and_region_sharing_one_cache_entry() {
    let fake = Fake::start();
    let cached = Arc::new(CachedLookup::new(
        lookup_of(&config(&fake), Duration::from_secs(5)),
        NonZeroUsize::new(16).unwrap(),
        Duration::from_secs(60),
    ));
    let reviewer = Reviewer::new(
        Resolver::new(Rules::default()).with_lookup(cached.clone()),
        DecisionConfig::default(),
    );
    let spec = json!({"cinder": {"volumeID": ZONAL, "fsType": "ext4"}});
    let answer = common::review(&reviewer, &create_review(pv(spec, None))).await;
    assert!(answer.allowed(), "{:?}", answer.response());
    assert_eq!(
        (answer.outcome(), answer.audit("source")),
        ("labeled", Some("lookup openstack-cinder"))
    );
    assert_eq!(
        patched(&answer, "/metadata/labels"),
        json!({"topology.kubernetes.io/region": "RegionOne", "topology.kubernetes.io/zone": "nova-az1"})
    );
    assert_eq!(
        terms(&answer),
        json!([{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["nova-az1"]},
            {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["RegionOne"]}
        ]}])
    );
    // The CSI form of the same volume: the cache's answer, the driver's zone key.
    let answer = common::review(&reviewer, &create_review(pv(csi(DRIVER, ZONAL), None))).await;
    assert_eq!(answer.outcome(), "labeled", "{:?}", answer.response());
    assert_eq!(
        patched(&answer, "/metadata/labels")["topology.kubernetes.io/zone"],
        "nova-az1"
    );
    let expressions = terms(&answer)[0]["matchExpressions"].clone();
    assert!(
        expressions
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["key"] == "topology.cinder.csi.openstack.org/zone" && e["values"] == json!(["nova-az1"])),
        "{expressions}"
    );
    assert_eq!(cached.cache().len(), 1, "one entry for both forms");
    assert_eq!(fake.requests(&get("r1-public/v3", ZONAL)), 1);
    assert_eq!(fake.requests(TOKENS), 1);
    assert_eq!(fake.requests("header OpenStack-API-Version=volume 3.0"), 1);
    assert_eq!(cached.name(), NAME);
}

#[tokio::test]
async fn a_volume_without_an_az_and_ignore_volume_az_give_the_region_only() {
    let fake = Fake::start();
    let lookup = lookup_of(&config(&fake), Duration::from_secs(5));
    let topology = lookup.lookup(&in_tree(NO_AZ), common::soon()).await.unwrap();
    assert_eq!(zones_and_region(&topology), region_only("RegionOne"));

    let ignoring = config_with(
        &fake,
        &format!(
            "{APP_CREDENTIAL}application-credential-secret = {APP_SECRET}\n[BlockStorage]\nignore-volume-az = true\n"
        ),
    );
    assert!(ignoring.ignore_volume_az);
    let lookup = lookup_of(&ignoring, Duration::from_secs(5));
    let topology = lookup
        .lookup(&VolumeIdentity::csi(DRIVER, ZONAL), common::soon())
        .await
        .unwrap();
    assert_eq!(zones_and_region(&topology), region_only("RegionOne"));
    // The volume is still read: an unknown one is an error, not a label.
    assert_eq!(fake.requests(&get("r1-public/v3", ZONAL)), 1);
    assert!(lookup.lookup(&in_tree(UNKNOWN), common::soon()).await.is_err());
}

#[tokio::test]
async fn an_unknown_volume_names_the_volume_the_endpoint_and_cinders_message() {
    let fake = Fake::start();
    let lookup = lookup_of(&config(&fake), Duration::from_secs(5));
    let error = lookup.lookup(&in_tree(UNKNOWN), common::soon()).await.unwrap_err();
    let LookupError::Failed(message) = &error else {
        panic!("{error:?}");
    };
    let url = format!("{}r1-public/v3/{PROJECT}/volumes/{UNKNOWN}", fake.base());
    assert!(
        message.starts_with(&format!("Cinder volume {UNKNOWN:?}: ")),
        "{message}"
    );
    assert!(message.contains(&url), "{message}");
    assert!(
        message.contains(&format!("itemNotFound: Volume {UNKNOWN} could not be found.")),
        "{message}"
    );
    // A handle that cannot be a volume ID is refused before any call.
    let error = lookup
        .lookup(&in_tree("../../v3/other"), common::soon())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("volume ID"), "{error}");
    assert_eq!(fake.requests(TOKENS), 1);
}

#[tokio::test]
async fn wrong_credentials_carry_keystones_text_never_the_secret() {
    // A careless Keystone that quotes what it was sent.
    let fake = Fake::with(|s| s["keystone"]["echo_credentials"] = true.into());
    let wrong = "appcred-secret-WRONG-value-123";
    let bad = config_with(
        &fake,
        &format!("{APP_CREDENTIAL}application-credential-secret = {wrong}\n"),
    );
    let error = lookup_of(&bad, Duration::from_secs(5))
        .lookup(&in_tree(ZONAL), common::soon())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(&format!(
            "Keystone answered HTTP 401 for {}/auth/tokens: Unauthorized: Invalid application credential secret <redacted>.",
            fake.auth_url()
        )),
        "{error}"
    );
    assert!(!error.contains("WRONG"), "{error}");
    let bad = config_with(
        &fake,
        "username = cinder-reader\nuser-domain-name = Default\npassword = not-the-password-456\ntenant-id = 0123456789abcdef0123456789abcdef\n",
    );
    let error = lookup_of(&bad, Duration::from_secs(5))
        .lookup(&in_tree(ZONAL), common::soon())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("Keystone answered HTTP 401") && error.contains("Invalid password <redacted>"),
        "{error}"
    );
    assert!(!error.contains("not-the-password"), "{error}");
    assert_eq!(fake.requests(&get("r1-public/v3", ZONAL)), 0);
}

#[tokio::test]
async fn passwords_trusts_and_clouds_yaml_entries_authenticate() {
    let fake = Fake::start();
    for extra in [
        format!("username = cinder-reader\ndomain-name = Default\npassword = {PASSWORD}\ntenant-name = demo\n"),
        format!("user-id = u-0a1b2c3d\npassword = {PASSWORD}\ntrust-id = trust-1\n"),
        format!(
            "application-credential-name = cinder-lookup\nusername = cinder-reader\nuser-domain-name = Default\napplication-credential-secret = {APP_SECRET}\n"
        ),
    ] {
        let topology = lookup_of(&config_with(&fake, &extra), Duration::from_secs(5))
            .lookup(&in_tree(ZONAL), common::soon())
            .await
            .unwrap_or_else(|e| panic!("{extra}: {e}"));
        assert_eq!(zones_and_region(&topology), zoned("nova-az1", "RegionOne"));
    }
    let yaml = std::fs::read_to_string(openstack_data("clouds.yaml"))
        .unwrap()
        .replace("http://127.0.0.1:1/identity", &fake.auth_url().replace("/v3", ""));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clouds.yaml");
    std::fs::write(&path, yaml).unwrap();
    let config = OpenStackConfig::read_clouds_yaml(&path, "appcred", false).unwrap();
    let topology = lookup_of(&config, Duration::from_secs(5))
        .lookup(&in_tree(ZONAL), common::soon())
        .await
        .unwrap();
    assert_eq!(zones_and_region(&topology), zoned("nova-az1", "RegionOne"));
    assert_eq!(fake.requests(TOKENS), 4);
}

#[tokio::test]
async fn a_token_cinder_refuses_is_replaced_once() {
    let fake = Fake::with(|s| s["cinder"]["unauthorized_once"] = true.into());
    let lookup = lookup_of(&config(&fake), Duration::from_secs(5));
    let topology = lookup.lookup(&in_tree(ZONAL), common::soon()).await.unwrap();
    assert_eq!(zones_and_region(&topology), zoned("nova-az1", "RegionOne"));
    assert_eq!(fake.requests(TOKENS), 2, "a fresh token after the 401");
    assert_eq!(fake.requests(&get("r1-public/v3", ZONAL)), 2);
    // The fresh token is kept.
    lookup.lookup(&in_tree(NO_AZ), common::soon()).await.unwrap();
    assert_eq!(fake.requests(TOKENS), 2);
}

/// The advice about Cinder refusing a fresh token comes only after Cinder refused
/// one: Keystone refusing the credential is Keystone's 401, and Cinder is never called.
#[tokio::test]
async fn cinders_advice_only_when_cinder_refused_the_token() {
    const ADVICE: &str = "Cinder refused a fresh token too";
    let fake = Fake::start();
    let wrong = config_with(
        &fake,
        &format!("user-id = u-0a1b2c3d\npassword = {PASSWORD}-wrong\ntenant-id = {PROJECT}\n"),
    );
    let error = lookup_of(&wrong, Duration::from_secs(5))
        .lookup(&in_tree(ZONAL), common::soon())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("Keystone answered HTTP 401"), "{error}");
    assert!(!error.contains(ADVICE), "Cinder was never called: {error}");
    assert_eq!(fake.requests(&get("r1-public/v3", ZONAL)), 0);
    // Keystone's tokens expired when issued (a clock far off): Cinder refuses both.
    let fake = Fake::with(|s| s["keystone"]["expires_in"] = (-600).into());
    let error = lookup_of(&config(&fake), Duration::from_secs(5))
        .lookup(&in_tree(ZONAL), common::soon())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("Cinder answered HTTP 401"), "{error}");
    assert!(error.contains(ADVICE), "{error}");
    assert_eq!(fake.requests(&get("r1-public/v3", ZONAL)), 2);
}

#[tokio::test]
async fn a_token_is_refreshed_before_it_expires() {
    let fake = Fake::with(|s| s["keystone"]["expires_in"] = 2.into());
    let lookup = lookup_of(&config(&fake), Duration::from_secs(5));
    lookup.lookup(&in_tree(ZONAL), common::soon()).await.unwrap();
    lookup.lookup(&in_tree(NO_AZ), common::soon()).await.unwrap();
    assert_eq!(fake.requests(TOKENS), 1, "still fresh");
    // Past half its life (the refresh margin of a short-lived token).
    tokio::time::sleep(Duration::from_millis(1200)).await;
    lookup.lookup(&in_tree(ZONAL), common::soon()).await.unwrap();
    assert_eq!(fake.requests(TOKENS), 2);
}

#[tokio::test]
async fn a_slow_answer_past_the_deadline_times_out() {
    let fake = Fake::start();
    let deadline = Duration::from_millis(500);
    let lookup = lookup_of(&config(&fake), deadline);
    let started = Instant::now();
    let error = lookup
        .lookup(&in_tree(SLOW), common::within(deadline))
        .await
        .unwrap_err();
    // A timeout (lookups_total{result="timeout"}) naming the endpoint it waited for
    // (the resolver adds the budget: the_resolvers_deadline_names_the_volume_and_the_endpoint).
    let volume_url = format!("{}r1-public/v3/{PROJECT}/volumes/{SLOW}", fake.base());
    assert_eq!(error, LookupError::timed_out(Some(volume_url.clone())));
    assert_eq!(error.to_string(), format!("timed out waiting for {volume_url}"));
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    // A slow Keystone too: its tokens URL is named.
    let fake = Fake::with(|s| s["keystone"]["delay_seconds"] = 3.into());
    let lookup = lookup_of(&config(&fake), deadline);
    let error = lookup
        .lookup(&in_tree(ZONAL), common::within(deadline))
        .await
        .unwrap_err();
    let tokens_url = format!("{}identity/v3/auth/tokens", fake.base());
    assert_eq!(error, LookupError::timed_out(Some(tokens_url)));
}

#[tokio::test]
async fn the_resolvers_deadline_names_the_volume_and_the_endpoint() {
    use pv_topology_webhook::decision::OnLookupError;
    use pv_topology_webhook::model::{LookupFailure, Resolution, Timeout};
    let fake = Fake::start();
    // The lookup's HTTP client's cap is far; the resolver's deadline ends it, and asks the lookup
    // (behind the cache) which endpoint it was waiting on.
    let cached = Arc::new(CachedLookup::new(
        lookup_of(&config(&fake), Duration::from_secs(10)),
        NonZeroUsize::new(16).unwrap(),
        Duration::from_secs(60),
    ));
    let resolver = Resolver::new(Rules::default())
        .with_lookup(cached)
        .with_deadline(Duration::from_millis(500));
    let cinder = format!("{}r1-public/v3/{PROJECT}", fake.base());
    let started = Instant::now();
    let resolution = resolver.resolve(&in_tree(SLOW)).await;
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    // A timeout, as lookups_total{result="timeout"} counts it.
    assert_eq!(
        resolution,
        Resolution::LookupFailed {
            lookup: NAME.to_owned(),
            error: LookupFailure::TimedOut(Timeout {
                after: Duration::from_millis(500),
                endpoint: Some(cinder.clone()),
            }),
        }
    );
    // The denial: the volume, the lookup, the endpoint.
    let reviewer = Reviewer::new(
        resolver,
        DecisionConfig {
            on_lookup_error: OnLookupError::Deny,
            ..DecisionConfig::default()
        },
    );
    let answer = common::review(&reviewer, &create_review(pv(csi(DRIVER, SLOW), None))).await;
    assert!(!answer.allowed());
    assert_eq!(answer.outcome(), "lookup-failed");
    let message = answer.message();
    assert!(
        message.contains(SLOW)
            && message.contains(&format!(
                "lookup openstack-cinder failed: timed out after 500ms waiting for {cinder}"
            )),
        "{message}"
    );
    assert!(!message.contains(APP_SECRET), "{message}");
}

#[tokio::test]
async fn the_region_and_interface_pick_the_catalog_endpoint() {
    let fake = Fake::start();
    let secret = format!("{APP_CREDENTIAL}application-credential-secret = {APP_SECRET}\n");
    let two = config_with(&fake, &format!("{secret}region = RegionTwo\n"));
    let topology = lookup_of(&two, Duration::from_secs(5))
        .lookup(&in_tree(REGION_TWO), common::soon())
        .await
        .unwrap();
    assert_eq!(zones_and_region(&topology), zoned("nova-az2", "RegionTwo"));
    assert_eq!(fake.requests(&get("r2-public/v3", REGION_TWO)), 1);
    for (interface, prefix) in [("internal", "r1-internal/v3"), ("admin", "r1-admin/v3")] {
        let config = config_with(&fake, &format!("{secret}os-endpoint-type = {interface}\n"));
        lookup_of(&config, Duration::from_secs(5))
            .lookup(&in_tree(ZONAL), common::soon())
            .await
            .unwrap();
        assert_eq!(fake.requests(&get(prefix, ZONAL)), 1, "{interface}");
    }
    assert_eq!(fake.requests(&get("r1-public/v3", ZONAL)), 0);
    // RegionOne's volume is not RegionTwo's.
    let error = lookup_of(&two, Duration::from_secs(5))
        .lookup(&in_tree(ZONAL), common::soon())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("itemNotFound"), "{error}");
    let three = config_with(&fake, &format!("{secret}region = RegionThree\n"));
    let error = lookup_of(&three, Duration::from_secs(5))
        .lookup(&in_tree(ZONAL), common::soon())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("no block-storage endpoint")
            && error.contains("\"RegionThree\"")
            && error.contains("volumev3 in RegionTwo (public)"),
        "{error}"
    );
}

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn no_secret_or_token_in_any_error_or_log_line() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let fake = Fake::with(|s| {
        s["keystone"]["echo_credentials"] = true.into();
        s["cinder"]["unauthorized_once"] = true.into();
    });
    let mut errors = Vec::new();
    let good = lookup_of(&config(&fake), Duration::from_secs(5));
    good.lookup(&in_tree(ZONAL), common::soon()).await.unwrap();
    errors.push(
        good.lookup(&in_tree(UNKNOWN), common::soon())
            .await
            .unwrap_err()
            .to_string(),
    );
    errors.push(format!("{good:?}"));
    errors.push(format!("{:?}", config(&fake)));
    let bad = config_with(
        &fake,
        &format!("{APP_CREDENTIAL}application-credential-secret = {APP_SECRET}-not\n"),
    );
    errors.push(
        lookup_of(&bad, Duration::from_secs(5))
            .lookup(&in_tree(ZONAL), common::soon())
            .await
            .unwrap_err()
            .to_string(),
    );
    let bad = config_with(
        &fake,
        &format!("user-id = u-0a1b2c3d\npassword = {PASSWORD}-not\ntenant-id = {PROJECT}\n"),
    );
    errors.push(
        lookup_of(&bad, Duration::from_secs(5))
            .lookup(&in_tree(ZONAL), common::soon())
            .await
            .unwrap_err()
            .to_string(),
    );
    let logs = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
    assert!(logs.contains("Cinder refused the token"), "the 401 was logged: {logs}");
    for text in errors.iter().chain([&logs]) {
        for secret in [APP_SECRET, PASSWORD, "fake-token-"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
    assert_eq!(fake.requests(TOKENS), 4);
}

/// A CA and a certificate it issued for 127.0.0.1, written to `dir`: (CA, leaf, key).
fn certificates(dir: &Path) -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let mut ca_params = CertificateParams::default();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    (
        write("ca.pem", ca.pem()),
        write("leaf.pem", leaf.pem()),
        write("leaf.key", key.serialize_pem()),
    )
}

#[tokio::test]
async fn keystone_and_cinder_over_tls_with_the_config_ca_file() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates(dir.path());
    let fake = Fake::with(|s| s["tls"] = json!({"cert": cert, "key": key}));
    let text = |extra: &str| {
        format!(
            "[Global]\nauth-url = {}identity/v3\nregion = RegionOne\n{APP_CREDENTIAL}application-credential-secret = {APP_SECRET}\n{extra}",
            fake.tls_base()
        )
    };
    let read = |extra: &str, allow_insecure| {
        OpenStackConfig::parse_cloud_conf(Path::new("cloud.conf"), &text(extra), allow_insecure)
    };
    let config = read(&format!("ca-file = {ca}\n"), false).unwrap();
    let topology = lookup_of(&config, Duration::from_secs(5))
        .lookup(&in_tree(ZONAL), common::soon())
        .await
        .unwrap();
    assert_eq!(zones_and_region(&topology), zoned("nova-az1", "RegionOne"));
    // The system's roots do not know the test's CA.
    let error = lookup_of(&read("", false).unwrap(), Duration::from_secs(5))
        .lookup(&in_tree(ZONAL), common::soon())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(&format!(
            "cannot reach Keystone at {}identity/v3/auth/tokens",
            fake.tls_base()
        )),
        "{error}"
    );
    // tls-insecure: refused unless allowed, then no certificate is checked.
    let refused = read("tls-insecure = true\n", false).unwrap_err().to_string();
    assert!(refused.contains("[Global] tls-insecure: "), "{refused}");
    let insecure = read("tls-insecure = true\n", true).unwrap();
    lookup_of(&insecure, Duration::from_secs(5))
        .lookup(&in_tree(NO_AZ), common::soon())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_plain_http_endpoint_off_loopback_never_receives_the_token() {
    // 192.0.2.0/24 is TEST-NET-1: refused before any connection.
    let fake = Fake::with(|s| {
        s["keystone"]["catalog"][3]["endpoints"][1]["url"] = "http://192.0.2.10:8776/v3/{project}".into();
    });
    let config = config_with(
        &fake,
        &format!("{APP_CREDENTIAL}application-credential-secret = {APP_SECRET}\nos-endpoint-type = internal\n"),
    );
    let error = lookup_of(&config, Duration::from_secs(5))
        .lookup(&in_tree(ZONAL), common::soon())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("the block-storage endpoint \"http://192.0.2.10:8776/v3/")
            && error.contains("uses http")
            && error.contains("set os-endpoint-type (interface) to one whose endpoint is https"),
        "{error}"
    );
    assert_eq!(fake.requests(TOKENS), 1);
}
