//! kubelet's exec credential-provider wire format
//! (`credentialprovider.kubelet.k8s.io/{v1alpha1,v1beta1,v1}`).
//!
//! Requests are read leniently (unknown fields are ignored) and answered in
//! the request's own version with only the fields kubelet knows, because
//! kubelet decodes the response strictly and silently drops one it cannot
//! read. Errors never quote request values: the request may hold a token.

use std::collections::BTreeMap;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use serde_json::{Map, Value};

use cloud_access::go_duration;

pub const REQUEST_KIND: &str = "CredentialProviderRequest";
pub const RESPONSE_KIND: &str = "CredentialProviderResponse";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ApiVersion {
    V1Alpha1,
    V1Beta1,
    V1,
}

impl ApiVersion {
    pub const ALL: [ApiVersion; 3] = [ApiVersion::V1Alpha1, ApiVersion::V1Beta1, ApiVersion::V1];

    pub fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V1Alpha1 => "credentialprovider.kubelet.k8s.io/v1alpha1",
            ApiVersion::V1Beta1 => "credentialprovider.kubelet.k8s.io/v1beta1",
            ApiVersion::V1 => "credentialprovider.kubelet.k8s.io/v1",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == text)
    }
}

/// What kubelet asked for.
#[derive(Debug)]
pub struct CredentialRequest {
    pub api_version: ApiVersion,
    /// The image as kubelet sent it (a repository without tag or digest).
    pub image: String,
    /// KEP-4412 service-account token, v1 only.
    pub service_account_token: Option<SecretString>,
    /// KEP-4412 service-account annotations, v1 only.
    pub service_account_annotations: BTreeMap<String, String>,
}

/// How kubelet should cache an answer (`cacheKeyType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CacheKeyType {
    Image,
    Registry,
    Global,
}

/// One registry credential (`AuthConfig`).
#[derive(Debug)]
pub struct RegistryAuth {
    pub username: String,
    pub password: SecretString,
}

/// A backend's answer, before it is put in the request's version.
#[derive(Debug)]
pub struct Credentials {
    pub cache_key_type: CacheKeyType,
    /// `None` leaves the choice to the provider's `defaultCacheDuration`.
    pub cache_duration: Option<Duration>,
    /// Keyed by registry pattern, matched by kubelet against the image.
    pub auth: BTreeMap<String, RegistryAuth>,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    #[error(
        "no CredentialProviderRequest on stdin: kubelet writes one; to test by hand, pipe a JSON request into the command"
    )]
    Empty,
    #[error("stdin is not valid JSON (line {line}, column {column}): send one CredentialProviderRequest object")]
    InvalidJson { line: usize, column: usize },
    #[error("stdin is not a JSON object: send one CredentialProviderRequest object")]
    NotAnObject,
    #[error("field {field:?} is missing or not a string: {fix}")]
    MissingField { field: &'static str, fix: &'static str },
    #[error(
        "field \"apiVersion\" is {0:?}: this plugin speaks credentialprovider.kubelet.k8s.io/v1alpha1, v1beta1 and v1; set the provider's apiVersion in the kubelet config to one of them"
    )]
    UnknownApiVersion(String),
    #[error("field \"kind\" is {0:?}: expected \"CredentialProviderRequest\"")]
    WrongKind(String),
    #[error("field {0:?} has the wrong type: {1}")]
    WrongType(&'static str, &'static str),
}

/// Parses one request. Only `apiVersion`, `kind` and `image` are required;
/// values are never echoed in errors.
pub fn decode_request(input: &[u8]) -> Result<CredentialRequest, RequestError> {
    if input.iter().all(u8::is_ascii_whitespace) {
        return Err(RequestError::Empty);
    }
    let value: Value = serde_json::from_slice(input).map_err(|e| RequestError::InvalidJson {
        line: e.line(),
        column: e.column(),
    })?;
    let Value::Object(object) = value else {
        return Err(RequestError::NotAnObject);
    };
    let api_version = required_string(&object, "apiVersion", "set it to credentialprovider.kubelet.k8s.io/v1")?;
    let api_version =
        ApiVersion::parse(api_version).ok_or_else(|| RequestError::UnknownApiVersion(api_version.to_owned()))?;
    let kind = required_string(&object, "kind", "set it to CredentialProviderRequest")?;
    if kind != REQUEST_KIND {
        return Err(RequestError::WrongKind(kind.to_owned()));
    }
    let image = required_string(
        &object,
        "image",
        "kubelet sends the image being pulled, such as registry.example.com/team/app",
    )?;
    if image.is_empty() {
        return Err(RequestError::MissingField {
            field: "image",
            fix: "kubelet sends the image being pulled, such as registry.example.com/team/app",
        });
    }

    // v1alpha1 and v1beta1 have no service-account fields: kubelet's
    // conversions drop them, and so do we.
    let (service_account_token, service_account_annotations) = if api_version == ApiVersion::V1 {
        (optional_token(&object)?, annotations(&object)?)
    } else {
        (None, BTreeMap::new())
    };
    Ok(CredentialRequest {
        api_version,
        image: image.to_owned(),
        service_account_token,
        service_account_annotations,
    })
}

