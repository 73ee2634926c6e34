//! The Azure cloud config read from the fixtures in tests/data/azure (JSON
//! and YAML) as cloud-provider-azure reads it: sovereign clouds, the
//! user-assigned identity as a client ID or a resource ID, errors naming the
//! file and field, the secret never shown; and a custom cloud's endpoints
//! read from the fake's ARM `/metadata/endpoints`.

#[path = "azure_fake.rs"]
mod fake;

use std::path::Path;

use cloud_access::azure::{
    AuthMethod, AzureCloud, AzureConfig, AzureConfigError, CloudEndpoints, UserAssignedIdentity,
};
use fake::{Fake, FakeExt};
use secrecy::ExposeSecret;
use serde_json::json;

fn read(name: &str) -> AzureConfig {
    AzureConfig::read(&fake::data(name)).unwrap()
}

#[test]
fn managed_identity_configs_system_client_id_and_resource_id() {
    let system = read("managed-identity.json");
    assert_eq!(system.tenant_id, fake::TENANT);
    assert_eq!(system.subscription_id, fake::SUBSCRIPTION);
    assert_eq!(system.resource_group, fake::RESOURCE_GROUP);
    assert_eq!(system.location, "eastus");
    assert_eq!(system.cloud(), (AzureCloud::Public, true));
    assert_eq!(system.auth_method(), AuthMethod::ManagedIdentity { identity: None });
    assert_eq!(
        read("managed-identity-user.json").user_assigned_identity(),
        Some(UserAssignedIdentity::ClientId(fake::KUBELET_CLIENT.into()))
    );
    assert_eq!(
        read("managed-identity-resource-id.json").auth_method(),
        AuthMethod::ManagedIdentity {
            identity: Some(UserAssignedIdentity::ResourceId(fake::KUBELET_RESOURCE_ID.into()))
        }
    );
    // "/subscriptions/" in any case makes a resource ID, as upstream checks.
    assert_eq!(
        UserAssignedIdentity::from_config_value("/SUBSCRIPTIONS/s/resourcegroups/rg/x"),
        UserAssignedIdentity::ResourceId("/SUBSCRIPTIONS/s/resourcegroups/rg/x".into())
    );
}

#[test]
fn service_principal_and_workload_identity_configs() {
    let sp = read("service-principal.json");
    assert_eq!(sp.auth_method(), AuthMethod::ClientSecret);
    assert_eq!(sp.aad_client_id, fake::SP_CLIENT);
    assert_eq!(sp.aad_client_secret.as_ref().unwrap().expose_secret(), fake::SP_SECRET);
    let wi = read("workload-identity.json");
    assert_eq!(
        wi.auth_method(),
        AuthMethod::WorkloadIdentity {
            token_file: "/var/run/secrets/azure/tokens/azure-identity-token".into()
        }
    );
}

