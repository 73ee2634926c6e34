//! One TokenReview of a service-account token, for the harness's token
//! services (the registry's realm, the RFC 8693 endpoint): what
//! kube-apiserver said, bounded in time; each caller judges and words it.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};

/// kube-apiserver's answer about a token, for one audience.
pub struct Reviewed {
    pub authenticated: bool,
    /// The audiences the token is valid for, of those asked.
    pub audiences: Vec<String>,
    /// `system:serviceaccount:NS:NAME` for a service account.
    pub username: String,
    pub error: Option<String>,
}

impl Reviewed {
    /// The service account's namespace and name, if the token is one's.
    pub fn service_account(&self) -> Option<(&str, &str)> {
        self.username
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
    }

    /// Authenticated and valid for `audience`.
    pub fn valid_for(&self, audience: &str) -> bool {
        self.authenticated && self.audiences.iter().any(|a| a == audience)
    }
}

/// Reviews `token` for `audience`; the error says why no answer came.
pub async fn review(client: &kube::Client, token: &str, audience: &str, within: Duration) -> Result<Reviewed, String> {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_owned()),
            audiences: Some(vec![audience.to_owned()]),
        },
        ..TokenReview::default()
    };
    let status = tokio::time::timeout(
        within,
        Api::<TokenReview>::all(client.clone()).create(&PostParams::default(), &review),
    )
    .await
    .map_err(|_| format!("the TokenReview took over {within:?}"))?
    .map_err(|e| format!("the TokenReview failed: {e}"))?
    .status
    .unwrap_or_default();
    Ok(Reviewed {
        authenticated: status.authenticated == Some(true),
        audiences: status.audiences.unwrap_or_default(),
        username: status.user.and_then(|u| u.username).unwrap_or_default(),
        error: status.error,
    })
}
