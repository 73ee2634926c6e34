use std::collections::BTreeMap;

use super::*;
use crate::protocol::ApiVersion;

fn settings() -> AcrSettings {
    AcrSettings {
        config_path: PathBuf::from("/etc/kubernetes/azure.json"),
        mirrors: Vec::new(),
        allowed_tenants: Vec::new(),
        allowed_clients: Vec::new(),
        cache_duration: None,
        expiry_margin: Duration::from_secs(60),
        imds: Url::parse("http://127.0.0.1:9/").unwrap(),
        authority_host: None,
        arm_endpoint: None,
        registry_endpoint: None,
        timeout: Duration::from_secs(20),
    }
}

fn config(text: &str) -> AzureConfig {
    AzureConfig::parse(std::path::Path::new("azure.json"), text).unwrap()
}

fn request(token: Option<&str>, annotations: &[(&str, &str)]) -> CredentialRequest {
    CredentialRequest {
        api_version: ApiVersion::V1,
        image: "demo.azurecr.io/app".into(),
        service_account_token: token.map(SecretString::from),
        service_account_annotations: annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
    }
}

const TENANT: &str = "11111111-2222-4333-8444-555555555555";
const CLIENT: &str = "c2c2c2c2-0000-4000-8000-000000000002";

#[test]
fn who_pulls() {
    let backend = AcrBackend::new(settings());
    let mi = config("useManagedIdentityExtension: true\nuserAssignedIdentityID: c3\n");
    let sp = config("aadClientId: c1\naadClientSecret: s3cr3t\n");
    let both = [(CLIENT_ID_ANNOTATION, CLIENT), (TENANT_ID_ANNOTATION, TENANT)];
    assert_eq!(
        backend.identity(&request(None, &[]), &mi, false).unwrap(),
        Identity::ManagedIdentity {
            user_assigned: Some("c3".into())
        }
    );
    assert_eq!(
        backend.identity(&request(None, &both), &sp, false).unwrap(),
        Identity::ServicePrincipal { client: "c1".into() }
    );
    assert_eq!(
        backend.identity(&request(Some("tok"), &both), &mi, false).unwrap(),
        Identity::WorkloadIdentity {
            tenant: TENANT.into(),
            client: CLIENT.into()
        }
    );
    // A mirrored image is pulled as the node.
    assert!(matches!(
        backend.identity(&request(Some("tok"), &both), &mi, true).unwrap(),
        Identity::ManagedIdentity { .. }
    ));
    let err = backend
        .identity(&request(Some("tok"), &both[..1]), &mi, false)
        .unwrap_err();
    assert!(
        matches!(
            err,
            AcrError::MissingAnnotation {
                key: TENANT_ID_ANNOTATION
            }
        ),
        "{err}"
    );
    let err = backend
        .identity(
            &request(Some("tok"), &[(CLIENT_ID_ANNOTATION, "../x"), both[1]]),
            &mi,
            false,
        )
        .unwrap_err();
    assert!(matches!(err, AcrError::BadAnnotation { .. }), "{err}");
    let err = backend
        .identity(&request(None, &[]), &config("aadClientId: c1\n"), false)
        .unwrap_err();
    assert!(err.to_string().contains("names no credentials"), "{err}");
}

#[test]
fn allow_lists() {
    let mut s = settings();
    s.allowed_tenants = vec![TENANT.to_uppercase()];
    s.allowed_clients = vec!["someone-else".into()];
    let backend = AcrBackend::new(s);
    let mi = config("useManagedIdentityExtension: true\n");
    let both = [(CLIENT_ID_ANNOTATION, CLIENT), (TENANT_ID_ANNOTATION, TENANT)];
    let err = backend.identity(&request(Some("t"), &both), &mi, false).unwrap_err();
    assert!(matches!(err, AcrError::ClientNotAllowed { .. }), "{err}");
    let other = [(CLIENT_ID_ANNOTATION, CLIENT), (TENANT_ID_ANNOTATION, "other")];
    let err = backend.identity(&request(Some("t"), &other), &mi, false).unwrap_err();
    assert!(matches!(err, AcrError::TenantNotAllowed { .. }), "{err}");
}

#[test]
fn cache_durations() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_000_000);
    let backend = AcrBackend::new(settings());
    let in_3h = Some(now + Duration::from_secs(3 * 3600));
    assert_eq!(
        backend.token_cache_duration(in_3h, now),
        Some(Duration::from_secs(3 * 3600 - 60))
    );
    assert_eq!(
        backend.token_cache_duration(Some(now - Duration::from_secs(5)), now),
        Some(Duration::ZERO)
    );
    assert_eq!(backend.token_cache_duration(None, now), None);
    let mut s = settings();
    s.cache_duration = Some(Duration::from_secs(3600));
    let capped = AcrBackend::new(s);
    assert_eq!(capped.token_cache_duration(in_3h, now), Some(Duration::from_secs(3600)));
}

#[test]
fn service_principal_keys() {
    let backend = AcrBackend::new(settings());
    let sp = config("aadClientId: c1\naadClientSecret: s3cr3t\n");
    let answer = backend.service_principal_answer(&sp, "c1", "azurecr.demo.example");
    let keys: Vec<&str> = answer.auth.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "*.azurecr.*",
            "*.azurecr.cn",
            "*.azurecr.demo.example",
            "*.azurecr.io",
            "*.azurecr.us"
        ]
    );
    assert_eq!(answer.auth["*.azurecr.io"].username, "c1");
    assert_eq!(answer.auth["*.azurecr.*"].username, "");
}
