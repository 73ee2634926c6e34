//! The config corpus of the differential check-config test: kubelet
//! CredentialProviderConfigs, good and bad, one validation rule each, written
//! into a directory (files and config directories).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Result;

const HEAD: &str = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\n";

/// A config with one provider whose body is `fields` (YAML lines at the
/// provider's indentation, without the leading `- `).
fn one(fields: &str) -> String {
    format!("{HEAD}providers:\n  - {}\n", indent(fields))
}

fn indent(fields: &str) -> String {
    fields.trim().lines().collect::<Vec<_>>().join("\n    ")
}

/// A valid provider named `name` with `extra` fields appended.
fn provider(name: &str, extra: &str) -> String {
    let mut body = format!(
        "name: {name}\napiVersion: credentialprovider.kubelet.k8s.io/v1\nmatchImages: [\"registry.example.com\"]\ndefaultCacheDuration: 10m"
    );
    if !extra.trim().is_empty() {
        body.push('\n');
        body.push_str(extra.trim());
    }
    body
}

/// A valid provider with `matchImages: [<pattern>]` (pattern as YAML text).
fn matching(pattern_yaml: &str) -> String {
    one(&format!(
        "name: p\napiVersion: credentialprovider.kubelet.k8s.io/v1\nmatchImages: [{pattern_yaml}]\ndefaultCacheDuration: 10m"
    ))
}

fn with_duration(d: &str) -> String {
    one(&format!(
        "name: p\napiVersion: credentialprovider.kubelet.k8s.io/v1\nmatchImages: [\"registry.example.com\"]\ndefaultCacheDuration: {d}"
    ))
}

/// tokenAttributes lines for a v1 provider.
fn token(attrs: &str) -> String {
    one(&provider(
        "p",
        &format!(
            "tokenAttributes:\n  {}",
            attrs.trim().lines().collect::<Vec<_>>().join("\n  ")
        ),
    ))
}

fn with_name(name_yaml: &str) -> String {
    one(&provider(name_yaml, ""))
}

