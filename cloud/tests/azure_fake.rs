//! The fake of Azure's APIs (`test_fakes::AzureFake`: tests/fakes/azure_server.py
//! on loopback, with tests/data/azure/scenario.json edited per test) seen
//! through cloud-access's types, for the azure_* tests, which include this
//! file with `#[path]`. Nothing here ever reaches a real Azure address (nor
//! IMDS's 169.254.169.254): every client is pointed at the fake.
#![allow(dead_code, unused_imports)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cloud_access::SecureEndpoint;
use cloud_access::azure::{
    AzureCloud, AzureError, CachedTokenSource, ClientSecretCredential, CloudEndpoints, ManagedIdentityCredential,
    TokenSource, UserAssignedIdentity,
};
use secrecy::SecretString;
pub use test_fakes::AzureFake as Fake;
pub use test_fakes::azure::{azure_data as data, azure_federated_token as federated_token};
use url::Url;

/// The scenario's tenant, subscription and identities.
pub const TENANT: &str = "11111111-2222-4333-8444-555555555555";
pub const SUBSCRIPTION: &str = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";
pub const DENIED_SUBSCRIPTION: &str = "dddddddd-0000-4000-8000-00000000d0d0";
pub const RESOURCE_GROUP: &str = "MC_demo_demo_eastus";
/// The service principal and its secret.
pub const SP_CLIENT: &str = "c1c1c1c1-0000-4000-8000-000000000001";
pub const SP_SECRET: &str = "Qx8Q~fake.client-secret_value-0001";
/// The workload-identity application (federated tokens).
pub const WI_CLIENT: &str = "c2c2c2c2-0000-4000-8000-000000000002";
/// The kubelet's user-assigned identity.
pub const KUBELET_CLIENT: &str = "c3c3c3c3-0000-4000-8000-000000000003";
pub const KUBELET_RESOURCE_ID: &str = "/subscriptions/aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee/resourceGroups/MC_demo_demo_eastus/providers/Microsoft.ManagedIdentity/userAssignedIdentities/demo-agentpool";
/// ARM's audience, as the public cloud names it.
pub const ARM_AUDIENCE: &str = "https://management.core.windows.net/";

pub const IMDS_TOKEN: &str = "GET /metadata/identity/oauth2/token";
pub const ENTRA_TOKEN: &str = "POST /11111111-2222-4333-8444-555555555555/oauth2/v2.0/token";

/// The fake as cloud-access's clients find it.
pub trait FakeExt {
    /// `http://127.0.0.1:PORT/{path}` as an endpoint credentials may be sent to.
    fn endpoint(&self, path: &str) -> SecureEndpoint;
    /// The public cloud with Entra ID and ARM at the fake.
    fn cloud(&self) -> CloudEndpoints;
    /// The fake's IMDS root.
    fn imds(&self) -> Url;
    /// Managed-identity tokens for `resource` from the fake's IMDS.
    fn managed_identity(&self, identity: Option<&UserAssignedIdentity>, resource: &str) -> ManagedIdentityCredential;
    /// The service principal's tokens for `resource`.
    fn client_secret(&self, secret: &str, resource: &str) -> ClientSecretCredential;
    /// ARM tokens of the kubelet identity, cached.
    fn arm_tokens(&self) -> Arc<dyn TokenSource<AzureError>>;
}

impl FakeExt for Fake {
    fn endpoint(&self, path: &str) -> SecureEndpoint {
        SecureEndpoint::parse("test endpoint", &format!("{}{path}", self.base())).unwrap()
    }

    fn cloud(&self) -> CloudEndpoints {
        CloudEndpoints {
            authority_host: self.endpoint(""),
            resource_manager: self.endpoint(""),
            ..AzureCloud::Public.endpoints().unwrap()
        }
    }

    fn imds(&self) -> Url {
        Url::parse(&self.base()).unwrap()
    }

    fn managed_identity(&self, identity: Option<&UserAssignedIdentity>, resource: &str) -> ManagedIdentityCredential {
        let _ = rustls::crypto::ring::default_provider().install_default();
        ManagedIdentityCredential::new(&self.imds(), identity, resource, Duration::from_secs(5)).unwrap()
    }

    fn client_secret(&self, secret: &str, resource: &str) -> ClientSecretCredential {
        ClientSecretCredential::new(
            http(),
            &self.cloud().authority_host,
            TENANT,
            SP_CLIENT,
            SecretString::from(secret.to_owned()),
            resource,
        )
        .unwrap()
    }

    fn arm_tokens(&self) -> Arc<dyn TokenSource<AzureError>> {
        let kubelet = UserAssignedIdentity::ClientId(KUBELET_CLIENT.into());
        Arc::new(CachedTokenSource::new(
            self.managed_identity(Some(&kubelet), ARM_AUDIENCE),
        ))
    }
}

/// The suite's HTTP client, as the programs build it.
pub fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    cloud_access::http_client("cloud-access-tests", Duration::from_secs(10)).unwrap()
}

/// A deadline in 5 s.
pub fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}
