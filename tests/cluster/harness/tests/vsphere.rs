//! The webhook's vSphere lookup against govmomi's vCenter simulator (vsphere-sim, built
//! by tests/cluster/build.sh from tests/cluster/cmd/vsphere-sim): the scenario is
//! created through the simulator's own APIs (`vsphere-sim setup`: datastores mounted on
//! chosen hosts, a First Class Disk, zone/region tags on clusters and a host), then
//! `VsphereLookup` answers for zonal, multi-zone, untagged and unknown datastores, an
//! FCD ID, a wrong password, over TLS with the right and a wrong CA, and with tag
//! categories named by the settings; sessions that expire are renewed (the logins and
//! the simulator's "session gone" answers counted through a recording relay); `review`
//! runs through that relay, which reads the sessions the simulator hands out, none of
//! which may show in an answer or a log line (at trace level). Everything on 127.0.0.1. The inventory and scenario:
//! `cluster_harness::vsphere_sim`.

use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cloud_access::SecureEndpoint;
use cluster_harness::Pki;
use cluster_harness::vsphere_sim::{PASSWORD, USER, config, start};
use pv_topology_webhook::builtin::VSPHERE_DRIVER;
use pv_topology_webhook::lookup::vsphere::{VsphereLookup, VsphereSettings};
use pv_topology_webhook::lookup::{CachedLookup, LookupError, TopologyLookup};
use pv_topology_webhook::resolve::{Resolution, Resolver, TopologySource};
use pv_topology_webhook::rules::Rules;
use pv_topology_webhook::source::{InTree, VolumeIdentity};
use pv_topology_webhook::topology::Topology;

const DEADLINE: Duration = Duration::from_secs(10);

fn port(url: &str) -> u16 {
    url::Url::parse(url).expect("a URL").port().expect("a port")
}

fn lookup(config: &Path, server: Option<&str>) -> VsphereLookup {
    let mut settings = VsphereSettings::new(config);
    settings.server = server.map(|s| SecureEndpoint::parse("the simulator", s).expect("loopback http"));
    VsphereLookup::new(settings, DEADLINE).expect("the lookup is set up")
}

async fn answer(lookup: &VsphereLookup, volume: VolumeIdentity) -> Result<Topology, LookupError> {
    assert!(lookup.handles(&volume), "{volume}");
    lookup.lookup(&volume, std::time::Instant::now() + DEADLINE).await
}

