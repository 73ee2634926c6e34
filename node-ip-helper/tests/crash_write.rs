//! `node-ip-helper write` killed at any point: the real binary, unchanged,
//! runs again and again and is sent SIGKILL after a random delay; after
//! each kill the environment file holds the old choice or the new one,
//! complete, with its mode, and at most one temporary file
//! (`.kubelet.env.tmp`, reused by the next write) is left beside it.
//!
//! The write itself takes microseconds, so most plain kills land before or
//! after it. A second round runs the binary under `strace -e inject=...:
//! delay_enter=...`, which makes each of the syscalls of the write
//! (lock, truncate, chmod, write, fsync, rename, the directory's fsync) wait
//! a few milliseconds before it runs, without changing the program: kills
//! then land between every two of them, and the test checks that they did.
//! A third test reads the order of those syscalls from strace: the temporary
//! file is fsynced before the rename and the directory after it.
//!
//! Needs root and iproute2 (network namespaces, as netns.rs; without them it
//! fails, saying so); the strace rounds fail where strace is not installed
//! (`make tools` installs it).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Netns;

/// The syscalls of one atomic write after the temporary file is opened, each
/// delayed under strace (not `openat`, which start-up calls hundreds of times).
const WRITE_SYSCALLS: &str = "flock,ftruncate,fchmod,write,fsync,rename,renameat,renameat2";

struct Setup {
    ns: Netns,
    dir: tempfile::TempDir,
    env_file: PathBuf,
    /// The file's content when eth0's address is chosen, and when eth1's is.
    contents: [Vec<u8>; 2],
}

fn setup() -> Setup {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.nic("eth1");
    ns.ip("addr add 10.0.0.5/24 dev eth0");
    ns.ip("addr add 10.9.0.5/24 dev eth1");
    ns.ip("route add default via 10.0.0.1 dev eth0 metric 100");
    let dir = tempfile::tempdir().expect("temporary directory");
    let env_file = dir.path().join("run/kubelet.env");
    let mut contents: [Vec<u8>; 2] = Default::default();
    for (i, content) in contents.iter_mut().enumerate() {
        let out = ns.helper(&[
            "write",
            "--env-file",
            path_str(&env_file),
            "--interface",
            &format!("eth{i}"),
        ]);
        assert_eq!(out.status, 0, "{}", out.stderr);
        *content = std::fs::read(&env_file).expect("the env file");
    }
    assert_ne!(contents[0], contents[1], "the two choices give two files");
    Setup {
        ns,
        dir,
        env_file,
        contents,
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// xorshift64*: random enough for delays, no dependency.
struct Random(u64);

impl Random {
    fn new() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970")
            .as_nanos() as u64;
        eprintln!("seed {seed}");
        Self(seed | 1)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound.max(1)
    }
}

#[derive(Debug, Default)]
struct Tally {
    runs: usize,
    /// Killed with the old file in place and no temporary file.
    killed_before: usize,
    /// Killed between creating the temporary file and renaming it.
    killed_mid_write: usize,
    /// Killed with the new file in place (after the rename).
    killed_after: usize,
    /// Ended on their own before the kill.
    finished: usize,
}

/// The command line of one run: `ip netns exec NS [strace ...] node-ip-helper
/// write ...`, in a process group of its own so that one kill reaches the
/// helper and strace together.
fn command(setup: &Setup, interface: &str, delay_us: Option<u64>) -> Command {
    let mut command = Command::new("ip");
    command.args(["netns", "exec", &setup.ns.name]);
    if let Some(delay) = delay_us {
        command.args(["strace", "-f", "-qq", "-o", "/dev/null"]);
        command.arg(format!("-etrace={WRITE_SYSCALLS}"));
        command.arg(format!("-einject={WRITE_SYSCALLS}:delay_enter={delay}"));
    }
    command
        .arg(env!("CARGO_BIN_EXE_node-ip-helper"))
        .args([
            "write",
            "--env-file",
            path_str(&setup.env_file),
            "--interface",
            interface,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    command
}

/// How long an uninterrupted run takes (the slowest of five).
fn calibrate(setup: &Setup, delay_us: Option<u64>) -> Duration {
    (0..5)
        .map(|i| {
            let started = Instant::now();
            let status = command(setup, &format!("eth{}", i % 2), delay_us)
                .status()
                .expect("run node-ip-helper");
            assert!(status.success(), "an uninterrupted write succeeds");
            started.elapsed()
        })
        .max()
        .expect("five runs")
}

/// Runs the helper `runs` times, each killed (its whole process group) at a
/// random point of `[0, 1.2 × an uninterrupted run)`, and checks the
/// directory after each.
fn kill_loop(setup: &Setup, runs: usize, delay_us: Option<u64>) -> Tally {
    let window = calibrate(setup, delay_us).mul_f64(1.2);
    eprintln!("uninterrupted run (strace delay {delay_us:?} µs): kills within {window:?}");
    let mut random = Random::new();
    let mut tally = Tally::default();
    let dir = setup.env_file.parent().expect("parent");
    for run in 0..runs {
        let before = std::fs::read(&setup.env_file).expect("the env file is always there");
        let mut child = command(setup, &format!("eth{}", run % 2), delay_us)
            .spawn()
            .expect("spawn node-ip-helper");
        let pgid = child.id();
        std::thread::sleep(Duration::from_micros(random.below(window.as_micros() as u64)));
        let finished = child.try_wait().expect("wait").is_some();
        let status = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .stderr(Stdio::null())
            .status()
            .expect("run kill");
        assert!(finished || status.success(), "kill the process group of run {run}");
        child.wait().expect("reap the killed run");

        let after = std::fs::read(&setup.env_file).expect("the env file is always there");
        assert!(
            setup.contents.contains(&after),
            "run {run}: the env file is neither the old nor the new one:\n{}",
            String::from_utf8_lossy(&after)
        );
        let mode = std::fs::metadata(&setup.env_file)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "run {run}");
        let mut others: Vec<String> = std::fs::read_dir(dir)
            .expect("read the directory")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|name| name != "kubelet.env")
            .collect();
        others.sort();
        assert!(
            others.is_empty() || others == [".kubelet.env.tmp"],
            "run {run}: stray files {others:?}"
        );
        tally.runs += 1;
        if finished {
            tally.finished += 1;
        } else if !others.is_empty() {
            tally.killed_mid_write += 1;
        } else if after == before {
            tally.killed_before += 1;
        } else {
            tally.killed_after += 1;
        }
    }
    // The next uninterrupted write (of the other choice: an unchanged file is
    // not written) reuses what a kill left and removes it.
    let other = usize::from(std::fs::read(&setup.env_file).expect("env file") == setup.contents[0]);
    let status = command(setup, &format!("eth{other}"), None)
        .status()
        .expect("run node-ip-helper");
    assert!(status.success());
    assert_eq!(std::fs::read(&setup.env_file).expect("env file"), setup.contents[other]);
    assert_eq!(
        std::fs::read_dir(dir).expect("read the directory").count(),
        1,
        "no temporary file after a write that finished"
    );
    eprintln!("{tally:?}");
    tally
}

/// strace (`make tools` installs it): a test that needs it fails without it
/// rather than passing untried.
fn require_strace() {
    let found = Command::new("strace")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        found,
        "strace is not installed: `make tools` (or apt-get install strace)"
    );
}

