//! A forward proxy on loopback that only records who asked it for what (the
//! first line of each request) and then hangs up: whatever reaches it went
//! through the proxy instead of straight to its destination.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

pub struct RecordingProxy {
    pub url: String,
    pub requests: Arc<Mutex<Vec<String>>>,
}

impl RecordingProxy {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut first = String::new();
                let _ = BufReader::new(&stream).read_line(&mut first);
                seen.lock().unwrap().push(first.trim_end().to_owned());
                // Dropping the stream hangs up: the client sees a failure.
            }
        });
        Self { url, requests }
    }

    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}