fn zones_region(topology: &Topology) -> (Option<String>, Option<&str>) {
    (topology.zone_label_value(), topology.region())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zones_from_the_simulators_tags() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (sim, created) = start(None, &[]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let lookup = lookup(&config(dir.path(), PASSWORD, port(&sim.url), ""), Some(&sim.url));

    let zonal = answer(
        &lookup,
        VolumeIdentity::in_tree(InTree::VsphereVolume, "[zonal-ds] kubevols/a.vmdk"),
    )
    .await;
    let zonal = zonal.expect("zonal");
    assert_eq!(zones_region(&zonal), (Some("zone-a".into()), Some("region-1")));

    let multi = answer(
        &lookup,
        VolumeIdentity::csi(VSPHERE_DRIVER, "[multi-ds] kubevols/b.vmdk"),
    )
    .await;
    let multi = multi.expect("multi-zone");
    assert_eq!(zones_region(&multi), (Some("zone-a__zone-b".into()), Some("region-1")));

    let fcd = created["disks"]["fcd-1"].as_str().expect("the FCD's ID");
    let disk = answer(&lookup, VolumeIdentity::csi(VSPHERE_DRIVER, fcd))
        .await
        .expect("FCD");
    assert_eq!(zones_region(&disk), (Some("zone-a".into()), Some("region-1")));

    let untagged = answer(
        &lookup,
        VolumeIdentity::in_tree(InTree::VsphereVolume, "[plain-ds] c.vmdk"),
    )
    .await;
    let text = untagged.expect_err("untagged").to_string();
    assert!(
        text.contains("datastore \"plain-ds\"") && text.contains("DC0_H0"),
        "{text}"
    );
    assert!(text.contains("\"k8s-zone\"") && text.contains(&sim.url), "{text}");

    let unknown = answer(
        &lookup,
        VolumeIdentity::in_tree(InTree::VsphereVolume, "[nowhere] d.vmdk"),
    )
    .await;
    let text = unknown.expect_err("unknown").to_string();
    assert!(
        text.contains("[nowhere] d.vmdk") && text.contains("no datastore named \"nowhere\""),
        "{text}"
    );
    assert!(text.contains(&sim.url), "{text}");

    let missing = answer(
        &lookup,
        VolumeIdentity::csi(VSPHERE_DRIVER, "00000000-0000-0000-0000-000000000000"),
    )
    .await;
    let text = missing.expect_err("no such FCD").to_string();
    assert!(text.contains("no First Class Disk"), "{text}");

    // As the program uses it: behind the shared cache, in the resolver. Disks on one
    // datastore share an answer; a CSI volume's nodeAffinity names the driver's key.
    let cached = Arc::new(CachedLookup::new(
        lookup_with_password(dir.path(), &sim.url, PASSWORD),
        NonZeroUsize::new(16).expect("not zero"),
        Duration::from_secs(60),
    ));
    let resolver = Resolver::new(Rules::default()).with_lookup(cached.clone());
    for (volume, key) in [
        (
            VolumeIdentity::csi(VSPHERE_DRIVER, "[multi-ds] a.vmdk"),
            "topology.csi.vmware.com/zone",
        ),
        (
            VolumeIdentity::in_tree(InTree::VsphereVolume, "[multi-ds] b.vmdk"),
            "topology.kubernetes.io/zone",
        ),
    ] {
        let Resolution::Resolved(resolved) = resolver.resolve(&volume).await else {
            panic!("{volume} resolved")
        };
        assert_eq!(resolved.topology.zones(), ["zone-a", "zone-b"]);
        assert_eq!(resolved.affinity.zone.as_deref(), Some(key));
        assert_eq!(resolved.source, TopologySource::Lookup("vsphere".into()));
    }
    assert_eq!(cached.cache().len(), 1);

    // A wrong password: vSphere's own fault text, never the password.
    let wrong = lookup_with_password(dir.path(), &sim.url, "Wrong-Pa55word!");
    let err = answer(
        &wrong,
        VolumeIdentity::in_tree(InTree::VsphereVolume, "[zonal-ds] a.vmdk"),
    )
    .await
    .expect_err("refused");
    let text = format!("{err} {err:?}");
    assert!(text.contains("Login failure") && text.contains(USER), "{text}");
    assert!(!text.contains("Wrong-Pa55word!") && !text.contains(PASSWORD), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_categories_named_by_the_settings() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (sim, _) = start(None, &[]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = config(dir.path(), PASSWORD, port(&sim.url), "");
    // As --vsphere-zone-category=zone-cat --vsphere-region-category=region-cat: the
    // k8s-zone/k8s-region tags (zone-a on DC0_C0, region-1 on both clusters, nearer
    // than DC0's alt-region) are not read.
    let mut settings = VsphereSettings::new(&config);
    settings.server = Some(SecureEndpoint::parse("the simulator", &sim.url).expect("loopback http"));
    settings.zone_category = "zone-cat".into();
    settings.region_category = "region-cat".into();
    let named = VsphereLookup::new(settings, DEADLINE).expect("the lookup is set up");
    let multi = answer(
        &named,
        VolumeIdentity::csi(VSPHERE_DRIVER, "[multi-ds] kubevols/b.vmdk"),
    )
    .await
    .expect("multi-zone");
    assert_eq!(
        zones_region(&multi),
        (Some("alt-zone-1__alt-zone-2".into()), Some("alt-region"))
    );
    // DC0_C0_H1 has no zone-cat tag: left out beside DC0_C0_H0.
    let zonal = answer(
        &named,
        VolumeIdentity::in_tree(InTree::VsphereVolume, "[zonal-ds] kubevols/a.vmdk"),
    )
    .await
    .expect("zonal");
    assert_eq!(zones_region(&zonal), (Some("alt-zone-1".into()), Some("alt-region")));
    // The defaults on the same inventory: zone-cat and region-cat are not read (the
    // host's own alt-zone-1 is nearer than the cluster's zone-a).
    let defaults = lookup(&config, Some(&sim.url));
    let zonal = answer(
        &defaults,
        VolumeIdentity::in_tree(InTree::VsphereVolume, "[zonal-ds] kubevols/a.vmdk"),
    )
    .await
    .expect("zonal");
    assert_eq!(zones_region(&zonal), (Some("zone-a".into()), Some("region-1")));
}

fn lookup_with_password(dir: &Path, url: &str, password: &str) -> VsphereLookup {
    let other = dir.join("wrong");
    std::fs::create_dir_all(&other).expect("a directory");
    lookup(&config(&other, password, port(url), ""), Some(url))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_is_verified_against_the_configured_ca() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pki = Pki::generate().expect("a CA and a serving pair for 127.0.0.1");
    let other = Pki::generate().expect("another CA");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("written");
        path
    };
    let (cert, key, ca) = (
        write("tls.crt", &pki.serving.cert),
        write("tls.key", &pki.serving.key),
        write("ca.crt", &pki.ca.cert),
    );
    let wrong_ca = write("wrong-ca.crt", &other.ca.cert);
    let (sim, _) = start(Some((&cert, &key, &ca)), &[]);
    assert!(sim.url.starts_with("https://127.0.0.1:"), "{}", sim.url);
    let port = port(&sim.url);

    let dirs: Vec<_> = (0..3).map(|i| dir.path().join(i.to_string())).collect();
    for d in &dirs {
        std::fs::create_dir_all(d).expect("a directory");
    }
    let volume = || VolumeIdentity::in_tree(InTree::VsphereVolume, "[zonal-ds] kubevols/a.vmdk");
    let right = lookup(
        &config(&dirs[0], PASSWORD, port, &format!("ca-file = {}\n", ca.display())),
        None,
    );
    let topology = answer(&right, volume()).await.expect("verified against the CA");
    assert_eq!(zones_region(&topology), (Some("zone-a".into()), Some("region-1")));

    let wrong = lookup(
        &config(&dirs[1], PASSWORD, port, &format!("ca-file = {}\n", wrong_ca.display())),
        None,
    );
    let text = answer(&wrong, volume()).await.expect_err("another CA").to_string();
    assert!(
        text.contains("https://127.0.0.1:") && text.contains("RetrieveServiceContent"),
        "{text}"
    );
    assert!(text.to_lowercase().contains("certificate"), "{text}");

    // Two vCenters (the simulator under two names): asked in turn, an unknown datastore
    // names both.
    let two = dirs[0].join("two.conf");
    let section = |host: &str| {
        format!(
            "[VirtualCenter \"{host}\"]\nuser = \"{USER}\"\npassword = \"{PASSWORD}\"\nport = {port}\nca-file = {}\n",
            ca.display()
        )
    };
    std::fs::write(&two, format!("{}{}", section("localhost"), section("127.0.0.1"))).expect("written");
    let both = lookup(&two, None);
    let topology = answer(&both, volume()).await.expect("the first has it");
    assert_eq!(zones_region(&topology), (Some("zone-a".into()), Some("region-1")));
    let nowhere = VolumeIdentity::in_tree(InTree::VsphereVolume, "[nowhere] a.vmdk");
    let text = answer(&both, nowhere).await.expect_err("in neither").to_string();
    assert!(
        text.contains(&format!(
            "none of the vCenters https://localhost:{port}/, https://127.0.0.1:{port}/"
        )),
        "{text}"
    );

    // insecure-flag is refused unless the caller allows it.
    let insecure = config(&dirs[2], PASSWORD, port, "insecure-flag = \"true\"\n");
    let err = VsphereLookup::new(VsphereSettings::new(&insecure), DEADLINE).expect_err("refused");
    assert!(err.to_string().contains("insecure-flag"), "{err}");
    let mut settings = VsphereSettings::new(&insecure);
    settings.allow_insecure = true;
    let allowed = VsphereLookup::new(settings, DEADLINE).expect("allowed");
    let topology = answer(&allowed, volume()).await.expect("unverified, as allowed");
    assert_eq!(zones_region(&topology), (Some("zone-a".into()), Some("region-1")));
}

/// `(SOAP Login requests, REST session POSTs)` among the client's requests.
fn logins(sent: &str) -> (usize, usize) {
    (
        sent.matches("<Login xmlns=\"urn:vim25\">").count(),
        sent.matches("POST /rest/com/vmware/cis/session HTTP/1.1\r\n").count(),
    )
}

/// `(SOAP answers saying the session is gone, REST 401s)` among the simulator's answers.
fn expiries(answered: &str) -> (usize, usize) {
    (
        answered.matches("NotAuthenticated").count(),
        answered.matches("HTTP/1.1 401 ").count(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_sessions_are_renewed() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Idle SOAP and REST sessions expire after 3 s, as vCenter's do after 30 minutes:
    // long enough that round 1, on a loaded machine, ends inside its fresh sessions
    // (with 1 s, one run in about 40 saw its new REST session refused mid-round).
    let (sim, _) = start(None, &["-session-timeout", "3s"]);
    // Through the relay: what the client sent and what the simulator answered are seen.
    let (relay, seen) = recording_relay(port(&sim.url));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let lookup = lookup(
        &config(dir.path(), PASSWORD, port(&sim.url), ""),
        Some(&format!("http://127.0.0.1:{relay}/")),
    );
    let volume = || VolumeIdentity::in_tree(InTree::VsphereVolume, "[zonal-ds] kubevols/a.vmdk");
    for round in 1..=2 {
        let topology = match answer(&lookup, volume()).await {
            Ok(topology) => topology,
            Err(e) => panic!(
                "round {round}: {e}\nsent:\n{}\nanswered:\n{}",
                seen.sent(),
                seen.answered()
            ),
        };
        assert_eq!(
            zones_region(&topology),
            (Some("zone-a".into()), Some("region-1")),
            "round {round}"
        );
        // Round 1 logs in once to each API, into live sessions; round 2 is told each
        // session is gone (a NotAuthenticated fault, a 401) and logs in again.
        let (sent, answered) = (seen.sent(), seen.answered());
        assert_eq!(
            logins(&sent),
            (round, round),
            "round {round}: Login, POST session:\n{sent}"
        );
        let expired = expiries(&answered);
        if round == 1 {
            assert_eq!(expired, (0, 0), "round 1 in fresh sessions:\n{answered}");
            // The simulator checks once per timeout: two of them and both sessions are gone.
            tokio::time::sleep(Duration::from_millis(7000)).await;
        } else {
            assert!(
                expired.0 >= 1 && expired.1 >= 1,
                "round 2 (NotAuthenticated, 401): {expired:?}\n{answered}"
            );
        }
    }
}

/// What a [`recording_relay`] saw: every byte the client sent and every byte the
/// simulator sent back (HTTP/1.1 in the clear), each direction in arrival order.
#[derive(Clone, Default)]
struct Recorded {
    sent: Arc<std::sync::Mutex<Vec<u8>>>,
    answered: Arc<std::sync::Mutex<Vec<u8>>>,
}

impl Recorded {
    fn sent(&self) -> String {
        String::from_utf8_lossy(&self.sent.lock().expect("not poisoned")).into_owned()
    }

    fn answered(&self) -> String {
        String::from_utf8_lossy(&self.answered.lock().expect("not poisoned")).into_owned()
    }
}

/// Copies `from` to `to` until either ends, keeping each byte in `kept`.
fn relay_keeping(mut from: std::net::TcpStream, mut to: std::net::TcpStream, kept: Arc<std::sync::Mutex<Vec<u8>>>) {
    use std::io::{Read, Write};
    let mut buffer = [0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buffer) {
        // Kept before it is passed on: once the other side has it, the test may look.
        kept.lock().expect("not poisoned").extend_from_slice(&buffer[..n]);
        if n == 0 || to.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

/// A TCP relay on 127.0.0.1 to the simulator at `target`, keeping every byte each
/// side sends: the sessions the simulator hands out are read from its answers, the
/// logins from the client's requests. Its port and what it saw.
fn recording_relay(target: u16) -> (u16, Recorded) {
    use std::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    let recorded = Recorded::default();
    let kept = recorded.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let server = TcpStream::connect(("127.0.0.1", target)).expect("the simulator");
            let (client_in, server_out) = (
                client.try_clone().expect("a handle"),
                server.try_clone().expect("a handle"),
            );
            let sent = kept.sent.clone();
            std::thread::spawn(move || relay_keeping(client_in, server_out, sent));
            let answered = kept.answered.clone();
            std::thread::spawn(move || relay_keeping(server, client, answered));
        }
    });
    (port, recorded)
}

/// Each value following `marker` in `text` (quoted or not, up to a quote, `;` or
/// white space).
fn values_after(text: &str, marker: &str) -> Vec<String> {
    text.split(marker)
        .skip(1)
        .filter_map(|rest| {
            rest.trim_start_matches('"')
                .split(|c: char| c == '"' || c == ';' || c.is_whitespace())
                .next()
        })
        .filter(|value| !value.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn no_session_of_the_simulator_in_any_answer_or_log_line() {
    let (sim, _) = start(None, &[]);
    let (relay, seen) = recording_relay(port(&sim.url));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = config(dir.path(), PASSWORD, port(&sim.url), "");
    let endpoint = format!("--vsphere-endpoint=http://127.0.0.1:{relay}/");
    let config_flag = format!("--vsphere-config={}", config.display());
    // Found, untagged, unknown datastore, unknown First Class Disk: each a `review`
    // (its own sessions), logging everything it logs.
    let mut output = String::new();
    for spec in [
        serde_json::json!({"vsphereVolume": {"volumePath": "[zonal-ds] kubevols/a.vmdk"}}),
        serde_json::json!({"vsphereVolume": {"volumePath": "[plain-ds] kubevols/b.vmdk"}}),
        serde_json::json!({"vsphereVolume": {"volumePath": "[nowhere] c.vmdk"}}),
        serde_json::json!({"csi": {"driver": VSPHERE_DRIVER, "volumeHandle": "00000000-0000-0000-0000-000000000000"}}),
    ] {
        let pv = serde_json::json!({
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-1"},
            "spec": spec,
        });
        let review = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "00000000-0000-0000-0000-000000000001",
                "kind": {"group": "", "version": "v1", "kind": "PersistentVolume"},
                "resource": {"group": "", "version": "v1", "resource": "persistentvolumes"},
                "name": "pv-1", "operation": "CREATE", "userInfo": {"username": "admin"}, "object": pv,
            }
        });
        let mut child = std::process::Command::new(cluster_harness::webhook::webhook_binary())
            .args([
                "--log-level=trace",
                "review",
                "--vsphere-lookup",
                &config_flag,
                &endpoint,
            ])
            .args(["--on-lookup-error=deny", "--lookup-timeout=10s"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("review runs");
        std::io::Write::write_all(
            &mut child.stdin.take().expect("piped"),
            &serde_json::to_vec(&review).expect("JSON"),
        )
        .expect("the review written");
        let out = child.wait_with_output().expect("review ends");
        output.push_str(&String::from_utf8_lossy(&out.stdout));
        output.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    // The answers are what they should be: one labeled, three denied naming the cause.
    for words in [
        "\"outcome\":\"labeled\"",
        "none of its hosts (DC0_H0)",
        "no datastore named \\\"nowhere\\\"",
        "no First Class Disk",
    ] {
        assert!(output.contains(words), "{words:?} not in {output}");
    }
    let seen = seen.answered();
    let soap = values_after(&seen, "vmware_soap_session=");
    let rest = values_after(&seen, "{\"value\":\"");
    assert!(soap.len() >= 4 && rest.len() >= 2, "sessions seen: {soap:?} {rest:?}");
    for secret in soap.iter().chain(&rest).map(String::as_str).chain([PASSWORD]) {
        for fragment in secret.as_bytes().windows(12) {
            let fragment = std::str::from_utf8(fragment).expect("ASCII");
            assert!(!output.contains(fragment), "{fragment:?} of {secret:?} in:\n{output}");
        }
    }
}
