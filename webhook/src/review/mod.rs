//! The wire format. AdmissionReview bytes in ([`parse_review`], `parse.rs`), bytes out
//! ([`encode_response`], `encode.rs`), and between them the one code path shared by the
//! `review` subcommand (`command.rs`) and the HTTPS server: [`Reviewer::answer`], which
//! the server's routes call with the [`Check`] of their path ([`Reviewer::review`] and
//! [`Reviewer::validate`] are it with the check named). It reads the request, asks what
//! it is about ([`subject`] or [`validate::subject`]), resolves the volume's topology
//! (the only step that may wait), calls the pure [`decide`] or [`validate::judge`], and
//! encodes the answer deterministically.

use kube::core::admission::AdmissionRequest;
use thiserror::Error;

use crate::answer::skipped;
use crate::decision::{decide, subject};
pub use crate::model::ReviewObject;
use crate::model::{Decision, DecisionConfig, LookupResult, Outcome, Subject};
use crate::resolve::Resolver;
use crate::validate;

pub mod command;
mod encode;
mod parse;

pub use self::encode::encode_response;
pub use self::parse::parse_review;

/// The AdmissionReview version we speak.
pub const ADMISSION_API_VERSION: &str = "admission.k8s.io/v1";
/// Largest review accepted (also the HTTP body limit). kube-apiserver refuses request
/// bodies over 3 MiB (`MaxRequestBodyBytes`), so the object of a CREATE, the only
/// operation the webhook is registered for, fits in 3 MiB; 1 MiB more is left for the
/// rest of the review (user info, options). docs/decisions.md has the sources.
pub const MAX_REVIEW_BYTES: usize = 4 * 1024 * 1024;

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

/// One review answered: the encoded AdmissionReview and, typed, what the server logs
/// and counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The AdmissionReview to send back.
    pub body: Vec<u8>,
    pub outcome: Outcome,
    pub allowed: bool,
    /// The lookup made, by name, and how it went.
    pub lookup: Option<(String, LookupResult)>,
}

impl Reviewer {
    /// A reviewer that resolves with `resolver` and decides with `config`.
    pub fn new(resolver: Resolver, config: DecisionConfig) -> Self {
        Self { resolver, config }
    }

    /// Answers one `/mutate` AdmissionReview given as JSON bytes: [`Reviewer::answer`]
    /// with [`Check::Mutate`].
    pub async fn review(&self, body: &[u8]) -> Result<Answer, ReviewError> {
        self.answer(body, Check::Mutate).await
    }

    /// Answers one validating AdmissionReview (`/validate`, `review --validate`):
    /// [`Reviewer::answer`] with [`Check::Validate`], judging with [`validate::judge`]:
    /// does the PV's topology agree with its disk?
    pub async fn validate(&self, body: &[u8]) -> Result<Answer, ReviewError> {
        self.answer(body, Check::Validate).await
    }

    /// Answers one AdmissionReview given as JSON bytes with the question `check` asks:
    /// read ([`parse_review`]), resolve (the only step that may wait), decide (pure),
    /// encode. The server's entry point, each route with its check.
    pub async fn answer(&self, body: &[u8], check: Check) -> Result<Answer, ReviewError> {
        self.answer_request(parse_review(body)?, check).await
    }

    /// Answers a request read with [`parse_review`], as [`Reviewer::answer`] does after
    /// the read; the request's uid, kind, name (as `object_name`) and operation are
    /// recorded on the current span (the server's `admission` span). The `review`
    /// subcommand's entry point: it reads its input first, to refuse an unreadable
    /// PersistentVolume before answering any.
    pub async fn answer_request(
        &self,
        request: AdmissionRequest<ReviewObject>,
        check: Check,
    ) -> Result<Answer, ReviewError> {
        let span = tracing::Span::current();
        span.record("uid", request.uid.as_str());
        span.record("kind", request.kind.kind.as_str());
        span.record("object_name", request.name.as_str());
        span.record("operation", tracing::field::debug(&request.operation));
        let subject = match check {
            Check::Mutate => subject(&request),
            Check::Validate => validate::subject(&request),
        };
        let decision = match subject {
            Subject::Skip { outcome, warning } => skipped(&request, outcome, warning),
            Subject::Volume(volume) => {
                let resolution = self.resolver.resolve(&volume.identity).await;
                match check {
                    Check::Mutate => decide(&request, &volume, &resolution, &self.config),
                    Check::Validate => validate::judge(&request, &volume, &resolution, &self.config),
                }
            }
        };
        let lookup = decision.lookup().map(|(name, result)| (name.to_owned(), result));
        let Decision { response, outcome, .. } = decision;
        let allowed = response.allowed;
        tracing::debug!(
            uid = %request.uid,
            kind = %request.kind.kind,
            name = %request.name,
            operation = ?request.operation,
            ?check,
            allowed,
            %outcome,
            patched = response.patch.is_some(),
            "reviewed"
        );
        Ok(Answer {
            body: encode_response(response)?,
            outcome,
            allowed,
            lookup,
        })
    }
}

/// The AdmissionReview the apiserver sends for a CREATE of `object` (a PersistentVolume,
/// as JSON), with `uid`: how `review --file` puts a PV through the server's code.
pub fn create_review(object: &serde_json::Value, uid: &str) -> Result<Vec<u8>, ReviewError> {
    let name = object.pointer("/metadata/name").and_then(serde_json::Value::as_str);
    let kind = serde_json::json!({"group": "", "version": "v1", "kind": "PersistentVolume"});
    let resource = serde_json::json!({"group": "", "version": "v1", "resource": "persistentvolumes"});
    let review = serde_json::json!({
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "name": name.unwrap_or_default(),
            "operation": "CREATE",
            "userInfo": {"username": "pv-topology-webhook-review"},
            "object": object,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    });
    serde_json::to_vec(&review).map_err(ReviewError::Encode)
}

/// Which question a review answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// `/mutate`: the labels and nodeAffinity the PV should have.
    Mutate,
    /// `/validate`: whether what the PV says agrees with its disk.
    Validate,
}

impl Check {
    /// The metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            Check::Mutate => "mutate",
            Check::Validate => "validate",
        }
    }
}
