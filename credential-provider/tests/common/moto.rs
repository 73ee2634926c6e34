//! moto's server (PyPI `moto[server]`, installed by `make tools`) on
//! loopback: real AWS API behaviour for ECR and STS, killed when dropped.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Moto {
    child: Child,
    pub port: u16,
}

impl Moto {
    pub fn start() -> Self {
        let moto = std::env::var_os("MOTO_SERVER")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| {
                std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.cache/venv/bin/moto_server"))
            });
        assert!(
            moto.exists(),
            "{} not found: run `make tools` (installs moto[server])",
            moto.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&moto)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        // Owned from here on, so that Drop kills it whatever happens next.
        let moto = Self { child, port };
        for _ in 0..150 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return moto;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("moto_server did not start on port {port}");
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