fn required_string<'a>(
    object: &'a Map<String, Value>,
    field: &'static str,
    fix: &'static str,
) -> Result<&'a str, RequestError> {
    object
        .get(field)
        .and_then(Value::as_str)
        .ok_or(RequestError::MissingField { field, fix })
}

fn optional_token(object: &Map<String, Value>) -> Result<Option<SecretString>, RequestError> {
    match object.get("serviceAccountToken") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(token)) if token.is_empty() => Ok(None),
        Some(Value::String(token)) => Ok(Some(SecretString::from(token.as_str()))),
        Some(_) => Err(RequestError::WrongType("serviceAccountToken", "expected a string")),
    }
}

fn annotations(object: &Map<String, Value>) -> Result<BTreeMap<String, String>, RequestError> {
    let wrong = RequestError::WrongType("serviceAccountAnnotations", "expected an object of strings");
    match object.get("serviceAccountAnnotations") {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())).ok_or(wrong.clone()))
            .collect(),
        Some(_) => Err(wrong),
    }
}

/// The response as kubelet decodes it: field order and names as in
/// kubelet's Go types, nothing more.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse<'a> {
    kind: &'static str,
    api_version: &'static str,
    cache_key_type: CacheKeyType,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_duration: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    auth: BTreeMap<&'a str, WireAuth<'a>>,
}

#[derive(Serialize)]
struct WireAuth<'a> {
    username: &'a str,
    password: &'a str,
}

/// The response in `version`, as one line of JSON with a trailing newline.
pub fn encode_response(version: ApiVersion, credentials: &Credentials) -> Vec<u8> {
    let wire = WireResponse {
        kind: RESPONSE_KIND,
        api_version: version.as_str(),
        cache_key_type: credentials.cache_key_type,
        // Whole seconds: finer precision is noise for a cache lifetime.
        cache_duration: credentials
            .cache_duration
            .map(|d| go_duration::format(Duration::from_secs(d.as_secs()))),
        auth: credentials
            .auth
            .iter()
            .map(|(key, auth)| {
                (
                    key.as_str(),
                    WireAuth {
                        username: &auth.username,
                        password: auth.password.expose_secret(),
                    },
                )
            })
            .collect(),
    };
    // Serializing plain strings and maps cannot fail.
    let mut bytes = serde_json::to_vec(&wire).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    #[test]
    fn reads_all_three_versions_and_ignores_unknown_fields() {
        for version in ApiVersion::ALL {
            let input = format!(
                r#"{{"apiVersion":"{}","kind":"CredentialProviderRequest","image":"reg.io/app","future":1}}"#,
                version.as_str()
            );
            let request = decode_request(input.as_bytes()).unwrap();
            assert_eq!(request.api_version, version);
            assert_eq!(request.image, "reg.io/app");
        }
    }

    #[test]
    fn service_account_fields_only_in_v1() {
        let body = |v: &str| {
            format!(
                r#"{{"apiVersion":"credentialprovider.kubelet.k8s.io/{v}","kind":"CredentialProviderRequest","image":"reg.io/app","serviceAccountToken":"tok","serviceAccountAnnotations":{{"a/b":"c"}}}}"#
            )
        };
        let v1 = decode_request(body("v1").as_bytes()).unwrap();
        assert_eq!(v1.service_account_token.unwrap().expose_secret(), "tok");
        assert_eq!(v1.service_account_annotations["a/b"], "c");
        let beta = decode_request(body("v1beta1").as_bytes()).unwrap();
        assert!(beta.service_account_token.is_none());
        assert!(beta.service_account_annotations.is_empty());
    }

    #[test]
    fn errors_name_the_field_and_never_the_value() {
        let secret = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0.c2ln";
        let cases = [
            ("", RequestError::Empty),
            ("{", RequestError::InvalidJson { line: 1, column: 1 }),
            ("[]", RequestError::NotAnObject),
        ];
        for (input, want) in cases {
            assert_eq!(decode_request(input.as_bytes()).unwrap_err(), want, "{input:?}");
        }
        let wrong_type = format!(
            r#"{{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"r/a","serviceAccountAnnotations":"{secret}"}}"#
        );
        let err = decode_request(wrong_type.as_bytes()).unwrap_err().to_string();
        assert!(
            err.contains("serviceAccountAnnotations") && !err.contains(secret),
            "{err}"
        );
    }

    #[test]
    fn response_has_kubelets_fields_in_kubelets_order() {
        let mut auth = BTreeMap::new();
        auth.insert(
            "reg.io".to_owned(),
            RegistryAuth {
                username: "u".into(),
                password: SecretString::from("p"),
            },
        );
        let credentials = Credentials {
            cache_key_type: CacheKeyType::Registry,
            cache_duration: Some(Duration::from_secs(6 * 3600)),
            auth,
        };
        let out = encode_response(ApiVersion::V1, &credentials);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            concat!(
                r#"{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1","#,
                r#""cacheKeyType":"Registry","cacheDuration":"6h0m0s","auth":{"reg.io":{"username":"u","password":"p"}}}"#,
                "\n"
            )
        );
    }
}
