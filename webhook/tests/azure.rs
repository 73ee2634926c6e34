//! Azure managed disk topology from ARM `Disks.Get`: the `review` binary with
//! `--azure-disk-lookup` against the fake of Azure's APIs (tests/fakes/azure_server.py:
//! IMDS, Entra ID and ARM on one loopback port, which `--azure-imds-endpoint`,
//! `--azure-authority-endpoint` and `--azure-arm-endpoint` point at, so nothing here
//! reaches an Azure address or IMDS's 169.254.169.254), and the lookup itself behind the
//! shared cache. The pure parts (which volumes, keys, labels of a disk) are tested in
//! `src/azure.rs`.

mod common;

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cloud_access::SecureEndpoint;
use cloud_access::azure::AzureConfig;
use common::{Answer, assert_idempotent, create_review, csi, patched, pv, review_binary};
use pv_topology_webhook::decision::DecisionConfig;
use pv_topology_webhook::lookup::azure::{AzureDiskLookup, AzureEndpoints};
use pv_topology_webhook::lookup::{CachedLookup, LookupError, TopologyLookup};
use pv_topology_webhook::metrics::Metrics;
use pv_topology_webhook::resolve::Resolver;
use pv_topology_webhook::review::Reviewer;
use pv_topology_webhook::rules::Rules;
use pv_topology_webhook::source::{InTree, VolumeIdentity};
use serde_json::{Value, json};
use test_fakes::AzureFake as Fake;
use test_fakes::azure::{azure_data, azure_federated_token};

const DRIVER: &str = "disk.csi.azure.com";
const SUBSCRIPTION: &str = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";
const DENIED_SUBSCRIPTION: &str = "dddddddd-0000-4000-8000-00000000d0d0";
const GROUP: &str = "MC_demo_demo_eastus";
const IMDS_TOKEN: &str = "GET /metadata/identity/oauth2/token";
const ENTRA_TOKEN: &str = "POST /11111111-2222-4333-8444-555555555555/oauth2/v2.0/token";
/// The workload identity variables, empty (unset) unless a test sets them: the test
/// runner's own must not reach the binary.
const NO_WORKLOAD_IDENTITY: [(&str, &str); 4] = [
    ("AZURE_CLIENT_ID", ""),
    ("AZURE_TENANT_ID", ""),
    ("AZURE_CLIENT_SECRET", ""),
    ("AZURE_FEDERATED_TOKEN_FILE", ""),
];

fn uri(name: &str) -> String {
    format!("/subscriptions/{SUBSCRIPTION}/resourceGroups/{GROUP}/providers/Microsoft.Compute/disks/{name}")
}

fn disk_get(name: &str) -> String {
    format!("GET {}", uri(name))
}

/// The fake with tests/data/azure/scenario.json's disks (pvc-zonal in zone 2, pvc-zrs,
/// pvc-regional, pvc-slow answering after 3 s) and pvc-busy answering after 400 ms.
fn start(edit: impl FnOnce(&mut Value)) -> Fake {
    Fake::with(|scenario| {
        scenario["arm"]["disks"].as_array_mut().unwrap().push(json!({
            "subscription": SUBSCRIPTION, "resourceGroup": GROUP, "name": "pvc-busy",
            "location": "eastus", "zones": ["3"], "sku": "PremiumV2_LRS", "delay_seconds": 0.4
        }));
        edit(scenario);
    })
}

fn in_tree(uri: &str) -> Value {
    json!({"azureDisk": {"diskName": uri.rsplit('/').next().unwrap_or_default(), "diskURI": uri, "kind": "Managed"}})
}

/// `review --azure-disk-lookup` with the config `config` (in tests/data/azure) of `pv`,
/// every endpoint at the fake.
fn review_with(fake: &Fake, config: &str, pv: Value, extra: &[&str], env: &[(&str, &str)]) -> Answer {
    let config = format!("--azure-config={}", azure_data(config).display());
    let endpoints = [
        format!("--azure-arm-endpoint={}", fake.base()),
        format!("--azure-authority-endpoint={}", fake.base()),
        format!("--azure-imds-endpoint={}", fake.base()),
    ];
    let mut args = vec!["--azure-disk-lookup", config.as_str()];
    args.extend(endpoints.iter().map(String::as_str));
    args.extend(extra);
    let mut vars: Vec<(&str, &str)> = NO_WORKLOAD_IDENTITY.to_vec();
    vars.extend(env);
    review_binary(&args, &vars, pv)
}

