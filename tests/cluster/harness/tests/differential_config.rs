//! `cloud-credential-provider check-config` accepts exactly the configs that
//! kubelet's own reading and validation (RegisterCredentialProviderPlugins
//! of the pinned k8s.io/kubernetes) accept: the fixtures under
//! tests/data/credential-provider/configs/ and a generated corpus covering
//! every validation rule.

use std::collections::BTreeMap;
use std::process::Command;

use cluster_harness::{assert_disagreements, cluster_bin, corpus, json_lines, provider_binary, run_ok, workspace_root};

/// Corpus cases that ours refuses, as kubelet does, but for a limit of its
/// own checked before the config is decoded (so kubelet's error names a
/// field ours never reached): the case and what our error says.
const OWN_LIMITS: [(&str, &str); 1] = [("bad-deep-nesting.yaml", "nested more than 32 levels deep")];

#[test]
fn check_config_agrees_with_kubelet() {
    let tmp = tempfile::tempdir().unwrap();
    let generated = tmp.path().join("corpus");
    std::fs::create_dir_all(&generated).unwrap();
    let mut paths = corpus::write_corpus(&generated).unwrap();
    let fixtures = workspace_root().join("tests/data/credential-provider/configs");
    let mut fixture_paths: Vec<_> = std::fs::read_dir(&fixtures)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    fixture_paths.sort();
    paths.extend(fixture_paths);
    // The manifests kubelet would be given.
    for entry in std::fs::read_dir(workspace_root().join("manifests/credential-provider")).unwrap() {
        paths.push(entry.unwrap().path());
    }
    assert!(paths.len() >= 100, "corpus has {} configs", paths.len());

    let bin_dir = tmp.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let out = run_ok(
        Command::new(cluster_bin("kubelet-credcheck"))
            .arg("validate")
            .arg("--bin-dir")
            .arg(&bin_dir)
            .args(&paths),
    )
    .unwrap();
    let verdicts = json_lines(&out).unwrap();
    assert_eq!(verdicts.len(), paths.len());

    let ours = provider_binary();
    let mut found = BTreeMap::new();
    let mut fields_found = BTreeMap::new();
    let (mut accepted, mut rejected, mut fields_compared) = (0, 0, 0);
    for (path, verdict) in paths.iter().zip(&verdicts) {
        let kubelet_ok = verdict["accepted"].as_bool().unwrap();
        let kubelet_err = verdict["error"].as_str().unwrap_or("");
        let out = Command::new(&ours).arg("check-config").arg(path).output().unwrap();
        // 2: refused; 1: not read or not parsed (kubelet refuses those too).
        let our_ok = match out.status.code() {
            Some(0) => true,
            Some(1 | 2) => false,
            other => panic!(
                "check-config {} exited {other:?}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            ),
        };
        if kubelet_ok {
            accepted += 1
        } else {
            rejected += 1
        }
        let name = path
            .strip_prefix(tmp.path())
            .or_else(|_| path.strip_prefix(workspace_root()))
            .unwrap_or(path);
        let key = name.display().to_string();
        let key = key.strip_prefix("corpus/").unwrap_or(&key).to_string();
        if kubelet_ok != our_ok {
            let text = if path.is_file() {
                std::fs::read_to_string(path).unwrap_or_default()
            } else {
                String::from("(directory)")
            };
            found.entry(key.clone()).or_insert_with(Vec::new).push(format!(
                "{key}: kubelet {} ({kubelet_err}), ours {} ({}{})\n--- config ---\n{text}",
                if kubelet_ok { "accepts" } else { "rejects" },
                if our_ok { "accepts" } else { "rejects" },
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim(),
            ));
        }
        if !kubelet_ok && !our_ok {
            let ours_text = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
            let own_limit = OWN_LIMITS.iter().find(|(case, _)| *case == key);
            if let Some((_, says)) = own_limit {
                assert!(
                    ours_text.contains(says),
                    "{key}: ours should refuse it with its own limit ({says}): {ours_text}"
                );
            }
            let (fields, all) = kubelet_fields(kubelet_err);
            if !fields.is_empty() && own_limit.is_none() {
                fields_compared += 1;
                if !names_fields(&ours_text, &fields, all) {
                    fields_found.entry(key.clone()).or_insert_with(Vec::new).push(format!(
                        "{key}: kubelet names {} {} ({kubelet_err}); ours does not:\n{}",
                        if all { "all of" } else { "one of" },
                        fields.join(", "),
                        ours_text.trim()
                    ));
                }
            }
        }
        let hint_bad = key.contains("bad-")
            || key.contains("dir-dup")
            || key.contains("dir-one-")
            || key.contains("dir-only")
            || key.contains("dir-empty")
            || key.contains("dir-nested");
        if hint_bad == kubelet_ok {
            eprintln!(
                "note: {key}: kubelet {} it (the name suggests otherwise): {kubelet_err}",
                if kubelet_ok { "accepts" } else { "rejects" }
            );
        }
    }
    eprintln!(
        "check-config differential: {} configs, kubelet accepts {accepted}, rejects {rejected}; {} disagreements; \
         {fields_compared} of kubelet's errors name fields, {} not named by ours",
        paths.len(),
        found.len(),
        fields_found.len()
    );
    assert!(
        fields_compared >= 20,
        "only {fields_compared} of kubelet's errors name fields: the field comparison is nearly empty"
    );
    let verdicts = std::panic::catch_unwind(|| assert_disagreements("config", &found, true));
    assert_disagreements("config-field", &fields_found, true);
    if let Err(e) = verdicts {
        std::panic::resume_unwind(e);
    }
}

/// Entries that run our plugin with args or env it refuses (a typo'd flag,
/// upstream's `get-credentials`, klog's `--v`, a bad duration in `env`):
/// kubelet never parses them, so it accepts each config, and our
/// check-config must agree on kubelet's part (no problem of kubelet's) and
/// refuse it for the plugin (exit 2, every problem the plugin's). Configs
/// our plugin takes pass both. About a second: one kubelet check per file.
#[test]
fn check_config_refuses_what_our_plugin_refuses_and_kubelet_accepts() {
    let dir = workspace_root().join("tests/data/credential-provider/plugin-args");
    let mut paths: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    let tmp = tempfile::tempdir().unwrap();
    let out = run_ok(
        Command::new(cluster_bin("kubelet-credcheck"))
            .arg("validate")
            .arg("--bin-dir")
            .arg(tmp.path())
            .args(&paths),
    )
    .unwrap();
    let verdicts = json_lines(&out).unwrap();
    assert_eq!(verdicts.len(), paths.len());
    let mut refused = 0;
    for (path, verdict) in paths.iter().zip(&verdicts) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(verdict["accepted"], true, "{name}: kubelet refuses it: {verdict}");
        let out = Command::new(provider_binary())
            .args(["check-config", "-o", "json"])
            .arg(path)
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{name}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        let problems = report["problems"].as_array().unwrap();
        assert!(
            problems.iter().all(|p| p["refused_by"] == "plugin"),
            "{name}: kubelet accepts it, ours names a problem of kubelet's: {report}"
        );
        let plugin_refuses = ["ecr-typo", "upstream-ecr", "upstream-gcp", "env-timeout", "no-args"]
            .iter()
            .any(|case| name.starts_with(case));
        let want = if plugin_refuses { 2 } else { 0 };
        assert_eq!(out.status.code(), Some(want), "{name}: {report}");
        refused += usize::from(plugin_refuses);
    }
    assert_eq!(refused, 5, "the refused fixtures: {paths:?}");
}

