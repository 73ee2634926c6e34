//! The processes the harness starts: each in its own process group under a
//! small `sh` guard, its output in a log file; free loopback ports and
//! waiting for a listener.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// A process started in its own process group, output to a log file.
///
/// It runs under a small `sh` guard that also stops it when this test
/// process dies without unwinding (SIGKILL, abort): the guard reads the
/// pipe on its stdin, which closes when the test process goes away.
pub(crate) struct Proc {
    pub(crate) name: &'static str,
    pub(crate) child: Child,
    pub(crate) log: PathBuf,
    _lifeline: Option<std::process::ChildStdin>,
}

const GUARD: &str = r#"exec 3<&0
"$0" "$@" </dev/null &
server=$!
( read -r _ <&3; kill -KILL "$server" 2>/dev/null; [ -z "$GUARD_REMOVE_DIR" ] || rm -rf "$GUARD_REMOVE_DIR" ) &
wait "$server"
status=$?
kill "$!" 2>/dev/null
exit "$status""#;

impl Proc {
    /// `dir` is removed by the guard if the test process dies.
    pub(crate) fn spawn(name: &'static str, program: &Path, args: &[String], log: PathBuf, dir: &Path) -> Result<Self> {
        let file = fs::File::create(&log)?;
        let mut child = {
            use std::os::unix::process::CommandExt;
            Command::new("sh")
                .arg("-c")
                .arg(GUARD)
                .arg(program)
                .args(args)
                .env("GUARD_REMOVE_DIR", dir)
                .stdin(Stdio::piped())
                .stdout(file.try_clone()?)
                .stderr(file)
                .process_group(0)
                .spawn()
                .with_context(|| format!("starting {}", program.display()))?
        };
        let lifeline = child.stdin.take();
        Ok(Self {
            name,
            child,
            log,
            _lifeline: lifeline,
        })
    }

    pub(crate) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM to the group; SIGKILL once the guard has gone, or after
    /// 5 s; then waits (up to 5 s more) until no process of the group runs.
    pub(crate) fn stop(&mut self) {
        let group = Pid::from_raw(self.child.id() as i32);
        if self.exited().is_none() {
            let _ = killpg(group, Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(5);
            while self.exited().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = killpg(group, Signal::SIGKILL);
        let _ = self.child.wait();
        let deadline = Instant::now() + Duration::from_secs(5);
        while group_running(self.child.id()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The first line of the log that contains `needle`, waiting up to
    /// `timeout` for it; an error if the process exits first.
    pub(crate) fn wait_for_log_line(&mut self, needle: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let text = fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(line) = text.lines().find(|l| l.contains(needle)) {
                return Ok(line.to_string());
            }
            if let Some(status) = self.exited() {
                bail!("{} exited early ({status})", self.name);
            }
            if Instant::now() > deadline {
                bail!("{} did not log {needle:?} within {timeout:?}", self.name);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub(crate) fn tail(&self, max: u64) -> String {
        let mut text = String::new();
        if let Ok(mut f) = fs::File::open(&self.log) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let _ = f.seek(SeekFrom::Start(len.saturating_sub(max)));
            let _ = f.read_to_string(&mut text);
        }
        text
    }
}

/// Whether a process of group `pgid` runs (zombies do not count).
pub fn group_running(pgid: u32) -> bool {
    let Ok(entries) = fs::read_dir("/proc") else {
        return false;
    };
    entries.filter_map(|e| e.ok()).any(|e| {
        let stat = fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // After the command: state ppid pgrp ...
        let fields: Vec<&str> = stat.rsplit(") ").next().unwrap_or("").split(' ').collect();
        fields.len() > 2 && fields[0] != "Z" && fields[0] != "X" && fields[2] == pgid.to_string()
    })
}

/// A free TCP port on 127.0.0.1 (held until the listener drops).
pub(crate) fn free_port() -> Result<(u16, TcpListener)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    Ok((l.local_addr()?.port(), l))
}

pub(crate) fn wait_tcp(addr: SocketAddr, proc: &mut Proc, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if let Some(status) = proc.exited() {
            bail!("{} exited early ({status})", proc.name);
        }
        if Instant::now() > deadline {
            bail!("{} did not listen on {addr} within {timeout:?}", proc.name);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
