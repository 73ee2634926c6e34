//! EBS topology from EC2 DescribeVolumes: the `review` binary with
//! `--aws-ebs-lookup` against moto's server (PyPI `moto[server]`) in its
//! authenticated mode (cluster_harness::Moto::start_authenticated: moto
//! verifies every SigV4 signature and session token; volumes are created by
//! boto3 with the bootstrapped IAM user's key), and the lookup itself against
//! a fake EC2 endpoint (written from the EC2 API reference) that counts calls.

mod common;

use std::num::NonZeroUsize;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cloud_access::aws::endpoints::EndpointOptions;
use cloud_access::aws::{AwsClient, AwsCredentials};
use cluster_harness::Moto;
use common::{Answer, create_review, csi, patched, pv, review_binary};
use pv_topology_webhook::builtin::EBS_DRIVER;
use pv_topology_webhook::lookup::ebs::EbsLookup;
use pv_topology_webhook::lookup::{CachedLookup, LookupError, TopologyLookup};
use pv_topology_webhook::model::LookupFailure;
use pv_topology_webhook::resolve::{Resolution, Resolver};
use pv_topology_webhook::rules::Rules;
use pv_topology_webhook::source::{InTree, VolumeIdentity};
use serde_json::{Value, json};

fn credentials() -> AwsCredentials {
    AwsCredentials {
        access_key_id: "AKIDTEST".into(),
        secret_access_key: "test-secret".into(),
        session_token: None,
        expires_at: None,
        source: "test",
    }
}

fn client(url: &str, region: &str) -> AwsClient {
    // As in main: one crypto provider for every rustls user in the process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let options = EndpointOptions {
        global_override: Some(url.to_owned()),
        ..EndpointOptions::default()
    };
    AwsClient::new(reqwest::Client::new(), region, options)
}

/// `review --aws-ebs-lookup …` on `pv`, against `moto` with the credentials
/// of `env` (`AWS_ACCESS_KEY_ID`, …).
fn review_with(moto: &Moto, env: &[(&str, &str)], pv: Value, extra: &[&str]) -> Answer {
    // moto's first EC2 call loads its backend, which can take seconds on a
    // loaded machine; these tests are about answers, not the deadline.
    let mut args = vec![
        "--aws-ebs-lookup",
        "--aws-region",
        "us-east-1",
        "--lookup-timeout",
        "30s",
    ];
    args.extend(extra);
    let mut all = vec![
        ("AWS_ENDPOINT_URL", moto.url.as_str()),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", "/nonexistent"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent"),
    ];
    all.extend(env);
    review_binary(&args, &all, pv)
}

/// `review --aws-ebs-lookup …` with the IAM user's static key.
fn review(moto: &Moto, pv: Value, extra: &[&str]) -> Answer {
    let user = &moto.auth().user;
    let env = [
        ("AWS_ACCESS_KEY_ID", user.access_key_id.as_str()),
        ("AWS_SECRET_ACCESS_KEY", user.secret_access_key.as_str()),
    ];
    review_with(moto, &env, pv, extra)
}

fn labels(answer: &Answer) -> Value {
    patched(answer, "/metadata/labels")
}

#[tokio::test]
async fn ebs_volumes_get_their_zone_from_describe_volumes() {
    let moto = Moto::start_authenticated();
    // Two volumes in different zones, the other one first: a call that
    // dropped VolumeId.1 would get both and read the wrong zone.
    let other = moto.create_volume("us-east-1", "us-east-1a");
    let id = moto.create_volume("us-east-1", "us-east-1b");

    let answer = review(&moto, pv(csi(EBS_DRIVER, &id), None), &[]);
    assert!(answer.allowed(), "{:?}", answer.response());
    assert_eq!(answer.outcome(), "labeled");
    assert_eq!(
        labels(&answer),
        json!({"topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": "us-east-1b"})
    );
    let affinity = answer.patch_json().to_string();
    assert!(
        affinity.contains("topology.ebs.csi.aws.com/zone") && affinity.contains("us-east-1b"),
        "{affinity}"
    );
    let answer = review(&moto, pv(csi(EBS_DRIVER, &other), None), &[]);
    assert_eq!(labels(&answer)["topology.kubernetes.io/zone"], "us-east-1a");

    // The in-tree form without a zone is looked up too.
    let in_tree = json!({"awsElasticBlockStore": {"volumeID": format!("aws:///{id}"), "fsType": "ext4"}});
    let answer = review(&moto, pv(in_tree, None), &[]);
    assert_eq!(labels(&answer)["topology.kubernetes.io/zone"], "us-east-1b");
}