fn review(fake: &Fake, pv: Value, extra: &[&str]) -> Answer {
    review_with(fake, "managed-identity.json", pv, extra, &[])
}

fn labels(answer: &Answer) -> Value {
    patched(answer, "/metadata/labels")
}

fn terms(answer: &Answer) -> Value {
    patched(answer, "/spec/nodeAffinity")["required"]["nodeSelectorTerms"].clone()
}

#[tokio::test]
async fn a_zonal_disk_gets_its_zone_in_tree_and_csi() {
    let fake = start(|_| {});
    let answer = review(&fake, pv(in_tree(&uri("pvc-zonal")), None), &[]);
    assert!(answer.allowed(), "{:?}", answer.response());
    assert_eq!(
        (answer.outcome(), answer.audit("source")),
        ("labeled", Some("lookup azure-disk"))
    );
    assert_eq!(
        labels(&answer),
        json!({"topology.kubernetes.io/region": "eastus", "topology.kubernetes.io/zone": "eastus-2"})
    );
    assert_eq!(
        terms(&answer),
        json!([{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["eastus-2"]},
            {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eastus"]}
        ]}])
    );
    assert_eq!(fake.requests(&disk_get("pvc-zonal")), 1);
    assert_eq!(fake.requests(IMDS_TOKEN), 1);

    // The CSI handle, its keywords in another case: the driver's key, zone only.
    let handle =
        format!("/subscriptions/{SUBSCRIPTION}/resourcegroups/{GROUP}/providers/microsoft.compute/disks/pvc-zonal");
    let answer = review(&fake, pv(csi(DRIVER, &handle), None), &[]);
    assert_eq!(answer.outcome(), "labeled");
    assert_eq!(labels(&answer)["topology.kubernetes.io/zone"], "eastus-2");
    assert_eq!(
        terms(&answer),
        json!([{"matchExpressions": [
            {"key": "topology.disk.csi.azure.com/zone", "operator": "In", "values": ["eastus-2"]}
        ]}])
    );
}

