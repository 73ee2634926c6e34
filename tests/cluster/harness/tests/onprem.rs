//! The on-prem clouds behind a real kube-apiserver: `pv-topology-webhook serve`
//! registered as in `webhook.rs`, with `--openstack-cinder-lookup` against the fake
//! of Keystone v3 and Cinder v3 (tests/fakes/openstack_server.py, written from
//! their documented APIs: no OpenStack service runs here). PVs created through the
//! API are read back as stored: the labels and nodeAffinity the lookup found are on
//! them.

mod common;

use cluster_harness::TestCluster;
use cluster_harness::webhook::{register, serve};
use common::*;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, PostParams};
use serde_json::json;
use test_fakes::OpenStackFake;

/// The scenario's volume in availability zone nova-az1 of RegionOne.
const CINDER_ZONAL: &str = "5a1c9e0e-1f6e-4d55-9a3e-3b0f4e0c7d11";
/// The scenario's volume without an availability zone.
const CINDER_NO_AZ: &str = "6b2d0f1f-2a7f-4e66-8b4f-4c1a5f1d8e22";

#[tokio::test]
async fn cinder_pvs_are_stored_with_the_zone_and_region_cinder_gives() {
    let fake = OpenStackFake::start();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let conf = dir.path().join("cloud.conf");
    std::fs::write(
        &conf,
        format!(
            "[Global]\nauth-url = {}\nregion = RegionOne\napplication-credential-id = 7d3c5f0e8a1b4c2d9e6f0a1b2c3d4e5f\napplication-credential-secret = appcred-secret-Zq8x-do-not-log\n",
            fake.auth_url()
        ),
    )
    .expect("cloud.conf written");
    let config = format!("--openstack-cloud-config={}", conf.display());

    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    // GCE PD handles for wait_labeled's probes; Cinder from the lookup.
    let served = serve(&["--openstack-cinder-lookup", &config], &[]);
    register(&client, &served.webhook.url(), &served.ca_bundle, "Fail").await;
    wait_labeled(&pvs).await;
    let post = PostParams::default();

    // CSI: the Cinder CSI driver's own key in nodeAffinity.
    let csi = pv(
        "cinder-csi",
        json!({}),
        json!({}),
        json!({"csi": {"driver": "cinder.csi.openstack.org", "volumeHandle": CINDER_ZONAL, "fsType": "ext4"}}),
    );
    pvs.create(&post, &csi).await.expect("the CSI PV created");
    let stored = pvs.get("cinder-csi").await.expect("the CSI PV read");
    assert_eq!(labels(&stored), json!({ZONE: "nova-az1", REGION: "RegionOne"}));
    assert_eq!(
        affinity(&stored),
        zone_affinity("topology.cinder.csi.openstack.org/zone", "nova-az1")
    );

    // In-tree cinder, the same volume: zone and region requirements, as the in-tree
    // PersistentVolumeLabel plugin wrote them, from the one cached answer.
    let in_tree = pv(
        "cinder-in-tree",
        json!({}),
        json!({}),
        json!({"cinder": {"volumeID": CINDER_ZONAL, "fsType": "ext4"}}),
    );
    pvs.create(&post, &in_tree).await.expect("the in-tree PV created");
    let stored = pvs.get("cinder-in-tree").await.expect("the in-tree PV read");
    assert_eq!(labels(&stored), json!({ZONE: "nova-az1", REGION: "RegionOne"}));
    assert_eq!(
        affinity(&stored),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": ["nova-az1"]},
            {"key": REGION, "operator": "In", "values": ["RegionOne"]}
        ]}]}})
    );
    assert_eq!(
        fake.requests(&OpenStackFake::volume_get("r1-public/v3", CINDER_ZONAL)),
        1,
        "both forms of one volume share one call: {}",
        fake.counts()
    );

    // No availability zone: the region only.
    let no_az = pv(
        "cinder-no-az",
        json!({}),
        json!({}),
        json!({"cinder": {"volumeID": CINDER_NO_AZ}}),
    );
    pvs.create(&post, &no_az).await.expect("the no-AZ PV created");
    let stored = pvs.get("cinder-no-az").await.expect("the no-AZ PV read");
    assert_eq!(labels(&stored), json!({REGION: "RegionOne"}));
    assert_eq!(
        affinity(&stored),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": REGION, "operator": "In", "values": ["RegionOne"]}
        ]}]}})
    );

    // A volume Cinder does not know is refused with Cinder's message.
    let unknown = pv(
        "cinder-unknown",
        json!({}),
        json!({}),
        json!({"cinder": {"volumeID": "9e5a3c4c-5da2-4199-9e7c-7f4d8c4a1b55"}}),
    );
    let refused = pvs.create(&post, &unknown).await.expect_err("refused");
    let text = message(&refused);
    assert!(
        text.contains("9e5a3c4c-5da2-4199-9e7c-7f4d8c4a1b55") && text.contains("openstack-cinder"),
        "{text}"
    );
}