#[tokio::test]
async fn describe_volumes_is_refused_unless_signed_with_the_right_secret_and_token() {
    let moto = Moto::start_authenticated();
    let id = moto.create_volume("us-east-1", "us-east-1b");
    let volume = || pv(csi(EBS_DRIVER, &id), None);
    // EC2's answer to credentials it cannot validate (moto's, as AWS's).
    let refused = |answer: &Answer, what: &str| {
        assert!(!answer.allowed(), "{what}: {:?}", answer.response());
        assert!(
            answer.message().contains("DescribeVolumes: AuthFailure (HTTP 401)"),
            "{what}: {}",
            answer.message()
        );
    };
    let user = moto.auth().user.clone();
    let wrong_secret = [
        ("AWS_ACCESS_KEY_ID", user.access_key_id.as_str()),
        ("AWS_SECRET_ACCESS_KEY", "wrong-secret-key"),
    ];
    refused(&review_with(&moto, &wrong_secret, volume(), &[]), "wrong secret");

    // Temporary credentials: accepted with their session token only.
    let keys = moto.assume_role("webhook");
    let token = keys.session_token.clone().expect("a session token");
    let changed = cluster_harness::tampered(&token);
    let with_token = |token: Option<&str>| {
        let mut env = vec![
            ("AWS_ACCESS_KEY_ID", keys.access_key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY", keys.secret_access_key.clone()),
        ];
        env.extend(token.map(|t| ("AWS_SESSION_TOKEN", t.to_owned())));
        env
    };
    let env = with_token(Some(&token));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let answer = review_with(&moto, &env, volume(), &[]);
    assert_eq!(
        labels(&answer)["topology.kubernetes.io/zone"],
        "us-east-1b",
        "{:?}",
        answer.response()
    );
    for (what, token) in [
        ("no session token", None),
        ("changed session token", Some(changed.as_str())),
    ] {
        let env = with_token(token);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        refused(&review_with(&moto, &env, volume(), &[]), what);
    }
}

#[tokio::test]
async fn unknown_volumes_and_wrong_regions_are_denied_with_the_cause() {
    let moto = Moto::start_authenticated();
    let answer = review(&moto, pv(csi(EBS_DRIVER, "vol-0123456789abcdef0"), None), &[]);
    assert!(!answer.allowed());
    assert!(
        answer.message().contains("vol-0123456789abcdef0"),
        "{}",
        answer.message()
    );
    assert!(
        answer.message().contains("InvalidVolume.NotFound"),
        "{}",
        answer.message()
    );

    let id = moto.create_volume("eu-west-1", "eu-west-1a");
    let answer = review(&moto, pv(csi(EBS_DRIVER, &id), None), &[]);
    assert!(!answer.allowed());
    assert!(
        answer
            .message()
            .contains("is the volume in region us-east-1? set --aws-region"),
        "{}",
        answer.message()
    );

    // --on-lookup-error=allow admits it unchanged, with a warning.
    let answer = review(&moto, pv(csi(EBS_DRIVER, &id), None), &["--on-lookup-error", "allow"]);
    assert!(answer.allowed());
    assert!(answer.patch().is_none());
    assert!(
        answer.warnings().iter().any(|w| w.contains("InvalidVolume.NotFound")),
        "{:?}",
        answer.warnings()
    );
}

#[tokio::test]
async fn without_the_flag_the_warning_names_it() {
    let reviewer = common::plain();
    let answer = common::review(&reviewer, &create_review(pv(csi(EBS_DRIVER, "vol-0abc"), None))).await;
    assert!(answer.allowed());
    assert!(
        answer.warnings().iter().any(|w| w.contains("--aws-ebs-lookup")),
        "{:?}",
        answer.warnings()
    );
}

/// A fake EC2 endpoint: DescribeVolumes answers after `delay`, counting calls.
fn fake_ec2(delay: Duration, calls: Arc<AtomicUsize>) -> String {
    use axum::routing::post;
    let app = axum::Router::new().route(
        "/",
        post(move |body: String| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                assert!(body.contains("Action=DescribeVolumes"), "{body}");
                let id = body.split("VolumeId.1=").nth(1).unwrap_or_default().split('&').next().unwrap_or_default().to_owned();
                format!(
                    "<DescribeVolumesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r</requestId><volumeSet><item><volumeId>{id}</volumeId><size>1</size><availabilityZone>us-west-2-lax-1a</availabilityZone><attachmentSet><item><volumeId>{id}</volumeId></item></attachmentSet></item></volumeSet></DescribeVolumesResponse>"
                )
            }
        }),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(tokio::net::TcpListener::from_std(listener).unwrap(), app)
            .await
            .unwrap();
    });
    url
}