/// Random configs from `kubelet-credcheck config-corpus`: every field drawn
/// from valid and invalid values (CLUSTER_CONFIG_SEED, CLUSTER_CONFIG_COUNT).
#[test]
fn check_config_agrees_with_kubelet_on_random_configs() {
    let knob = |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let seed = knob("CLUSTER_CONFIG_SEED", 4412);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("random");
    run_ok(
        Command::new(cluster_bin("kubelet-credcheck"))
            .arg("config-corpus")
            .arg(format!("--out={}", dir.display()))
            .arg(format!("--seed={seed}"))
            .arg(format!("--count={}", knob("CLUSTER_CONFIG_COUNT", 200))),
    )
    .unwrap();
    let mut paths: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    let bin_dir = tmp.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let out = run_ok(
        Command::new(cluster_bin("kubelet-credcheck"))
            .arg("validate")
            .arg("--bin-dir")
            .arg(&bin_dir)
            .args(&paths),
    )
    .unwrap();
    let verdicts = json_lines(&out).unwrap();
    assert_eq!(verdicts.len(), paths.len());
    let mut found = BTreeMap::new();
    let mut fields_found = BTreeMap::new();
    let (mut accepted, mut fields_compared) = (0, 0);
    for (path, verdict) in paths.iter().zip(&verdicts) {
        let kubelet_ok = verdict["accepted"].as_bool().unwrap();
        accepted += usize::from(kubelet_ok);
        let out = Command::new(provider_binary())
            .arg("check-config")
            .arg(path)
            .output()
            .unwrap();
        let our_ok = match out.status.code() {
            Some(0) => true,
            Some(1 | 2) => false,
            other => panic!("check-config {} exited {other:?}", path.display()),
        };
        if !kubelet_ok && !our_ok {
            let error = verdict["error"].as_str().unwrap_or("");
            let ours_text = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
            let (fields, all) = kubelet_fields(error);
            if !fields.is_empty() {
                fields_compared += 1;
                if !names_fields(&ours_text, &fields, all) {
                    fields_found
                        .entry(fields.join(" "))
                        .or_insert_with(Vec::new)
                        .push(format!(
                            "{}: kubelet names {} {} ({error}); ours does not:\n{}",
                            path.file_name().expect("file name").to_string_lossy(),
                            if all { "all of" } else { "one of" },
                            fields.join(", "),
                            ours_text.trim()
                        ));
                }
            }
        }
        if kubelet_ok != our_ok {
            // Keyed by kubelet's error without the file name, so that one
            // root cause is one key whatever the seed.
            let error = verdict["error"].as_str().unwrap_or("");
            let class = error_class(error);
            let key = if kubelet_ok {
                "kubelet-accepts".to_string()
            } else {
                format!("kubelet-rejects: {class}")
            };
            found.entry(key).or_insert_with(Vec::new).push(format!(
                "{}: kubelet {} ({error}), ours {} ({})\n{}",
                path.file_name().unwrap().to_string_lossy(),
                if kubelet_ok { "accepts" } else { "rejects" },
                if our_ok { "accepts" } else { "rejects" },
                String::from_utf8_lossy(&out.stdout).trim(),
                std::fs::read_to_string(path).unwrap_or_default(),
            ));
        }
    }
    eprintln!(
        "random check-config differential (seed {seed}): {} configs, kubelet accepts {accepted}; {} disagreement classes; \
         {fields_compared} of kubelet's errors name fields, {} not named by ours",
        paths.len(),
        found.len(),
        fields_found.len()
    );
    assert!(
        accepted > paths.len() / 5 && accepted < paths.len() * 4 / 5,
        "unbalanced corpus: {accepted} accepted"
    );
    assert!(
        fields_compared >= paths.len() / 10,
        "only {fields_compared} of kubelet's errors name fields: the field comparison is nearly empty"
    );
    let verdicts = std::panic::catch_unwind(|| assert_disagreements("config-random", &found, false));
    assert_disagreements("config-random-field", &fields_found, false);
    if let Err(e) = verdicts {
        std::panic::resume_unwind(e);
    }
}