/// Every generated single-file case: (file name, contents).
pub fn file_cases() -> Vec<(String, String)> {
    let sa = "serviceAccountTokenAudience: registry.example.com\ncacheType: Token\nrequireServiceAccount: true";
    let mut cases: Vec<(&str, String)> = vec![
        // Good ones.
        ("ok-minimal.yaml", one(&provider("p", ""))),
        ("ok-v1beta1-provider.yaml", one(&provider("p", "").replace("/v1\n", "/v1beta1\n"))),
        ("ok-v1alpha1-provider.yaml", one(&provider("p", "").replace("/v1\n", "/v1alpha1\n"))),
        (
            "ok-config-v1beta1.yaml",
            one(&provider("p", "")).replace("kubelet.config.k8s.io/v1\n", "kubelet.config.k8s.io/v1beta1\n"),
        ),
        (
            "ok-config-v1alpha1.yaml",
            one(&provider("p", "")).replace("kubelet.config.k8s.io/v1\n", "kubelet.config.k8s.io/v1alpha1\n"),
        ),
        (
            "ok-args-env.yaml",
            one(&provider("p", "args: [static, --x=1]\nenv:\n  - name: A\n    value: b")),
        ),
        ("ok-two-providers.yaml", format!("{HEAD}providers:\n  - {}\n  - {}\n", indent(&provider("a", "")), indent(&provider("b", "")))),
        (
            "ok-json.json",
            r#"{"apiVersion":"kubelet.config.k8s.io/v1","kind":"CredentialProviderConfig","providers":[{"name":"p","apiVersion":"credentialprovider.kubelet.k8s.io/v1","matchImages":["*.example.com"],"defaultCacheDuration":"1h"}]}"#.into(),
        ),
        // A UTF-8 byte-order mark, as some editors on Windows write (issue 9).
        ("bom.yaml", format!("\u{feff}{}", one(&provider("p", "")))),
        (
            "bom.json",
            "\u{feff}{\"apiVersion\":\"kubelet.config.k8s.io/v1\",\"kind\":\"CredentialProviderConfig\",\"providers\":[]}".into(),
        ),
        // Nesting deeper than check-config's limit of 32 (issue 9): no field of the
        // config nests that deep, so kubelet refuses it too.
        ("bad-deep-nesting.yaml", format!("{HEAD}providers: []
x: {}{}\n", "[".repeat(40), "]".repeat(40))),
        ("ok-token-attributes.yaml", token(sa)),
        ("ok-token-cache-serviceaccount.yaml", token("serviceAccountTokenAudience: a\ncacheType: ServiceAccount\nrequireServiceAccount: true")),
        (
            "ok-token-annotations.yaml",
            token(&format!("{sa}\nrequiredServiceAccountAnnotationKeys: [example.com/role]\noptionalServiceAccountAnnotationKeys: [example.com/scope, Example.COM/Upper]")),
        ),
        ("ok-token-optional-without-sa.yaml", token("serviceAccountTokenAudience: a\ncacheType: Token\nrequireServiceAccount: false\noptionalServiceAccountAnnotationKeys: [example.com/x]")),
        ("ok-name-dots.yaml", with_name("\"...\"")),
        ("ok-name-dot-prefix.yaml", with_name(".hidden")),
        ("ok-name-empty.yaml", with_name("\"\"")),
        ("ok-name-tab.yaml", with_name("\"a\\tb\"")),
        ("ok-name-unicode.yaml", with_name("\"prövider\"")),
        ("ok-duration-zero.yaml", with_duration("0s")),
        ("ok-duration-bare-zero.yaml", with_duration("\"0\"")),
        ("ok-duration-compound.yaml", with_duration("1h30m")),
        ("ok-duration-fraction.yaml", with_duration("1.5h")),
        ("ok-duration-plus.yaml", with_duration("\"+5m\"")),
        ("ok-duration-micro.yaml", with_duration("\"10µs\"")),
        ("ok-match-wildcard.yaml", matching("\"*\"")),
        ("ok-match-port.yaml", matching("\"registry.example.com:5000\"")),
        ("ok-match-path.yaml", matching("\"registry.example.com/team/app\"")),
        ("ok-match-glob.yaml", matching("\"r?g.[a-c]x.*\"")),
        ("bad-match-negated-class.yaml", matching("\"reg[^x].io\"")),
        ("ok-match-scheme.yaml", matching("\"https://registry.example.com\"")),
        ("ok-match-userinfo.yaml", matching("\"user:pw@registry.example.com\"")),
        ("ok-match-ipv6.yaml", matching("\"[::1]:5000\"")),
        ("ok-match-empty.yaml", matching("\"\"")),
        ("ok-match-query-fragment.yaml", matching("\"registry.example.com/a?b#c\"")),
        ("ok-match-percent.yaml", matching("\"registry.example.com/te%61m\"")),
        ("ok-match-port-out-of-range.yaml", matching("\"registry.example.com:99999\"")),
        ("ok-match-empty-port.yaml", matching("\"registry.example.com:\"")),
        ("bad-match-backslash.yaml", matching("\"reg\\\\.io\"")),
        // Names.
        ("bad-name-slash.yaml", with_name("a/b")),
        ("bad-name-space.yaml", with_name("\"a b\"")),
        ("bad-name-dot.yaml", with_name("\".\"")),
        ("bad-name-dotdot.yaml", with_name("\"..\"")),
        ("ok-name-missing.yaml", one(&provider("p", "").replace("name: p\n", ""))),
        ("bad-name-duplicate.yaml", format!("{HEAD}providers:\n  - {}\n  - {}\n", indent(&provider("a", "")), indent(&provider("a", "")))),
        // apiVersion of the provider.
        ("bad-provider-apiversion-missing.yaml", one(&provider("p", "").replace("apiVersion: credentialprovider.kubelet.k8s.io/v1\n", ""))),
        ("bad-provider-apiversion-unknown.yaml", one(&provider("p", "").replace("/v1\n", "/v2\n"))),
        ("bad-provider-apiversion-group.yaml", one(&provider("p", "").replace("credentialprovider.kubelet.k8s.io/v1", "kubelet.config.k8s.io/v1"))),
        ("bad-provider-apiversion-empty.yaml", one(&provider("p", "").replace("apiVersion: credentialprovider.kubelet.k8s.io/v1", "apiVersion: \"\""))),
        // The config's own type.
        ("bad-config-apiversion-missing.yaml", one(&provider("p", "")).replace("apiVersion: kubelet.config.k8s.io/v1\n", "")),
        ("bad-config-apiversion-unknown.yaml", one(&provider("p", "")).replace("kubelet.config.k8s.io/v1\n", "kubelet.config.k8s.io/v2\n")),
        ("bad-config-group.yaml", one(&provider("p", "")).replace("kubelet.config.k8s.io/v1\n", "example.com/v1\n")),
        ("bad-config-kind.yaml", one(&provider("p", "")).replace("kind: CredentialProviderConfig", "kind: KubeletConfiguration")),
        ("bad-config-kind-missing.yaml", one(&provider("p", "")).replace("kind: CredentialProviderConfig\n", "")),
        ("bad-config-core-group.yaml", one(&provider("p", "")).replace("kubelet.config.k8s.io/v1\n", "v1\n")),
        ("bad-providers-empty.yaml", format!("{HEAD}providers: []\n")),
        ("bad-providers-missing.yaml", HEAD.to_string()),
        ("bad-empty-file.yaml", String::new()),
        ("bad-not-yaml.yaml", "providers: [\n".into()),
        ("bad-yaml-list.yaml", "- a\n- b\n".into()),
        // Unknown and duplicate fields (kubelet decodes strictly).
        ("bad-unknown-top-field.yaml", format!("{}extra: 1\n", one(&provider("p", "")))),
        ("bad-unknown-provider-field.yaml", one(&provider("p", "matchImage: [x]"))),
        ("bad-unknown-env-field.yaml", one(&provider("p", "env:\n  - name: A\n    value: b\n    secret: c"))),
        ("bad-unknown-token-field.yaml", token(&format!("{sa}\naudience: x"))),
        ("bad-duplicate-field.yaml", one(&provider("p", "defaultCacheDuration: 5m"))),
        ("bad-type-matchimages-string.yaml", one(&provider("p", "").replace("matchImages: [\"registry.example.com\"]", "matchImages: registry.example.com"))),
        ("bad-type-name-number.yaml", with_name("12")),
        ("bad-type-args-string.yaml", one(&provider("p", "args: static"))),
        // matchImages.
        ("bad-match-empty-list.yaml", one(&provider("p", "").replace("[\"registry.example.com\"]", "[]"))),
        ("bad-match-missing.yaml", one(&provider("p", "").replace("matchImages: [\"registry.example.com\"]\n", ""))),
        ("bad-match-space.yaml", matching("\"bad host.example.com\"")),
        ("bad-match-port-letters.yaml", matching("\"registry.example.com:50a\"")),
        ("bad-match-port-colon.yaml", matching("\"registry.example.com:5000:1\"")),
        ("bad-match-control.yaml", matching("\"registry.example.com/\\x01\"")),
        ("bad-match-del.yaml", matching("\"registry.example.com\\x7f\"")),
        ("bad-match-tab.yaml", matching("\"registry.example.com\\t\"")),
        ("bad-match-newline.yaml", matching("\"registry.example.com\\n/x\"")),
        ("bad-match-percent-host.yaml", matching("\"reg%zz.example.com\"")),
        ("bad-match-percent-host-valid-hex.yaml", matching("\"reg%61.example.com\"")),
        ("bad-match-percent-path.yaml", matching("\"registry.example.com/%zz\"")),
        ("bad-match-percent-truncated.yaml", matching("\"registry.example.com/a%4\"")),
        ("bad-match-bracket.yaml", matching("\"reg[a-c].io\"")),
        ("bad-match-bracket-open.yaml", matching("\"[::1\"")),
        ("bad-match-ipv6-port.yaml", matching("\"[::1]:50a\"")),
        ("bad-match-second-of-two.yaml", one(&provider("p", "").replace("[\"registry.example.com\"]", "[\"ok.example.com\", \"bad example.com\"]"))),
        // defaultCacheDuration.
        ("bad-duration-missing.yaml", one(&provider("p", "").replace("defaultCacheDuration: 10m\n", "").replace("\ndefaultCacheDuration: 10m", ""))),
        ("bad-duration-negative.yaml", with_duration("\"-1m\"")),
        ("bad-duration-days.yaml", with_duration("1d")),
        ("bad-duration-bare-number.yaml", with_duration("\"10\"")),
        ("bad-duration-number.yaml", with_duration("10")),
        ("bad-duration-empty.yaml", with_duration("\"\"")),
        ("bad-duration-space.yaml", with_duration("\"5 m\"")),
        ("bad-duration-unit-case.yaml", with_duration("5M")),
        ("bad-duration-null.yaml", with_duration("null")),
        // tokenAttributes.
        ("bad-token-audience-missing.yaml", token("cacheType: Token\nrequireServiceAccount: true")),
        ("bad-token-audience-empty.yaml", token("serviceAccountTokenAudience: \"\"\ncacheType: Token\nrequireServiceAccount: true")),
        ("bad-token-require-missing.yaml", token("serviceAccountTokenAudience: a\ncacheType: Token")),
        ("bad-token-cachetype-missing.yaml", token("serviceAccountTokenAudience: a\nrequireServiceAccount: true")),
        ("bad-token-cachetype-unknown.yaml", token("serviceAccountTokenAudience: a\ncacheType: Pod\nrequireServiceAccount: true")),
        ("bad-token-cachetype-case.yaml", token("serviceAccountTokenAudience: a\ncacheType: token\nrequireServiceAccount: true")),
        ("bad-token-required-without-sa.yaml", token("serviceAccountTokenAudience: a\ncacheType: Token\nrequireServiceAccount: false\nrequiredServiceAccountAnnotationKeys: [example.com/role]")),
        ("bad-token-key-invalid.yaml", token(&format!("{sa}\nrequiredServiceAccountAnnotationKeys: [\"-bad\"]"))),
        ("bad-token-key-slashes.yaml", token(&format!("{sa}\noptionalServiceAccountAnnotationKeys: [a/b/c]"))),
        ("bad-token-key-long.yaml", token(&format!("{sa}\noptionalServiceAccountAnnotationKeys: [example.com/{}]", "a".repeat(64)))),
        ("bad-token-key-prefix-invalid.yaml", token(&format!("{sa}\noptionalServiceAccountAnnotationKeys: [\"Exa_mple.com/x\"]"))),
        ("bad-token-key-empty.yaml", token(&format!("{sa}\noptionalServiceAccountAnnotationKeys: [\"\"]"))),
        ("bad-token-key-duplicate.yaml", token(&format!("{sa}\nrequiredServiceAccountAnnotationKeys: [example.com/a, example.com/a]"))),
        ("bad-token-key-both.yaml", token(&format!("{sa}\nrequiredServiceAccountAnnotationKeys: [example.com/a]\noptionalServiceAccountAnnotationKeys: [example.com/a]"))),
        ("bad-token-v1beta1-provider.yaml", token(sa).replace("credentialprovider.kubelet.k8s.io/v1\n", "credentialprovider.kubelet.k8s.io/v1beta1\n")),
        ("bad-token-v1alpha1-provider.yaml", token(sa).replace("credentialprovider.kubelet.k8s.io/v1\n", "credentialprovider.kubelet.k8s.io/v1alpha1\n")),
        // tokenAttributes exists only in kubelet.config.k8s.io/v1.
        ("bad-token-config-v1beta1.yaml", token(sa).replace("kubelet.config.k8s.io/v1\n", "kubelet.config.k8s.io/v1beta1\n")),
        ("bad-token-config-v1alpha1.yaml", token(sa).replace("kubelet.config.k8s.io/v1\n", "kubelet.config.k8s.io/v1alpha1\n")),
    ];
    cases.sort_by(|a, b| a.0.cmp(b.0));
    cases.into_iter().map(|(n, c)| (n.to_string(), c)).collect()
}

/// Generated config directories: (directory name, [(file, contents)]).
pub fn dir_cases() -> Vec<(String, Vec<(String, String)>)> {
    let p = |name: &str| one(&provider(name, ""));
    let v = |items: &[(&str, String)]| {
        items
            .iter()
            .map(|(n, c)| (n.to_string(), c.clone()))
            .collect::<Vec<_>>()
    };
    vec![
        ("dir-ok-two".into(), v(&[("a.yaml", p("a")), ("b.yml", p("b"))])),
        (
            "dir-ok-json-and-ignored".into(),
            v(&[("a.json", p("a")), ("b.txt", "garbage".into()), ("c.yaml.bak", p("a"))]),
        ),
        (
            "dir-dup-across-files".into(),
            v(&[("a.yaml", p("same")), ("b.json", p("same"))]),
        ),
        (
            "dir-only-ignored".into(),
            v(&[("README.md", "x".into()), ("x.conf", p("a"))]),
        ),
        (
            "dir-one-bad-file".into(),
            v(&[("a.yaml", p("a")), ("b.yaml", with_duration("1d"))]),
        ),
        (
            "dir-one-empty-file".into(),
            v(&[("a.yaml", p("a")), ("b.yaml", String::new())]),
        ),
        (
            "dir-one-invalid-name".into(),
            v(&[("a.yaml", p("a")), ("b.yaml", with_name("a/b"))]),
        ),
    ]
}

/// Writes the generated corpus under `dir`; returns the paths, sorted.
pub fn write_corpus(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for (name, text) in file_cases() {
        let path = dir.join(name);
        fs::write(&path, text)?;
        paths.push(path);
    }
    for (name, files) in dir_cases() {
        let sub = dir.join(name);
        fs::create_dir_all(&sub)?;
        for (file, text) in files {
            fs::write(sub.join(file), text)?;
        }
        paths.push(sub);
    }
    // A directory holding only a subdirectory of configs.
    let nested = dir.join("dir-nested-only");
    fs::create_dir_all(nested.join("inner.yaml"))?;
    fs::write(nested.join("inner.yaml/a.yaml"), one(&provider("a", "")))?;
    paths.push(nested);
    paths.sort();
    Ok(paths)
}
