//! What the fuzz targets share: the suite's test data, one current-thread
//! runtime, and checks of Kubernetes syntax written from apimachinery's
//! validation (`IsQualifiedName`, `IsValidLabelValue`), independent of the
//! code under test.

use std::path::PathBuf;
use std::sync::LazyLock;

/// `tests/data/` of the suite.
pub fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data")
}

/// One current-thread runtime per fuzzing process, built once.
pub static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
});

/// Runs a future to completion on [`RUNTIME`].
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    RUNTIME.block_on(future)
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, at most 63 bytes, not empty
/// (apimachinery's qualified-name part and label value).
fn name_part(text: &str) -> bool {
    let bytes = text.as_bytes();
    let inner = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes.iter().all(inner)
}

/// A DNS-1123 subdomain (lower case, at most 253 bytes).
fn dns_subdomain(text: &str) -> bool {
    text.len() <= 253
        && text.split('.').all(|label| {
            let b = label.as_bytes();
            let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            !b.is_empty() && ok(&b[0]) && ok(&b[b.len() - 1]) && b.iter().all(|c| ok(c) || *c == b'-')
        })
}

/// apimachinery's `IsQualifiedName`: a label (or annotation) key.
pub fn valid_label_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => !prefix.is_empty() && dns_subdomain(prefix) && name_part(name),
        None => name_part(key),
    }
}

/// apimachinery's `IsValidLabelValue`: empty, or a qualified-name part.
pub fn valid_label_value(value: &str) -> bool {
    value.is_empty() || name_part(value)
}

/// Splits fuzz input at the first NUL byte: two strings out of one input.
pub fn two(data: &[u8]) -> Option<(&str, &str)> {
    let text = std::str::from_utf8(data).ok()?;
    Some(text.split_once('\0').unwrap_or((text, "")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_syntax() {
        assert!(valid_label_key("topology.kubernetes.io/zone"));
        assert!(valid_label_key("zone"));
        assert!(!valid_label_key("/zone"));
        assert!(!valid_label_key("Example.com/zone"));
        assert!(!valid_label_key("a/b/c"));
        assert!(valid_label_value(""));
        assert!(valid_label_value("eu-west-1a"));
        assert!(!valid_label_value("-a"));
        assert!(!valid_label_value(&"a".repeat(64)));
    }
}

/// A metadata tree from fuzz input: NUL-separated path, body, path, body…
/// (the seed corpus is tests/data/node-ip-helper/metadata/ in that form,
/// written by fuzz/seeds.py).
pub fn metadata_tree(data: &[u8]) -> Option<std::collections::BTreeMap<String, String>> {
    let text = std::str::from_utf8(data).ok()?;
    let mut parts = text.split('\0');
    let mut tree = std::collections::BTreeMap::new();
    while let (Some(path), Some(body)) = (parts.next(), parts.next()) {
        tree.insert(path.to_owned(), body.to_owned());
    }
    Some(tree)
}

/// One metadata target: the instance `provider`'s reader makes of the tree
/// in `data`, answered from memory (`MetadataClient::from_documents`).
///
/// Properties of an instance read: each address is trimmed and not empty,
/// no (type, address) pair is listed twice, and every InternalIP or
/// ExternalIP is an IP address; a provider ID made from it (both OpenStack
/// forms) holds nothing that could leave kubelet's `--provider-id=` argument
/// and names the instance to its own CCM's parser.
pub fn metadata_target(provider: cloud_access::metadata::Provider, data: &[u8]) {
    use cloud_access::metadata::{AddressKind, MetadataClient};
    let Some(tree) = metadata_tree(data) else {
        return;
    };
    // As the programs' main does: reqwest needs a crypto provider to build a client.
    static PROVIDER: std::sync::Once = std::sync::Once::new();
    PROVIDER.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let client = MetadataClient::from_documents(provider, tree).expect("an in-memory client");
    let Ok(instance) = block_on(client.instance()) else {
        return;
    };
    for (i, address) in instance.addresses.iter().enumerate() {
        assert!(!address.address.is_empty(), "an empty address: {instance:?}");
        assert_eq!(address.address.trim(), address.address, "an untrimmed address");
        assert!(
            !instance.addresses[..i].contains(address),
            "{address:?} is listed twice: {instance:?}"
        );
        if matches!(address.kind, AddressKind::InternalIP | AddressKind::ExternalIP) {
            assert!(
                address.address.parse::<std::net::IpAddr>().is_ok(),
                "{address:?} is not an IP address"
            );
        }
    }
    use cloud_access::metadata::{CcmMatching, ProviderIdOptions, provider_id, unsafe_in_a_flag};
    for options in [
        ProviderIdOptions::default(),
        ProviderIdOptions {
            openstack_region: Some("RegionOne".into()),
        },
    ] {
        let Ok(id) = provider_id(provider, &instance, &options) else {
            continue;
        };
        assert_eq!(unsafe_in_a_flag(&id), None, "{id:?} could leave its flag");
        assert!(id.len() <= 1024, "{} bytes", id.len());
        let matching = CcmMatching {
            provider,
            instance: instance.clone(),
        };
        assert_eq!(matching.names_this_instance(&id, &options), Ok(true), "{id:?}");
    }
}

/// A secret as the cloud answer targets take one from their input: the
/// text after the first NUL, when it looks like a token (12 to 256 of
/// `[A-Za-z0-9._~+/=-]`, the characters of JWTs, base64 and OAuth tokens).
/// Shorter secrets are redacted only whole (under 6 characters not at all),
/// and a backslash or brace in one could be written by the escaping of what
/// is shown (`\n`, `\u{1b}`): those are not checked.
pub fn token_like(secret: &str) -> Option<&str> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '~' | '+' | '/' | '=' | '-');
    (cloud_access::logging::SECRET_FRAGMENT..=256)
        .contains(&secret.len())
        .then_some(secret)
        .filter(|s| s.chars().all(ok))
}