/// kubelet's error without the file name and values; an unknown field keeps
/// its path (indexes dropped).
fn error_class(error: &str) -> String {
    let rest = error.split_once(": ").map_or(error, |(_, rest)| rest);
    if let Some(field) = rest
        .strip_prefix("strict decoding error: unknown field \"")
        .and_then(|f| f.split('"').next())
    {
        let mut path = String::new();
        let mut in_index = false;
        for c in field.chars() {
            match c {
                '[' => {
                    in_index = true;
                    path.push_str("[]");
                }
                ']' => in_index = false,
                _ if in_index => {}
                _ => path.push(c),
            }
        }
        return format!("unknown field {path}");
    }
    cluster_harness::go_error_class(&format!("parse \"x\": {rest}"))
}

/// The field paths kubelet's error names, indexes dropped (kubelet's
/// validation names `providers.matchImages`, its strict decoder
/// `providers[0].matchImage`), and whether ours must name all of them or
/// one: each element of a validation error list (`failed to validate
/// credential provider config: [providers.name: …, providers.apiVersion:
/// …]`), all of which ours reports too; or each `unknown field "…"` of the
/// strict decoder, which lists every unknown field where ours (serde) stops
/// at the first. Errors without a path (a duration, a duplicate name
/// across files, YAML syntax) give none.
fn kubelet_fields(error: &str) -> (Vec<String>, bool) {
    let mut fields = Vec::new();
    if let Some((_, list)) = error.split_once("failed to validate credential provider config: ") {
        let list = list.strip_prefix('[').unwrap_or(list);
        let mut at = 0;
        while let Some(i) = list[at..].find("providers") {
            let start = at + i;
            at = start + "providers".len();
            if start != 0 && !list[..start].ends_with(", ") {
                continue;
            }
            let len = list[start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '[' | ']')))
                .unwrap_or(list.len() - start);
            if list[start + len..].starts_with(": ") {
                fields.push(without_indexes(&list[start..start + len]));
            }
        }
        fields.sort();
        fields.dedup();
        return (fields, true);
    }
    let mut rest = error;
    while let Some(i) = rest.find("unknown field \"") {
        rest = &rest[i + "unknown field \"".len()..];
        if let Some(end) = rest.find('"') {
            fields.push(without_indexes(&rest[..end]));
            rest = &rest[end..];
        }
    }
    fields.sort();
    fields.dedup();
    (fields, false)
}

/// Whether our error names kubelet's fields (indexes dropped, as kubelet's
/// are): the path one of our messages starts with (`FILE: providers[0].name:
/// …`) is one of them; `all`: every one of them is such a path.
fn names_fields(ours: &str, fields: &[String], all: bool) -> bool {
    let ours: Vec<String> = ours
        .lines()
        .filter_map(|line| line.split(": ").nth(1))
        .map(without_indexes)
        .collect();
    let named = |field: &String| ours.contains(field);
    if all {
        fields.iter().all(named)
    } else {
        fields.iter().any(named)
    }
}

/// `providers[0].matchImages[1]` → `providers.matchImages`.
fn without_indexes(path: &str) -> String {
    let mut out = String::new();
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => in_index = true,
            ']' => in_index = false,
            _ if in_index => {}
            _ => out.push(c),
        }
    }
    out
}
