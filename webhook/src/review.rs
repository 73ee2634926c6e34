//! AdmissionReview bytes in, AdmissionReview bytes out: the one code path shared by the
//! `review` subcommand and the HTTPS server. It reads the request, resolves the volume's
//! topology (the only step that may wait), calls the pure [`decide`], and encodes the
//! answer deterministically.

use base64::Engine as _;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use serde_json::Value;
use thiserror::Error;

use crate::decision::{DecisionConfig, decide, volume_to_resolve};
use crate::resolve::{Resolution, Resolver};

/// The AdmissionReview version we speak.
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";
/// Largest review accepted (also the HTTP body limit): as controller-runtime, up to
/// 3 MiB each for the object and the old object, plus 1 MiB for the rest.
pub const MAX_REVIEW_BYTES: usize = 7 * 1024 * 1024;

/// Input that is not an AdmissionReview we can answer.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReviewError {
    #[error("input is larger than {MAX_REVIEW_BYTES} bytes")]
    TooLarge,
    #[error("input is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("input is not an {ADMISSION_API_VERSION} AdmissionReview: {0}")]
    NotAReview(String),
    #[error("cannot encode the response: {0}")]
    Encode(#[source] serde_json::Error),
}

/// Answers AdmissionReviews.
#[derive(Debug, Clone)]
pub struct Reviewer {
    resolver: Resolver,
    config: DecisionConfig,
}

impl Reviewer {
    /// A reviewer that resolves with `resolver` and decides with `config`.
    pub fn new(resolver: Resolver, config: DecisionConfig) -> Self {
        Self { resolver, config }
    }

    /// Answers one AdmissionReview given as JSON bytes.
    pub async fn review(&self, body: &[u8]) -> Result<Vec<u8>, ReviewError> {
        let request = parse_review(body)?;
        let response = self.respond(&request).await;
        tracing::debug!(
            uid = %request.uid,
            kind = %request.kind.kind,
            name = %request.name,
            operation = ?request.operation,
            allowed = response.allowed,
            patched = response.patch.is_some(),
            "reviewed"
        );
        encode_response(response)
    }

    /// The response to a parsed request: resolve (may wait), then decide (pure).
    pub async fn respond(&self, request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        self.respond_with_resolution(request).await.0
    }

    /// [`Self::respond`], also returning what was resolved (for metrics).
    pub async fn respond_with_resolution(
        &self,
        request: &AdmissionRequest<DynamicObject>,
    ) -> (AdmissionResponse, Resolution) {
        let resolution = match volume_to_resolve(request) {
            Some(volume) => self.resolver.resolve(&volume).await,
            None => Resolution::NotNeeded,
        };
        (decide(request, &resolution, &self.config), resolution)
    }
}

/// Reads an `admission.k8s.io/v1` AdmissionReview that carries a request.
pub fn parse_review(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, ReviewError> {
    if body.len() > MAX_REVIEW_BYTES {
        return Err(ReviewError::TooLarge);
    }
    let value: Value = serde_json::from_slice(body).map_err(ReviewError::NotJson)?;
    let field = |name: &str| value.get(name).and_then(Value::as_str).unwrap_or_default();
    if field("kind") != "AdmissionReview" || field("apiVersion") != ADMISSION_API_VERSION {
        return Err(ReviewError::NotAReview(format!(
            "apiVersion {:?} and kind {:?}, want {ADMISSION_API_VERSION:?} and \"AdmissionReview\"",
            field("apiVersion"),
            field("kind")
        )));
    }
    let review: AdmissionReview<DynamicObject> =
        serde_json::from_value(value).map_err(|e| ReviewError::NotAReview(e.to_string()))?;
    review
        .try_into()
        .map_err(|_| ReviewError::NotAReview("it has no `request`".to_owned()))
}

/// Encodes the AdmissionReview that answers with `response`, with `patch` in base64 (the
/// encoding of Go `[]byte`, which kube-core leaves as an array of numbers, kube-rs#1781)
/// and every object's keys sorted, so that the same answer gives the same bytes.
pub fn encode_response(response: AdmissionResponse) -> Result<Vec<u8>, ReviewError> {
    let mut value = serde_json::to_value(response.into_review()).map_err(ReviewError::Encode)?;
    if let Some(patch) = value.pointer_mut("/response/patch") {
        let bytes: Vec<u8> = patch
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                    .collect()
            })
            .unwrap_or_default();
        *patch = Value::String(base64::engine::general_purpose::STANDARD.encode(bytes));
    }
    let mut out = serde_json::to_vec(&sorted(value)).map_err(ReviewError::Encode)?;
    out.push(b'\n');
    Ok(out)
}

/// Rebuilds objects with sorted keys (a no-op unless serde_json keeps insertion order,
/// in which case the audit annotations' HashMap order would leak into the output).
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}
