//! [`PyFake`]: the launcher every scenario-driven cloud fake shares. A fake
//! is one Python program (its [`FakeKind::SCRIPT`]) started with a scenario:
//! its `tests/data/<DATA>/scenario.json` as it is ([`PyFake::start`]), after
//! an edit ([`PyFake::with`]) or any value ([`PyFake::from_scenario`]); it
//! counts the requests it answers at `/__requests`. What one cloud's fake
//! adds (its URLs, its run-time announcements) is an `impl PyFake<Kind>`
//! beside its kind.

use std::marker::PhantomData;

use serde_json::Value;

use super::{Process, call, python, read, scenario_file, script, workspace_root};

/// What tells one cloud's fake from another.
pub trait FakeKind {
    /// The program in `tests/fakes/`, such as `gcp_server.py`.
    const SCRIPT: &'static str;
    /// The directory under `tests/data/` whose `scenario.json` it starts with.
    const DATA: &'static str;
    /// Prefixes of the counter keys that count something other than requests
    /// (a header sent, an exchange's grant type): left out of
    /// [`PyFake::all_requests`].
    const NOT_REQUESTS: &'static [&'static str] = &[];
}

/// A fake of kind `K` on 127.0.0.1, killed when dropped.
pub struct PyFake<K> {
    _process: Process,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    _kind: PhantomData<K>,
}

impl<K: FakeKind> PyFake<K> {
    /// The fake with its `tests/data/<DATA>/scenario.json` as it is.
    pub fn start() -> Self {
        Self::with(|_| {})
    }

    /// The fake with its `tests/data/<DATA>/scenario.json` after `edit`.
    pub fn with(edit: impl FnOnce(&mut Value)) -> Self {
        let path = workspace_root().join("tests/data").join(K::DATA).join("scenario.json");
        let mut scenario: Value =
            serde_json::from_str(&read(&path)).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
        edit(&mut scenario);
        Self::from_scenario(&scenario)
    }

    /// The fake with `scenario` (the format its program describes).
    pub fn from_scenario(scenario: &Value) -> Self {
        let file = scenario_file(scenario);
        let path = file.path().to_owned();
        let (process, port) = Process::spawn(python(), &script(K::SCRIPT), &path, Some(file));
        PyFake {
            _process: process,
            port,
            _kind: PhantomData,
        }
    }

    /// `http://127.0.0.1:PORT/`: the base of every API it serves.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// `127.0.0.1:PORT`: for the GCP fake `GCE_METADATA_HOST`, for
    /// Azure's the registry name.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// How many `METHOD /path` requests the fake has answered (0 for none),
    /// or the count of another of its counter keys.
    pub fn requests(&self, key: &str) -> u64 {
        self.counts()[key].as_u64().unwrap_or(0)
    }

    /// How many requests the fake has answered in all.
    pub fn all_requests(&self) -> u64 {
        let counts = self.counts();
        let counts = counts.as_object().expect("/__requests answers an object");
        counts
            .iter()
            .filter(|(key, _)| !K::NOT_REQUESTS.iter().any(|prefix| key.starts_with(prefix)))
            .filter_map(|(_, count)| count.as_u64())
            .sum()
    }

    /// `/__requests`: `{"METHOD /path": count}` of the requests so far.
    pub fn counts(&self) -> Value {
        call(self.port, "GET", "/__requests", "")
    }
}