#[tokio::test]
async fn concurrent_reviews_of_one_volume_make_one_call() {
    let calls = Arc::new(AtomicUsize::new(0));
    let url = fake_ec2(Duration::from_millis(300), calls.clone());
    let lookup = Arc::new(EbsLookup::with_credentials(client(&url, "us-west-2"), credentials()));
    // As the webhook runs it: behind the lookup cache, which shares calls.
    let cached = Arc::new(CachedLookup::new(
        lookup.clone(),
        NonZeroUsize::new(8).unwrap(),
        Duration::from_secs(60),
    ));
    let volume = VolumeIdentity::csi(EBS_DRIVER, "vol-0a0a0a0a");
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let (cached, volume) = (cached.clone(), volume.clone());
            tokio::spawn(async move { cached.lookup(&volume, common::soon()).await })
        })
        .collect();
    for task in tasks {
        let topology = task.await.unwrap().unwrap();
        // A Local Zone's region is its parent region.
        assert_eq!(topology.zones(), ["us-west-2-lax-1a"]);
        assert_eq!(topology.region(), Some("us-west-2"));
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "one DescribeVolumes for ten concurrent reviews"
    );

    // The in-tree form of the same volume is the same disk: answered from the cache.
    let in_tree = VolumeIdentity::in_tree(InTree::AwsElasticBlockStore, "aws:///vol-0a0a0a0a");
    cached.lookup(&in_tree, common::soon()).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // Once answered, a later review calls again (caching is CachedLookup's job).
    let in_tree = VolumeIdentity::in_tree(InTree::AwsElasticBlockStore, "vol-0a0a0a0a");
    lookup.lookup(&in_tree, common::soon()).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn lookups_stay_inside_the_deadline() {
    let calls = Arc::new(AtomicUsize::new(0));
    let url = fake_ec2(Duration::from_secs(5), calls);
    let lookup = EbsLookup::with_credentials(client(&url, "us-west-2"), credentials());
    let volume = VolumeIdentity::csi(EBS_DRIVER, "vol-0b0b");
    let started = Instant::now();
    let error = lookup
        .lookup(&volume, common::within(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    // Counted as a timeout (lookups_total{result="timeout"}), not as an error.
    // ... naming the endpoint it waited for (the fake's, as a URL).
    let endpoint = format!("{url}/");
    assert_eq!(error, LookupError::timed_out(Some(endpoint.clone())));
    // The resolver, whose budget it is, tells it with the budget.
    let resolver = Resolver::new(Rules::default())
        .with_lookup(Arc::new(lookup))
        .with_deadline(Duration::from_millis(300));
    let Resolution::LookupFailed {
        error: error @ LookupFailure::TimedOut(_),
        ..
    } = resolver.resolve(&volume).await
    else {
        panic!("not a timeout");
    };
    assert_eq!(
        error.to_string(),
        format!("timed out after 300ms waiting for {endpoint}")
    );
}

/// A call that kept failing for another reason (here a refused connection; in the
/// image test an untrusted certificate) is an error that says why, not a timeout,
/// even when its retries end at the deadline.
#[tokio::test]
async fn calls_failing_until_the_deadline_say_why() {
    let lookup = EbsLookup::with_credentials(client("http://127.0.0.1:1/", "us-west-2"), credentials());
    let error = lookup
        .lookup(
            &VolumeIdentity::csi(EBS_DRIVER, "vol-0b0b"),
            common::within(Duration::from_millis(800)),
        )
        .await
        .unwrap_err();
    let LookupError::Failed(text) = &error else {
        panic!("not a failure with its cause: {error:?}");
    };
    assert!(
        text.contains("DescribeVolumes") && text.contains("127.0.0.1:1"),
        "{text}"
    );
}

/// The region comes from `--aws-region`, else `AWS_REGION`, else
/// `AWS_DEFAULT_REGION`; a value that cannot be a region (it becomes part
/// of a host name) is refused at start-up, naming where it came from.
#[test]
fn regions_that_cannot_be_regions_are_refused_at_start_up() {
    let start = |flags: &[&str], env: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pv-topology-webhook"));
        command
            .args(["review", "--aws-ebs-lookup"])
            .args(flags)
            .env_remove("AWS_REGION")
            .env_remove("AWS_DEFAULT_REGION")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .stdin(Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let error = start(&["--aws-region", "us-east-1.attacker.example"], &[]);
    assert!(
        error.contains("--aws-region \"us-east-1.attacker.example\" is not an AWS region"),
        "{error}"
    );
    let error = start(&[], &[("AWS_DEFAULT_REGION", "eu west 1")]);
    assert!(
        error.contains("AWS_DEFAULT_REGION=\"eu west 1\" is not an AWS region"),
        "{error}"
    );
    let error = start(&[], &[]);
    assert!(error.contains("--aws-ebs-lookup needs a region"), "{error}");
}

/// The EBS lookup with its calls counted: batched ones and single ones.
struct Counted {
    inner: EbsLookup,
    single: AtomicUsize,
    batched: AtomicUsize,
}

impl TopologyLookup for Counted {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn handles(&self, volume: &VolumeIdentity) -> bool {
        self.inner.handles(volume)
    }
    fn lookup<'a>(
        &'a self,
        volume: &'a VolumeIdentity,
        deadline: Instant,
    ) -> pv_topology_webhook::lookup::LookupFuture<'a> {
        self.single.fetch_add(1, Ordering::SeqCst);
        self.inner.lookup(volume, deadline)
    }
    fn cache_key(&self, volume: &VolumeIdentity) -> String {
        self.inner.cache_key(volume)
    }
    fn batch_limit(&self) -> usize {
        self.inner.batch_limit()
    }
    fn lookup_many<'a>(
        &'a self,
        volumes: &'a [VolumeIdentity],
        deadline: Instant,
    ) -> pv_topology_webhook::lookup::ManyFuture<'a> {
        self.batched.fetch_add(1, Ordering::SeqCst);
        self.inner.lookup_many(volumes, deadline)
    }
}

