//! The harness itself: a real kube-apiserver starts, serves and stops.

use cluster_harness::TestCluster;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};

#[tokio::test]
async fn cluster_starts_and_lists_namespaces() {
    let cluster = TestCluster::start().await;
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .expect("list namespaces")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for want in ["default", "kube-system", "kube-public"] {
        assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
    }
    let version = cluster.client().apiserver_version().await.expect("version");
    assert_eq!(version.major, "1");
    let dir = cluster.dir().to_path_buf();
    drop(cluster);
    assert!(!dir.exists(), "{} left behind", dir.display());
}

fn group_alive(pgid: u32) -> bool {
    cluster_harness::group_running(pgid)
}

#[test]
fn a_failing_test_still_tears_the_cluster_down() {
    let (tx, rx) = std::sync::mpsc::channel();
    let failing_test = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let cluster = TestCluster::start().await;
            tx.send((cluster.pids(), cluster.dir().to_path_buf())).unwrap();
            panic!("a test fails while its cluster runs");
        })
    });
    assert!(failing_test.join().is_err(), "the test was meant to panic");
    let ((etcd, apiserver), dir) = rx.recv().unwrap();
    assert!(!group_alive(etcd), "etcd's group {etcd} still runs");
    assert!(!group_alive(apiserver), "kube-apiserver's group {apiserver} still runs");
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn a_killed_test_process_does_not_leave_servers_behind() {
    // The harness binary itself, killed with SIGKILL while its cluster runs:
    // no unwinding, no Drop. The guard must stop the servers anyway.
    if std::env::var_os("CLUSTER_HARNESS_VICTIM").is_some() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let cluster = runtime.block_on(TestCluster::start());
        let (etcd, apiserver) = cluster.pids();
        println!("PGIDS {etcd} {apiserver} {}", cluster.dir().display());
        std::thread::sleep(std::time::Duration::from_secs(300));
        return;
    }
    use std::io::BufRead;
    let mut victim = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_killed_test_process_does_not_leave_servers_behind",
            "--nocapture",
        ])
        .env("CLUSTER_HARNESS_VICTIM", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(victim.stdout.take().unwrap());
    let line = stdout
        .lines()
        .map(|l| l.unwrap())
        .find(|l| l.starts_with("PGIDS "))
        .expect("the victim's cluster started");
    let words: Vec<&str> = line.split(' ').collect();
    let pgids: Vec<u32> = words[1..3].iter().map(|p| p.parse().unwrap()).collect();
    let dir = std::path::PathBuf::from(words[3]);
    assert!(dir.exists());
    assert!(pgids.iter().all(|p| group_alive(*p)));
    victim.kill().unwrap();
    victim.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while pgids.iter().any(|p| group_alive(*p)) {
        assert!(
            std::time::Instant::now() < deadline,
            "servers outlived the killed test process: {pgids:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    while dir.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} outlived the killed test process",
            dir.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
