//! Our matcher agrees with kubelet's `credentialprovider.URLsMatchStr` (and
//! its image normalisation, `parsers.ParseImageName`) on a generated set of
//! pattern × image pairs: one config with one provider per pattern, and
//! `cloud-credential-provider explain --config <it> <image>` per image.
//! Patterns kubelet's validation rejects must be rejected by our
//! `check-config` too. Images kubelet cannot parse (it never pulls them, so
//! no provider runs) must get no provider from `explain`, or be refused by
//! it. Both outcomes must be common: a fifth of the images at least match
//! some pattern and a fifth match none, and likewise for the patterns.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use cluster_harness::{assert_disagreements, cluster_bin, provider_binary, run_ok};
use serde_json::{Value, json};

/// Pairs: CLUSTER_MATCH_PATTERNS × CLUSTER_MATCH_IMAGES (default 150 × 400),
/// plus CLUSTER_MATCH_STRANGER_IMAGES (100: on registries no pattern was made
/// from, so that many images match nothing) and CLUSTER_MATCH_BAD_IMAGES (80
/// made unparsable; those kubelet parses after all are compared as the rest).
fn knob(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn provider_name(i: usize) -> String {
    format!("p{i:04}")
}

fn config_for(patterns: &[(usize, String)]) -> Value {
    let providers: Vec<Value> = patterns
        .iter()
        .map(|(i, p)| {
            json!({
                "name": provider_name(*i),
                "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
                "matchImages": [p],
                "defaultCacheDuration": "1m",
            })
        })
        .collect();
    json!({
        "apiVersion": "kubelet.config.k8s.io/v1",
        "kind": "CredentialProviderConfig",
        "providers": providers,
    })
}

fn check_config(path: &std::path::Path) -> (bool, String) {
    let out = Command::new(provider_binary())
        .arg("check-config")
        .arg(path)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // 2: kubelet (or our plugin) refuses it; 1: it could not be read.
    match out.status.code() {
        Some(0) => (true, text),
        Some(1 | 2) => (false, text),
        other => panic!("check-config exited {other:?}: {text}"),
    }
}

/// `explain -o json --config PATH -- IMAGE`: exit 0 when a provider runs, 2
/// when none does, 1 when it refuses the image.
fn explain(config: &std::path::Path, image: &str) -> std::process::Output {
    Command::new(provider_binary())
        .args(["explain", "-o", "json", "--config"])
        .arg(config)
        .arg("--")
        .arg(image)
        .output()
        .expect("run explain")
}

/// The providers `explain -o json` says kubelet runs (none when it failed).
fn explained_runs(out: &std::process::Output) -> Vec<String> {
    serde_json::from_slice::<Value>(&out.stdout)
        .ok()
        .and_then(|report| serde_json::from_value(report["runs"].clone()).ok())
        .unwrap_or_default()
}

#[test]
fn matcher_agrees_with_kubelet() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus_path = tmp.path().join("corpus.json");
    let seed = knob("CLUSTER_MATCH_SEED", 4412);
    run_ok(
        Command::new(cluster_bin("kubelet-credcheck"))
            .arg("match-corpus")
            .arg(format!("--out={}", corpus_path.display()))
            .arg(format!("--seed={seed}"))
            .arg(format!("--patterns={}", knob("CLUSTER_MATCH_PATTERNS", 150)))
            .arg(format!("--images={}", knob("CLUSTER_MATCH_IMAGES", 400)))
            .arg(format!("--bad-images={}", knob("CLUSTER_MATCH_BAD_IMAGES", 80)))
            .arg(format!(
                "--stranger-images={}",
                knob("CLUSTER_MATCH_STRANGER_IMAGES", 100)
            )),
    )
    .unwrap();
    let corpus: Value = serde_json::from_slice(&std::fs::read(&corpus_path).unwrap()).unwrap();
    let patterns: Vec<String> = serde_json::from_value(corpus["patterns"].clone()).unwrap();
    let mut pattern_found = BTreeMap::new();

    // Patterns kubelet rejects: our check-config must reject each.
    let invalid = corpus["invalid_patterns"].as_array().unwrap();
    for (n, bad) in invalid.iter().enumerate() {
        let pattern = bad["pattern"].as_str().unwrap();
        let path = tmp.path().join(format!("invalid-{n}.json"));
        std::fs::write(&path, config_for(&[(0, pattern.to_string())]).to_string()).unwrap();
        let (ours_ok, text) = check_config(&path);
        if ours_ok {
            let class = cluster_harness::go_error_class(bad["error"].as_str().unwrap_or(""));
            pattern_found
                .entry(format!("kubelet-rejects: {class}"))
                .or_insert_with(Vec::new)
                .push(format!(
                    "matchImages {pattern:?}: kubelet rejects ({}), ours accepts ({})",
                    bad["error"],
                    text.trim()
                ));
        }
    }

    // Patterns kubelet accepts: ours must accept them too; those it does
    // not are reported and left out of the matching pairs.
    let all: Vec<(usize, String)> = patterns.iter().cloned().enumerate().collect();
    let config_path = tmp.path().join("patterns.json");
    std::fs::write(&config_path, config_for(&all).to_string()).unwrap();
    let mut usable = all.clone();
    if !check_config(&config_path).0 {
        usable.clear();
        for (i, p) in &all {
            let path = tmp.path().join(format!("valid-{i}.json"));
            std::fs::write(&path, config_for(&[(*i, p.clone())]).to_string()).unwrap();
            let (ok, text) = check_config(&path);
            if ok {
                usable.push((*i, p.clone()));
            } else {
                pattern_found
                    .entry("kubelet-accepts".to_string())
                    .or_insert_with(Vec::new)
                    .push(format!(
                        "matchImages {p:?}: kubelet accepts, ours rejects ({})",
                        text.trim()
                    ));
            }
        }
        std::fs::write(&config_path, config_for(&usable).to_string()).unwrap();
    }
    let usable_ids: BTreeSet<usize> = usable.iter().map(|(i, _)| *i).collect();

    let mut match_found = BTreeMap::new();
    let mut unparsable_found = BTreeMap::new();
    let (mut pairs, mut matching, mut unparsable, mut refused) = (0usize, 0usize, 0usize, 0usize);
    // Parsable images with some matching pattern, with none; patterns
    // matching some image.
    let (mut images_matched, mut images_unmatched) = (0usize, 0usize);
    let mut patterns_matched = BTreeSet::new();
    for image in corpus["images"].as_array().unwrap() {
        let raw = image["image"].as_str().unwrap();
        if let Some(error) = image["error"].as_str() {
            // kubelet cannot parse this reference: it never pulls it, so no
            // provider runs. Ours must name none, or refuse the image.
            unparsable += 1;
            let out = explain(&config_path, raw);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let named = explained_runs(&out);
            match out.status.code() {
                Some(2) if named.is_empty() => {}
                Some(0) => {
                    unparsable_found
                        .entry(cluster_harness::go_error_class(
                            error.trim_start_matches("couldn't parse image name "),
                        ))
                        .or_insert_with(Vec::new)
                        .push(format!(
                            "image {raw:?}: kubelet cannot parse it ({error}), ours names {named:?}"
                        ));
                }
                Some(_) => {
                    refused += 1;
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    assert!(
                        named.is_empty() && stderr.contains("image"),
                        "explain {raw:?} failed without saying why the image is refused: {stdout}{stderr}"
                    );
                }
                None => panic!("explain {raw:?} was killed"),
            }
            continue;
        }
        let repo = image["repo"].as_str().unwrap();
        let kubelet: BTreeSet<usize> = image["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_u64().unwrap() as usize)
            .filter(|i| usable_ids.contains(i))
            .collect();
        let out = explain(&config_path, raw);
        if !matches!(out.status.code(), Some(0 | 2)) {
            panic!(
                "explain failed on {raw:?}, which kubelet parses (as {repo:?}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let ours: BTreeSet<usize> = explained_runs(&out)
            .iter()
            .filter_map(|name| name.strip_prefix('p').and_then(|n| n.parse().ok()))
            .collect();
        pairs += usable.len();
        matching += kubelet.len();
        if kubelet.is_empty() {
            images_unmatched += 1;
        } else {
            images_matched += 1;
        }
        patterns_matched.extend(kubelet.iter().copied());
        for i in kubelet.symmetric_difference(&ours) {
            let pattern = &patterns[*i];
            let kubelet_says = kubelet.contains(i);
            match_found
                .entry(format!("{pattern:?} {repo:?}"))
                .or_insert_with(Vec::new)
                .push(format!(
                    "pattern {pattern:?}, image {raw:?} (kubelet looks up {repo:?}): kubelet {}, ours {}",
                    if kubelet_says { "matches" } else { "does not match" },
                    if kubelet_says { "does not" } else { "matches" },
                ));
        }
    }
    eprintln!(
        "matching differential (seed {seed}): {} valid + {} invalid patterns, {pairs} pairs compared ({matching} match in kubelet); \
         images matching some pattern {images_matched}, none {images_unmatched}; patterns matching some image {} of {}; \
         {unparsable} images kubelet cannot parse ({refused} refused by ours); {} pattern, {} match and {} unparsable-image disagreements",
        patterns.len(),
        invalid.len(),
        patterns_matched.len(),
        usable.len(),
        pattern_found.len(),
        match_found.len(),
        unparsable_found.len()
    );
    // Both outcomes common, so that a matcher that says yes (or no) to
    // everything fails on many cases.
    let fifth = |part: usize, whole: usize| part * 5 >= whole;
    let parsed = images_matched + images_unmatched;
    assert!(
        fifth(images_matched, parsed) && fifth(images_unmatched, parsed),
        "unbalanced images: {images_matched} match some pattern, {images_unmatched} none"
    );
    let unmatched_patterns = usable.len() - patterns_matched.len();
    assert!(
        fifth(patterns_matched.len(), usable.len()) && fifth(unmatched_patterns, usable.len()),
        "unbalanced patterns: {} match some image, {unmatched_patterns} none",
        patterns_matched.len()
    );
    assert!(
        unparsable * 2 >= knob("CLUSTER_MATCH_BAD_IMAGES", 80),
        "only {unparsable} generated images are unparsable for kubelet"
    );
    assert!(
        pairs >= 10_000 || knob("CLUSTER_MATCH_IMAGES", 400) < 100,
        "only {pairs} pairs"
    );
    assert!(matching > 0, "no pair matches: the corpus is useless");
    let pattern_result = std::panic::catch_unwind(|| assert_disagreements("pattern", &pattern_found, false));
    let unparsable_result = std::panic::catch_unwind(|| assert_disagreements("unparsable", &unparsable_found, false));
    assert_disagreements("match", &match_found, false);
    for result in [pattern_result, unparsable_result] {
        if let Err(e) = result {
            std::panic::resume_unwind(e);
        }
    }
}
