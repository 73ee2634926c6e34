//! What `/mutate` ([`crate::decision`]) and `/validate` ([`crate::validate`]) answer
//! alike: the [`Decision`] with its audit annotations written from the typed outcome
//! ([`finish`]) and its messages bounded, a refusal as 403 Forbidden ([`forbidden`]),
//! and the answers both give the same way: to a request that needs no topology
//! ([`skipped`]), to a topology no label can carry ([`invalid_topology`]), to a failed
//! lookup under `--on-lookup-error` ([`lookup_failed`]). Pure, like both; both import
//! it and it imports neither, so neither check depends on the other.

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};

use crate::model::{
    Decision, DecisionConfig, LookupFailure, LookupResult, OnLookupError, Outcome, ReviewObject, TopologySource, Volume,
};

/// Set by external provisioners on the PVs they create; with both topology labels it
/// means the labels are the provisioner's and are trusted (as the in-tree plugin did).
pub const PROVISIONED_BY_ANNOTATION: &str = "pv.kubernetes.io/provisioned-by";
/// Audit annotation key for the [`Outcome`]. The apiserver prefixes keys with the
/// webhook's name (`<webhook name>/outcome`), so the key itself carries no prefix: a
/// second `/` would make it invalid and the apiserver would drop it.
pub const OUTCOME_AUDIT_KEY: &str = "outcome";
/// Audit annotation key for where the topology came from.
pub const SOURCE_AUDIT_KEY: &str = "source";
/// Longest warning or denial message we send, `…` included: they quote values from the object
/// (labels, handles), and an answer must not grow with a hostile object.
pub const MAX_MESSAGE_CHARS: usize = 512;

/// The provisioner named by a PV's [`PROVISIONED_BY_ANNOTATION`]: set on the PVs a
/// provisioner creates, not on hand-made ones.
pub(crate) fn provisioner(pv: &PersistentVolume) -> Option<&str> {
    pv.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROVISIONED_BY_ANNOTATION))
        .map(String::as_str)
}

/// The answer to a request that needs no topology ([`crate::model::Subject::Skip`]).
pub(crate) fn skipped(request: &AdmissionRequest<ReviewObject>, outcome: Outcome, warning: Option<String>) -> Decision {
    finish(
        AdmissionResponse::from(request),
        outcome,
        None,
        None,
        warning.into_iter().collect(),
    )
}

/// The answer when `source` (a rule, a lookup) gave a topology no label or nodeAffinity
/// can carry: admitted without one, with a warning naming the volume, the source and
/// why. The same for `/mutate` and `/validate` (nothing to write, nothing to judge).
pub(crate) fn invalid_topology(
    response: AdmissionResponse,
    volume: &Volume<'_>,
    source: &TopologySource,
    reason: &str,
) -> Decision {
    let identity = &volume.identity;
    finish(
        response,
        Outcome::InvalidTopology,
        Some(source.clone()),
        None,
        vec![format!(
            "{identity}: {source} gave an unusable topology ({reason}); admitted without topology"
        )],
    )
}

/// The answer when the lookup that should have given the topology failed: refused with
/// `cause`, or admitted with it as a warning, as `--on-lookup-error` says.
pub(crate) fn lookup_failed(
    response: AdmissionResponse,
    cause: String,
    lookup: &str,
    error: &LookupFailure,
    config: &DecisionConfig,
) -> Decision {
    let source = Some(TopologySource::Lookup(lookup.to_owned()));
    let result = Some(error.result());
    match config.on_lookup_error {
        OnLookupError::Deny => finish(
            forbidden(response, format!("{cause} (--on-lookup-error=deny)")),
            Outcome::LookupFailed,
            source,
            result,
            Vec::new(),
        ),
        OnLookupError::Allow => finish(
            response,
            Outcome::LookupFailed,
            source,
            result,
            vec![format!("{cause}; admitted without topology (--on-lookup-error=allow)")],
        ),
    }
}

/// `response` refused with `message` as 403 Forbidden (kube-core's `deny` sets the
/// message alone).
pub(crate) fn forbidden(response: AdmissionResponse, message: String) -> AdmissionResponse {
    let mut denied = response.deny(message);
    denied.result.code = 403;
    denied.result.reason = "Forbidden".to_owned();
    denied
}

/// The decision, with the audit annotations written from the typed outcome and source.
pub(crate) fn finish(
    mut response: AdmissionResponse,
    outcome: Outcome,
    source: Option<TopologySource>,
    lookup_result: Option<LookupResult>,
    warnings: Vec<String>,
) -> Decision {
    response
        .audit_annotations
        .insert(OUTCOME_AUDIT_KEY.to_owned(), outcome.as_str().to_owned());
    if let Some(source) = &source {
        response
            .audit_annotations
            .insert(SOURCE_AUDIT_KEY.to_owned(), source.to_string());
    }
    if !warnings.is_empty() {
        response.warnings = Some(warnings.into_iter().map(bounded).collect());
    }
    response.result.message = bounded(std::mem::take(&mut response.result.message));
    Decision {
        response,
        outcome,
        source,
        lookup_result,
    }
}

/// `text` cut to at most [`MAX_MESSAGE_CHARS`] characters, the last of them `…`
/// where cut.
fn bounded(text: String) -> String {
    if text.chars().nth(MAX_MESSAGE_CHARS).is_none() {
        return text;
    }
    cloud_access::logging::cut(&text, MAX_MESSAGE_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_message_is_at_most_the_limit_ellipsis_included() {
        let shown = bounded("é".repeat(MAX_MESSAGE_CHARS + 100));
        assert_eq!(shown.chars().count(), MAX_MESSAGE_CHARS, "{shown}");
        assert!(shown.ends_with('…'));
        let exact = "x".repeat(MAX_MESSAGE_CHARS);
        assert_eq!(bounded(exact.clone()), exact);
    }
}