#[tokio::test]
async fn vsphere_pvs_are_stored_with_the_zones_of_their_datastores_hosts() {
    use cluster_harness::vsphere_sim;
    let (sim, created) = vsphere_sim::start(None, &[]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let port = url::Url::parse(&sim.url)
        .expect("the simulator's URL")
        .port()
        .expect("a port");
    let conf = vsphere_sim::config(dir.path(), vsphere_sim::PASSWORD, port, "");
    let config = format!("--vsphere-config={}", conf.display());
    let endpoint = format!("--vsphere-endpoint={}", sim.url);

    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let served = serve(&["--vsphere-lookup", &config, &endpoint], &[]);
    register(&client, &served.webhook.url(), &served.ca_bundle, "Fail").await;
    wait_labeled(&pvs).await;
    let post = PostParams::default();

    // In-tree, a datastore whose hosts are all in zone-a (tagged on their cluster).
    let zonal = pv(
        "vsphere-in-tree",
        json!({}),
        json!({}),
        json!({"vsphereVolume": {"volumePath": "[zonal-ds] kubevols/pv-1.vmdk", "fsType": "ext4"}}),
    );
    pvs.create(&post, &zonal).await.expect("the in-tree PV created");
    let stored = pvs.get("vsphere-in-tree").await.expect("the in-tree PV read");
    assert_eq!(labels(&stored), json!({ZONE: "zone-a", REGION: "region-1"}));
    assert_eq!(
        affinity(&stored),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": ["zone-a"]},
            {"key": REGION, "operator": "In", "values": ["region-1"]}
        ]}]}})
    );

    // CSI, a datastore mounted in zone-a and zone-b: both zones, one In term on the
    // vSphere CSI driver's key.
    let multi = pv(
        "vsphere-csi-multi",
        json!({}),
        json!({}),
        json!({"csi": {"driver": "csi.vsphere.vmware.com", "volumeHandle": "[multi-ds] kubevols/pv-2.vmdk"}}),
    );
    pvs.create(&post, &multi).await.expect("the CSI PV created");
    let stored = pvs.get("vsphere-csi-multi").await.expect("the CSI PV read");
    assert_eq!(labels(&stored), json!({ZONE: "zone-a__zone-b", REGION: "region-1"}));
    assert_eq!(
        affinity(&stored),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.csi.vmware.com/zone", "operator": "In", "values": ["zone-a", "zone-b"]}
        ]}]}})
    );

    // CSI, a First Class Disk's ID: its datastore's zone.
    let fcd = created["disks"]["fcd-1"]
        .as_str()
        .expect("the FCD's ID from setup")
        .to_owned();
    let disk = pv(
        "vsphere-csi-fcd",
        json!({}),
        json!({}),
        json!({"csi": {"driver": "csi.vsphere.vmware.com", "volumeHandle": fcd}}),
    );
    pvs.create(&post, &disk).await.expect("the FCD PV created");
    let stored = pvs.get("vsphere-csi-fcd").await.expect("the FCD PV read");
    assert_eq!(labels(&stored), json!({ZONE: "zone-a", REGION: "region-1"}));
    // Its required terms exactly: one In term on the vSphere CSI driver's key.
    assert_eq!(
        affinity(&stored),
        zone_affinity("topology.csi.vmware.com/zone", "zone-a")
    );

    // An untagged datastore is refused, naming it (failurePolicy Fail, --on-lookup-error deny).
    let plain = pv(
        "vsphere-untagged",
        json!({}),
        json!({}),
        json!({"vsphereVolume": {"volumePath": "[plain-ds] kubevols/pv-3.vmdk"}}),
    );
    let refused = pvs.create(&post, &plain).await.expect_err("refused");
    let text = message(&refused);
    assert!(text.contains("plain-ds") && text.contains("vsphere"), "{text}");
}