/// Asserts that `shown` (an error's message) holds no run of
/// `logging::SECRET_FRAGMENT` characters of `secret`, after every escape
/// `logging::clean_text` writes (`\n`, `\r`, `\t`, `\u{…}`) is replaced by a
/// space: the escapes are made of letters and digits a token may hold too.
pub fn assert_no_secret(shown: &str, secret: &str, what: &str) {
    let mut plain = String::with_capacity(shown.len());
    let mut rest = shown;
    while let Some(i) = rest.find('\\') {
        plain.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        rest = if let Some(x) = after.strip_prefix("u{") {
            x.split_once('}').map_or(after, |(_, r)| r)
        } else if after.starts_with(['n', 'r', 't']) {
            &after[1..]
        } else {
            after
        };
        plain.push(' ');
    }
    plain.push_str(rest);
    let width = cloud_access::logging::SECRET_FRAGMENT;
    for start in 0..=secret.len() - width {
        let window = &secret[start..start + width];
        assert!(
            !plain.contains(window),
            "{what} shows {window:?}, a piece of the secret: {shown:?}"
        );
    }
}

/// Asserts that a refusal does not depend on the token the answer holds at
/// `json[field]` (so it cannot quote it): with another token in its place,
/// an answer `parse` refuses is refused with the same problem, or read (a
/// JWT's own claims may have been what was refused).
pub fn refusal_ignores_token<T, P: PartialEq + std::fmt::Debug>(
    json: &serde_json::Value,
    field: &str,
    parse: impl Fn(&serde_json::Value) -> Result<T, P>,
) {
    if json[field].as_str().is_none_or(str::is_empty) {
        return;
    }
    let Err(problem) = parse(json) else {
        return;
    };
    let mut other = json.clone();
    other[field] = serde_json::Value::from("other-token-value");
    if let Err(again) = parse(&other) {
        assert_eq!(again, problem, "the refusal depends on the token");
    }
}