#[test]
fn yaml_configs_and_sovereign_clouds() {
    let china = read("azure-china.yaml");
    assert_eq!(china.cloud(), (AzureCloud::China, true));
    assert_eq!(china.location, "chinaeast2");
    assert_eq!(china.auth_method(), AuthMethod::ClientSecret);
    let endpoints = china.cloud().0.endpoints().unwrap();
    assert_eq!(endpoints.authority_host.as_str(), "https://login.chinacloudapi.cn/");
    assert_eq!(
        endpoints.resource_manager.as_str(),
        "https://management.chinacloudapi.cn/"
    );
    assert_eq!(
        endpoints.resource_manager_audience,
        "https://management.core.chinacloudapi.cn/"
    );
    assert_eq!(endpoints.acr_dns_suffix, "azurecr.cn");
    // Upstream asks for the same ACR audience in every cloud.
    assert_eq!(endpoints.acr_audience, "https://containerregistry.azure.net");
    let gov = AzureConfig::parse(Path::new("gov.yaml"), "cloud: azureusgovernmentcloud\n").unwrap();
    let endpoints = gov.cloud().0.endpoints().unwrap();
    assert_eq!(endpoints.authority_host.as_str(), "https://login.microsoftonline.us/");
    assert_eq!(
        endpoints.resource_manager.as_str(),
        "https://management.usgovcloudapi.net/"
    );
    assert_eq!(endpoints.acr_dns_suffix, "azurecr.us");
    // An unknown name is the public cloud, as upstream has it, and says so.
    let typo = AzureConfig::parse(Path::new("typo.json"), r#"{"cloud": "AzureChinaClod"}"#).unwrap();
    assert_eq!(typo.cloud(), (AzureCloud::Public, false));
}

#[test]
fn secrets_never_show_in_debug() {
    for name in ["service-principal.json", "azure-china.yaml"] {
        let shown = format!("{:?}", read(name));
        assert!(!shown.contains("Qx8Q"), "{name}: {shown}");
        assert!(shown.contains("<redacted>"), "{name}: {shown}");
        assert!(shown.contains(fake::SP_CLIENT), "{name}: {shown}");
    }
}

#[test]
fn bad_files_name_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent.json");
    let error = AzureConfig::read(&missing).unwrap_err();
    assert!(matches!(error, AzureConfigError::File(_)), "{error}");
    assert!(error.to_string().contains(&missing.display().to_string()), "{error}");

    let error = AzureConfig::read(dir.path()).unwrap_err().to_string();
    assert!(error.contains("is a directory, not a regular file"), "{error}");

    let huge = dir.path().join("huge.json");
    std::fs::write(&huge, format!("{{\"x\": \"{}\"}}", "a".repeat(2 << 20))).unwrap();
    let error = AzureConfig::read(&huge).unwrap_err().to_string();
    assert!(error.contains("larger than"), "{error}");

    let broken = dir.path().join("broken.json");
    std::fs::write(
        &broken,
        "{\"tenantId\": \"t\",\n \"aadClientSecret\": \"Qx8Q~never-shown-value\"\n",
    )
    .unwrap();
    let error = AzureConfig::read(&broken).unwrap_err().to_string();
    assert!(
        error.starts_with(&format!("Azure cloud config {}: not JSON or YAML", broken.display())),
        "{error}"
    );
    assert!(!error.contains("never-shown"), "{error}");

    let deep = dir.path().join("deep.yaml");
    std::fs::write(&deep, format!("tenantId: {}{}\n", "[".repeat(64), "]".repeat(64))).unwrap();
    let error = AzureConfig::read(&deep).unwrap_err().to_string();
    assert!(error.contains("nested more than 32 levels deep"), "{error}");

    let typed = dir.path().join("typed.json");
    std::fs::write(
        &typed,
        r#"{"useManagedIdentityExtension": "yes", "aadClientSecret": ["Qx8Q~x"]}"#,
    )
    .unwrap();
    let error = AzureConfig::read(&typed).unwrap_err().to_string();
    assert_eq!(
        error,
        format!(
            "Azure cloud config {}: useManagedIdentityExtension: is text; true or false is needed (unquoted)",
            typed.display()
        )
    );
    let secret = dir.path().join("secret.yaml");
    std::fs::write(&secret, "aadClientSecret:\n  value: Qx8Q~never-shown-value\n").unwrap();
    let error = AzureConfig::read(&secret).unwrap_err().to_string();
    assert!(
        error.ends_with("aadClientSecret: is a mapping; text is needed"),
        "{error}"
    );
    assert!(!error.contains("never-shown"), "{error}");
}

#[tokio::test]
async fn a_custom_cloud_is_read_from_arms_metadata_endpoints() {
    let fake = Fake::with(|s| {
        s["arm"]["metadata_endpoints"][0]["authentication"]["loginEndpoint"] =
            json!(format!("http://127.0.0.1:{}/", 9));
    });
    let base = AzureCloud::Public.endpoints().unwrap();
    let endpoints = CloudEndpoints::discover(
        &fake::http(),
        &fake.endpoint(""),
        "azurestackdemo",
        base.clone(),
        fake::soon(),
    )
    .await
    .unwrap();
    assert_eq!(endpoints.name, "AzureStackDemo");
    // No resourceManager in the entry: the endpoint asked stays.
    assert_eq!(endpoints.resource_manager.as_str(), fake.base());
    assert_eq!(endpoints.resource_manager_audience, "https://management.demo.example/");
    assert_eq!(endpoints.authority_host.as_str(), "http://127.0.0.1:9/");
    assert_eq!(endpoints.acr_dns_suffix, "azurecr.demo.example");
    assert_eq!(fake.requests("GET /metadata/endpoints"), 1);
    // No entry of that name: the named cloud's endpoints, as upstream.
    let other = CloudEndpoints::discover(
        &fake::http(),
        &fake.endpoint(""),
        "Elsewhere",
        base.clone(),
        fake::soon(),
    )
    .await
    .unwrap();
    assert_eq!(other, base);
}

#[tokio::test]
async fn a_custom_cloud_must_not_send_tokens_in_clear_text() {
    let fake = Fake::with(|s| {
        s["arm"]["metadata_endpoints"][0]["authentication"]["loginEndpoint"] = json!("http://login.demo.example/");
    });
    let base = AzureCloud::Public.endpoints().unwrap();
    let error = CloudEndpoints::discover(&fake::http(), &fake.endpoint(""), "", base, fake::soon())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("authentication.loginEndpoint"), "{error}");
    assert!(error.contains("use an https:// URL"), "{error}");
}