/// `audit`'s prefetch: a page of 450 EBS volumes (moto, signatures verified) in
/// three DescribeVolumes calls of at most 200 IDs (a `volume-id` filter, so one
/// unknown volume does not fail the others), after which each volume's own lookup
/// is a cache hit; the unknown volume is then asked alone and named as not found.
#[tokio::test]
async fn a_page_of_volumes_is_looked_up_in_batches_of_200() {
    let moto = Moto::start_authenticated();
    let mut ids = moto.create_volumes("us-east-1", "us-east-1a", 250);
    ids.extend(moto.create_volumes("us-east-1", "us-east-1b", 200));
    let user = &moto.auth().user;
    let credentials = AwsCredentials {
        access_key_id: user.access_key_id.clone(),
        secret_access_key: user.secret_access_key.clone().into(),
        session_token: None,
        expires_at: None,
        source: "test",
    };
    let counted = Arc::new(Counted {
        inner: EbsLookup::with_credentials(client(&moto.url, "us-east-1"), credentials),
        single: AtomicUsize::new(0),
        batched: AtomicUsize::new(0),
    });
    let cached = CachedLookup::new(
        counted.clone(),
        NonZeroUsize::new(1000).unwrap(),
        Duration::from_secs(60),
    );
    let resolver = Resolver::new(Rules::default())
        .with_lookup(Arc::new(cached))
        .with_deadline(Duration::from_secs(30));
    let mut volumes: Vec<VolumeIdentity> = ids.iter().map(|id| VolumeIdentity::csi(EBS_DRIVER, id)).collect();
    // An in-tree form of one of them (the same disk) and a volume EC2 does not have.
    volumes.push(VolumeIdentity::in_tree(
        InTree::AwsElasticBlockStore,
        format!("aws:///{}", ids[0]),
    ));
    volumes.push(VolumeIdentity::csi(EBS_DRIVER, "vol-0000000000000dead"));
    resolver.prefetch(&volumes).await;
    assert_eq!(
        counted.batched.load(Ordering::SeqCst),
        3,
        "451 distinct volumes, 200 per call"
    );
    for (i, volume) in volumes[..450].iter().enumerate() {
        let Resolution::Resolved(resolved) = resolver.resolve(volume).await else {
            panic!("{volume}: not resolved");
        };
        let zone = if i < 250 { "us-east-1a" } else { "us-east-1b" };
        assert_eq!(resolved.topology.zones(), [zone], "{volume}");
    }
    assert!(matches!(resolver.resolve(&volumes[450]).await, Resolution::Resolved(_)));
    assert_eq!(
        counted.single.load(Ordering::SeqCst),
        0,
        "every known volume a cache hit"
    );
    let Resolution::LookupFailed { error, .. } = resolver.resolve(&volumes[451]).await else {
        panic!("the unknown volume resolved");
    };
    assert_eq!(counted.single.load(Ordering::SeqCst), 1, "the unknown one asked alone");
    assert!(format!("{error:?}").contains("InvalidVolume.NotFound"), "{error:?}");
}