#[test]
fn a_write_killed_at_a_random_moment_leaves_the_old_or_the_new_file() {
    let setup = setup();
    let tally = kill_loop(&setup, 150, None);
    assert_eq!(tally.runs, 150);
}

#[test]
fn a_write_killed_between_any_two_of_its_syscalls_leaves_the_old_or_the_new_file() {
    require_strace();
    let setup = setup();
    // 5 ms before each syscall of the write: the write takes about 35 ms
    // of a run's 50 to 100, and random kills land before, inside and after it.
    let tally = kill_loop(&setup, 150, Some(5000));
    assert!(tally.killed_mid_write >= 5, "kills landed inside the write: {tally:?}");
    assert!(tally.killed_before + tally.killed_after >= 5, "{tally:?}");
}

#[test]
fn the_temporary_file_is_fsynced_before_the_rename_and_the_directory_after() {
    require_strace();
    let setup = setup();
    let trace = setup.dir.path().join("trace");
    let status = Command::new("ip")
        .args(["netns", "exec", &setup.ns.name])
        .args(["strace", "-f", "-qq", "-y", "-o", path_str(&trace)])
        .arg("-etrace=openat,fsync,fdatasync,rename,renameat,renameat2")
        .arg(env!("CARGO_BIN_EXE_node-ip-helper"))
        .args(["write", "--env-file", path_str(&setup.env_file), "--interface", "eth0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run node-ip-helper under strace");
    assert!(status.success());
    let trace = std::fs::read_to_string(&trace).expect("the trace");
    let run_dir = path_str(setup.env_file.parent().expect("parent")).to_owned();
    let temp = format!("{run_dir}/.kubelet.env.tmp");
    let position = |what: &str, matches: &dyn Fn(&str) -> bool| {
        trace
            .lines()
            .position(matches)
            .unwrap_or_else(|| panic!("no {what} in the trace:\n{trace}"))
    };
    let temp_synced = position("fsync of the temporary file", &|line| {
        line.contains("fsync(") && line.contains(&format!("<{temp}>"))
    });
    let renamed = position("rename", &|line| {
        line.contains("rename") && line.contains(".kubelet.env.tmp") && line.contains("= 0")
    });
    let dir_synced = position("fsync of the directory", &|line| {
        line.contains("fsync(") && line.contains(&format!("<{run_dir}>)"))
    });
    assert!(temp_synced < renamed && renamed < dir_synced, "{trace}");
}