#[tokio::test]
async fn zone_redundant_and_non_zonal_disks_get_the_region_only() {
    let fake = start(|_| {});
    for name in ["pvc-zrs", "pvc-regional"] {
        // In-tree: the region label, and the region requirement alone.
        let answer = review(&fake, pv(in_tree(&uri(name)), None), &[]);
        assert_eq!(answer.outcome(), "labeled", "{name}");
        assert_eq!(
            labels(&answer),
            json!({"topology.kubernetes.io/region": "eastus"}),
            "{name}"
        );
        assert_eq!(
            terms(&answer),
            json!([{"matchExpressions": [
                {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eastus"]}
            ]}]),
            "{name}"
        );
        // CSI: the region label and no nodeAffinity at all (never an empty zone).
        let answer = review(&fake, pv(csi(DRIVER, &uri(name)), None), &[]);
        assert_eq!(answer.outcome(), "labeled", "{name}");
        assert_eq!(
            labels(&answer),
            json!({"topology.kubernetes.io/region": "eastus"}),
            "{name}"
        );
        assert_eq!(patched(&answer, "/spec/nodeAffinity"), Value::Null, "{name}");
        assert!(
            !answer.raw_patch().unwrap().contains("\"\""),
            "{:?}",
            answer.raw_patch()
        );
    }
}

#[tokio::test]
async fn a_uri_that_names_no_managed_disk_is_refused_without_a_call() {
    let fake = start(|_| {});
    for object in [
        pv(in_tree("https://demo.blob.core.windows.net/vhds/pvc-zonal.vhd"), None),
        pv(csi(DRIVER, "/subscriptions/s/d"), None),
        pv(
            csi(
                DRIVER,
                &format!(
                    "/subscriptions/{SUBSCRIPTION}/resourceGroups/{GROUP}/providers/Microsoft.Compute/snapshots/s"
                ),
            ),
            None,
        ),
    ] {
        let answer = review(&fake, object, &[]);
        assert!(!answer.allowed());
        assert_eq!(answer.outcome(), "lookup-failed");
        let message = answer.message();
        assert!(
            message.contains("lookup azure-disk failed: ") && message.contains("does not name a managed disk"),
            "{message}"
        );
    }
    assert_eq!(fake.all_requests(), 0, "{}", fake.counts());
}

#[tokio::test]
async fn refusals_carry_arms_code_and_message() {
    let fake = start(|_| {});
    let denied = format!(
        "/subscriptions/{DENIED_SUBSCRIPTION}/resourceGroups/{GROUP}/providers/Microsoft.Compute/disks/pvc-zonal"
    );
    let answer = review(&fake, pv(csi(DRIVER, &denied), None), &[]);
    assert!(!answer.allowed());
    let message = answer.message();
    for part in [
        "lookup azure-disk failed: ARM Disks.Get answered HTTP 403 (the identity of --azure-config",
        "needs Microsoft.Compute/disks/read, e.g. Reader on the disk's group",
        "): AuthorizationFailed: The client '00000000-0000-0000-0000-00000000a11e'",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }

    // Not found: ARM's 404 and its code, denied; with allow, admitted with the warning.
    let answer = review(&fake, pv(in_tree(&uri("pvc-gone")), None), &[]);
    assert!(!answer.allowed());
    assert!(
        answer.message().contains(
            "ARM Disks.Get answered HTTP 404: ResourceNotFound: The Resource 'Microsoft.Compute/disks/pvc-gone'"
        ),
        "{}",
        answer.message()
    );
    let answer = review(
        &fake,
        pv(in_tree(&uri("pvc-gone")), None),
        &["--on-lookup-error", "allow"],
    );
    assert!(answer.allowed());
    assert!(answer.patch().is_none());
    assert_eq!(answer.outcome(), "lookup-failed");
    assert!(
        answer.warnings().iter().any(|w| w.contains("ResourceNotFound")),
        "{:?}",
        answer.warnings()
    );
}

#[tokio::test]
async fn lookups_end_at_the_deadline() {
    let fake = start(|_| {});
    let started = Instant::now();
    // pvc-slow answers after 3 s.
    let answer = review(
        &fake,
        pv(in_tree(&uri("pvc-slow")), None),
        &["--lookup-timeout", "500ms"],
    );
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
    assert!(!answer.allowed());
    // The endpoint waited on is named (Resource Manager, the fake).
    let waited = format!(
        "lookup azure-disk failed: timed out after 500ms waiting for {}",
        fake.base()
    );
    assert!(answer.message().contains(&waited), "{}", answer.message());
}

/// The lookup as the program builds it, from `config` (tests/data/azure), every
/// endpoint at the fake.
fn lookup(fake: &Fake, config: &str, deadline: Duration) -> AzureDiskLookup {
    // As in main: one crypto provider for every rustls user in the process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = AzureConfig::read(&azure_data(config)).unwrap();
    let at_fake = || Some(SecureEndpoint::parse("test endpoint", &fake.base()).unwrap());
    let endpoints = AzureEndpoints {
        resource_manager: at_fake(),
        authority_host: at_fake(),
        imds: at_fake(),
    };
    AzureDiskLookup::new(&config, &endpoints, deadline).unwrap()
}

fn in_tree_volume(name: &str) -> VolumeIdentity {
    VolumeIdentity::in_tree(InTree::AzureDisk, uri(name))
}

#[tokio::test]
async fn the_lookup_ends_at_the_deadline_it_is_given() {
    let fake = start(|_| {});
    let deadline = Duration::from_millis(300);
    let started = Instant::now();
    let error = lookup(&fake, "managed-identity.json", deadline)
        .lookup(&in_tree_volume("pvc-slow"), common::within(deadline))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    // The disk's URL at Resource Manager, where the time ran out (no api-version query).
    let LookupError::TimedOut { endpoint } = &error else {
        panic!("a timeout: {error}")
    };
    let endpoint = endpoint.as_deref().unwrap_or_default();
    assert!(
        endpoint.starts_with(&fake.base()) && endpoint.ends_with("/disks/pvc-slow"),
        "{error}"
    );
    // Told by the resolver, whose budget it is.
    let resolver = Resolver::new(Rules::default())
        .with_lookup(Arc::new(lookup(&fake, "managed-identity.json", deadline)))
        .with_deadline(deadline);
    let pv_topology_webhook::resolve::Resolution::LookupFailed {
        error: pv_topology_webhook::resolve::LookupFailure::TimedOut(timeout),
        ..
    } = resolver.resolve(&in_tree_volume("pvc-slow")).await
    else {
        panic!("a timeout")
    };
    assert_eq!(timeout.after, deadline);
}

#[tokio::test]
async fn an_expiring_token_is_refreshed() {
    // IMDS tokens valid for 4 s: kept for half of that (the refresh margin, capped at
    // half a token's life), then a new one is fetched while the old one is still valid,
    // so a margin of zero would fail here (and the fake refuses expired tokens with 401).
    let fake = start(|scenario| scenario["imds"]["identity"]["expires_in"] = json!(4));
    let lookup = lookup(&fake, "managed-identity.json", Duration::from_secs(5));
    let zonal = in_tree_volume("pvc-zonal");
    lookup.lookup(&zonal, common::soon()).await.unwrap();
    lookup.lookup(&zonal, common::soon()).await.unwrap();
    assert_eq!(fake.requests(IMDS_TOKEN), 1);
    tokio::time::sleep(Duration::from_millis(2300)).await;
    let topology = lookup.lookup(&zonal, common::soon()).await.unwrap();
    assert_eq!(topology.zones(), ["eastus-2"]);
    assert_eq!(fake.requests(IMDS_TOKEN), 2);
    assert_eq!(fake.requests(&disk_get("pvc-zonal")), 3);
}

#[tokio::test]
async fn concurrent_reviews_of_one_disk_make_one_call() {
    let fake = start(|_| {});
    let metrics = Metrics::new();
    // As the program builds it: behind the shared lookup cache, counted as "azure-disk".
    let cached = CachedLookup::new(
        lookup(&fake, "managed-identity.json", Duration::from_secs(5)),
        NonZeroUsize::new(16).unwrap(),
        Duration::from_secs(60),
    )
    .with_counters(metrics.cache_counters("azure-disk"));
    let resolver = Resolver::new(Rules::default())
        .with_lookup(Arc::new(cached))
        .with_deadline(Duration::from_secs(5));
    let reviewer = Arc::new(Reviewer::new(resolver, DecisionConfig::default()));
    // Five in-tree and five CSI reviews of pvc-busy (answering after 400 ms): one disk.
    let bodies = [
        create_review(pv(in_tree(&uri("pvc-busy")), None)),
        create_review(pv(csi(DRIVER, &uri("PVC-BUSY")), None)),
    ];
    let tasks: Vec<_> = (0..10)
        .map(|i| {
            let (reviewer, body) = (reviewer.clone(), bodies[i % 2].clone());
            tokio::spawn(async move { common::review(&reviewer, &body).await })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    for (i, answer) in answers.iter().enumerate() {
        assert_eq!(answer.bytes, answers[i % 2].bytes);
        assert_eq!(labels(answer)["topology.kubernetes.io/zone"], "eastus-3");
    }
    assert_eq!(
        fake.requests(&disk_get("pvc-busy")),
        1,
        "one Disks.Get for ten concurrent reviews"
    );
    assert_eq!(fake.requests(IMDS_TOKEN), 1);
    // Answered from the cache from now on, idempotently.
    let answer = assert_idempotent(&reviewer, &bodies[0]).await;
    assert_eq!(answer.bytes, answers[0].bytes);
    assert_eq!(fake.requests(&disk_get("pvc-busy")), 1);
    let text = metrics.encode().unwrap();
    assert!(
        text.contains("pv_topology_webhook_lookup_cache_hits_total{lookup=\"azure-disk\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("pv_topology_webhook_lookup_cache_misses_total{lookup=\"azure-disk\"} 10"),
        "{text}"
    );
}

#[tokio::test]
async fn patches_are_idempotent_and_deterministic() {
    let fake = start(|_| {});
    let cached = CachedLookup::new(
        lookup(&fake, "managed-identity.json", Duration::from_secs(5)),
        NonZeroUsize::new(16).unwrap(),
        Duration::from_secs(60),
    );
    let reviewer = Reviewer::new(
        Resolver::new(Rules::default()).with_lookup(Arc::new(cached)),
        DecisionConfig::default(),
    );
    for object in [
        pv(in_tree(&uri("pvc-zonal")), None),
        pv(in_tree(&uri("pvc-zrs")), None),
        pv(csi(DRIVER, &uri("pvc-zonal")), None),
        pv(csi(DRIVER, &uri("pvc-regional")), None),
        // A wrong zone label is replaced (with a warning), once.
        pv(
            csi(DRIVER, &uri("pvc-zonal")),
            Some(json!({"topology.kubernetes.io/zone": "eastus-1"})),
        ),
    ] {
        let body = create_review(object);
        let first = assert_idempotent(&reviewer, &body).await;
        assert_eq!(first.outcome(), "labeled");
        for _ in 0..3 {
            assert_eq!(common::review(&reviewer, &body).await.bytes, first.bytes);
        }
    }
}

#[tokio::test]
async fn workload_identity_and_client_secret_credentials() {
    let fake = start(|_| {});
    // The pod's variables, as Azure's workload identity webhook sets them, over a config
    // naming only the cloud and tenant.
    let dir = tempfile::tempdir().unwrap();
    let token_file: PathBuf = dir.path().join("azure-identity-token");
    std::fs::write(&token_file, azure_federated_token(true)).unwrap();
    let token_file = token_file.display().to_string();
    let answer = review_with(
        &fake,
        "workload-identity.json",
        pv(in_tree(&uri("pvc-zonal")), None),
        &[],
        &[
            ("AZURE_CLIENT_ID", "c2c2c2c2-0000-4000-8000-000000000002"),
            ("AZURE_FEDERATED_TOKEN_FILE", &token_file),
        ],
    );
    assert_eq!(answer.outcome(), "labeled", "{:?}", answer.response());
    assert_eq!(fake.requests(ENTRA_TOKEN), 1);
    assert_eq!(fake.requests(IMDS_TOKEN), 0);
    // A token Entra ID refuses: its AADSTS error, denied.
    std::fs::write(dir.path().join("azure-identity-token"), azure_federated_token(false)).unwrap();
    let answer = review_with(
        &fake,
        "workload-identity.json",
        pv(in_tree(&uri("pvc-zonal")), None),
        &[],
        &[("AZURE_FEDERATED_TOKEN_FILE", &token_file)],
    );
    assert!(!answer.allowed());
    assert!(answer.message().contains("AADSTS"), "{}", answer.message());

    let answer = review_with(
        &fake,
        "service-principal.json",
        pv(in_tree(&uri("pvc-zrs")), None),
        &[],
        &[],
    );
    assert_eq!(answer.outcome(), "labeled", "{:?}", answer.response());
    assert_eq!(fake.requests(ENTRA_TOKEN), 3);
    assert!(
        !answer.bytes.windows(6).any(|w| w == b"Qx8Q~f"),
        "the secret never shows"
    );
}

#[tokio::test]
async fn without_the_flag_the_warning_names_it() {
    for object in [
        pv(in_tree(&uri("pvc-zonal")), None),
        pv(csi(DRIVER, &uri("pvc-zonal")), None),
    ] {
        let answer = common::review(&common::plain(), &create_review(object)).await;
        assert!(answer.allowed());
        assert_eq!(answer.outcome(), "not-configured");
        assert!(
            answer.warnings().iter().any(|w| w.contains("--azure-disk-lookup")),
            "{:?}",
            answer.warnings()
        );
    }
}

/// Settings that cannot be right stop the start, naming the flag or file; none of these
/// reaches the network.
#[test]
fn bad_settings_are_refused_at_start_up() {
    let start = |flags: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_pv-topology-webhook"))
            .args(["review", "--azure-disk-lookup"])
            .args(flags)
            .envs(NO_WORKLOAD_IDENTITY)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let missing = azure_data("no-such-azure.json").display().to_string();
    let error = start(&["--azure-config", &missing]);
    assert!(
        error.contains("--azure-config: cannot read the Azure cloud config"),
        "{error}"
    );
    let config = azure_data("managed-identity.json").display().to_string();
    for flag in [
        "--azure-arm-endpoint",
        "--azure-authority-endpoint",
        "--azure-imds-endpoint",
    ] {
        let error = start(&["--azure-config", &config, flag, "http://192.0.2.1/"]);
        assert!(
            error.contains(&format!("{flag} \"http://192.0.2.1/\" uses http")),
            "{error}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("azure.json");
    std::fs::write(&bare, r#"{"cloud": "AzurePublicCloud", "location": "eastus"}"#).unwrap();
    let error = start(&["--azure-config", &bare.display().to_string()]);
    assert!(
        error.contains("--azure-disk-lookup: the Azure cloud config names no credentials"),
        "{error}"
    );
    let custom = dir.path().join("stack.json");
    std::fs::write(
        &custom,
        r#"{"cloud": "AzureStackDemo", "resourceManagerEndpoint": "http://192.0.2.1/", "useManagedIdentityExtension": true}"#,
    )
    .unwrap();
    let error = start(&["--azure-config", &custom.display().to_string()]);
    assert!(
        error.contains("the cloud config's resourceManagerEndpoint \"http://192.0.2.1/\" uses http"),
        "{error}"
    );
}

#[tokio::test]
async fn a_custom_clouds_endpoints_and_audience_are_discovered() {
    // The scenario's AzureStackDemo environment: ARM at the fake itself, tokens for
    // https://management.demo.example/, which the fake's ARM refuses (it accepts the
    // public cloud's audiences): the audience read is the one asked for.
    let fake = start(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let run = |fake: &Fake| {
        let config = dir.path().join("azure.json");
        let stack = json!({
            "cloud": "AzureStackDemo",
            "resourceManagerEndpoint": fake.base(),
            "useManagedIdentityExtension": true
        });
        std::fs::write(&config, stack.to_string()).unwrap();
        let imds = format!("--azure-imds-endpoint={}", fake.base());
        let config = format!("--azure-config={}", config.display());
        review_binary(
            &["--azure-disk-lookup", &config, &imds],
            &NO_WORKLOAD_IDENTITY,
            pv(in_tree(&uri("pvc-zonal")), None),
        )
    };
    let answer = run(&fake);
    assert!(!answer.allowed());
    assert!(
        answer
            .message()
            .contains("ARM Disks.Get answered HTTP 401 (ARM refused the token of the identity of --azure-config): InvalidAuthenticationTokenAudience: The access token has been obtained for wrong audience or resource 'https://management.demo.example'"),
        "{}",
        answer.message()
    );
    assert_eq!(fake.requests("GET /metadata/endpoints"), 1);

    // The environment's audience one ARM accepts: labeled.
    let fake = start(|scenario| {
        scenario["arm"]["metadata_endpoints"][0]["authentication"]["audiences"] =
            json!(["https://management.core.windows.net/"]);
    });
    let answer = run(&fake);
    assert_eq!(answer.outcome(), "labeled", "{:?}", answer.response());
    assert_eq!(labels(&answer)["topology.kubernetes.io/zone"], "eastus-2");
    assert_eq!(fake.requests("GET /metadata/endpoints"), 1);
    assert_eq!(fake.requests(&disk_get("pvc-zonal")), 1);

    // In one process: the endpoints are read once; a token ARM refuses is dropped, so
    // the next lookup fetches another.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = start(|_| {});
    let stack =
        json!({"cloud": "AzureStackDemo", "resourceManagerEndpoint": fake.base(), "useManagedIdentityExtension": true});
    let config = AzureConfig::parse(std::path::Path::new("azure.json"), &stack.to_string()).unwrap();
    let endpoints = AzureEndpoints {
        imds: Some(SecureEndpoint::parse("test endpoint", &fake.base()).unwrap()),
        ..AzureEndpoints::default()
    };
    let lookup = AzureDiskLookup::new(&config, &endpoints, Duration::from_secs(5)).unwrap();
    for _ in 0..2 {
        let error = lookup
            .lookup(&in_tree_volume("pvc-zonal"), common::soon())
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains("InvalidAuthenticationTokenAudience"),
            "{error}"
        );
    }
    assert_eq!(fake.requests("GET /metadata/endpoints"), 1);
    assert_eq!(fake.requests(IMDS_TOKEN), 2);
}
