//! Shared by the metadata tests (`metadata.rs`, `node_names.rs`): running
//! `detect` against a metadata server from a network namespace, and reading
//! its JSON.
#![allow(dead_code)] // each test file uses a different subset

use serde_json::Value;

use crate::common::{Netns, Server};

/// The metadata endpoint flag's value for `server`.
pub fn endpoint(server: &Server) -> String {
    format!("http://127.0.0.1:{}/", server.port)
}

/// `detect --source SOURCE` against `server`, as JSON, or the error text.
pub fn detect(ns: &Netns, server: &Server, source: &str, extra: &[&str]) -> Result<Value, String> {
    let url = endpoint(server);
    let mut args = vec![
        "detect",
        "--source",
        source,
        "--metadata-endpoint",
        url.as_str(),
        "--output",
        "json",
    ];
    args.extend(extra);
    let out = ns.helper(&args);
    if out.status != 0 {
        assert!(out.stdout.is_empty());
        return Err(out.stderr);
    }
    Ok(serde_json::from_str(&out.stdout).expect("JSON"))
}

pub fn ips(json: &Value) -> Vec<&str> {
    json["nodeIPs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect()
}

pub fn cloud(json: &Value) -> Vec<String> {
    json["cloudAddresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| format!("{} {}", a["type"].as_str().unwrap(), a["address"].as_str().unwrap()))
        .collect()
}
