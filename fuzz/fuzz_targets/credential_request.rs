//! CredentialProviderRequest bytes -> `protocol::decode_request`, then what
//! each backend reads from the request before any network call: the image's
//! repository and registry (every backend), the static backend's answer from
//! tests/data/credential-provider/docker-config.json, the passthrough
//! backend's answer, ECR's registry and role ARNs, GCP's identity from the
//! annotations, ACR's registry checks.
//!
//! Properties: an answer encodes into JSON of the request's version that
//! carries every auth key; the GCP identity impersonates only an allowed service account named
//! by an annotation that was sent.
#![no_main]

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::Duration;

use cloud_access::SecureEndpoint;
use credential_provider::backend::acr::{ACR_SUFFIXES, is_acr};
use credential_provider::backend::gcp::{
    AuthFlow, DEFAULT_SERVICE_ACCOUNT_ANNOTATION, GcpSettings, Identity, check_service_account, identity,
};
use credential_provider::backend::{CredentialBackend, PassthroughBackend, StaticBackend};
use credential_provider::image;
use credential_provider::protocol::{CredentialRequest, Credentials, decode_request, encode_response};
use fuzz::block_on;
use libfuzzer_sys::fuzz_target;

static STATIC: LazyLock<StaticBackend> =
    LazyLock::new(|| StaticBackend::new(fuzz::data_dir().join("credential-provider/docker-config.json"), None));

static PASSTHROUGH: LazyLock<PassthroughBackend> =
    LazyLock::new(|| PassthroughBackend::new("fuzz".into(), Duration::from_secs(60)));

static GCP: LazyLock<GcpSettings> = LazyLock::new(|| {
    let endpoint = |url| SecureEndpoint::parse("fuzz", url).expect("a loopback endpoint");
    GcpSettings {
        flow: AuthFlow::Gcr,
        metadata_base: url::Url::parse("http://127.0.0.1:9/").expect("a URL"),
        audience: Some("identitynamespace:p.svc.id.goog:https://idp".into()),
        service_account_annotations: vec![DEFAULT_SERVICE_ACCOUNT_ANNOTATION.into(), "example.com/gsa".into()],
        allowed_service_accounts: vec!["*@p.iam.gserviceaccount.com".into()],
        require_workload_identity: false,
        sts_endpoint: endpoint("http://127.0.0.1:9/"),
        iam_credentials_endpoint: endpoint("http://127.0.0.1:9/"),
        cache_duration: None,
        expiry_margin: Duration::from_secs(60),
        timeout: Duration::from_secs(20),
    }
});

fn check_answer(request: &CredentialRequest, credentials: &Credentials) {
    let bytes = encode_response(request.api_version, credentials);
    let json: serde_json::Value = serde_json::from_slice(&bytes).expect("the response is JSON");
    assert_eq!(json["apiVersion"].as_str(), Some(request.api_version.as_str()));
    for key in credentials.auth.keys() {
        assert!(
            json["auth"].get(key).is_some(),
            "auth key {key:?} is not in the response"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(request) = decode_request(data) else {
        return;
    };
    let repository = image::repository(&request.image);
    let registry = image::registry(&repository);
    assert!(
        repository.starts_with(registry),
        "{registry:?} is not the start of {repository:?}"
    );

    if let Ok(credentials) = block_on(STATIC.credentials(&request)) {
        check_answer(&request, &credentials);
    }
    if let Ok(credentials) = block_on(PASSTHROUGH.credentials(&request)) {
        check_answer(&request, &credentials);
    }
    // ECR: the registry's name and a role ARN from any annotation.
    let _ = cloud_access::aws::ecr::parse_registry(registry);
    for value in request.service_account_annotations.values() {
        let _ = cloud_access::aws::arn::role_account(value);
    }
    // GCP: the identity the annotations ask for.
    let annotations: &BTreeMap<String, String> = &request.service_account_annotations;
    if let Ok(Identity::Impersonated { key, account }) = identity(&GCP, annotations) {
        assert_eq!(annotations.get(&key).map(|v| v.trim()), Some(account.as_str()));
        assert!(
            check_service_account(&account).is_ok(),
            "{account:?} is not a service account"
        );
        assert!(
            account.ends_with("@p.iam.gserviceaccount.com"),
            "{account:?} is not allowed"
        );
    }
    // ACR: is the registry one, and a name ACR accepts.
    if is_acr(&registry.to_ascii_lowercase(), &ACR_SUFFIXES) {
        let _ = cloud_access::azure::acr::check_registry(registry);
    }
});
