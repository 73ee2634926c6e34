//! The answer's bytes: the AdmissionReview that carries an [`AdmissionResponse`],
//! written in one pass.
//!
//! The `patch` goes out in base64, the encoding of Go's `[]byte` (kube-core would
//! write an array of numbers, kube-rs#1781), and every object's keys in sorted order,
//! so that the same answer gives the same bytes (the audit annotations are a
//! `HashMap`). Written straight from borrowed fields: no `serde_json::Value` tree to
//! build, sort and walk for each review (docs/benchmarks.md, "Issue 18").

use std::collections::BTreeMap;

use base64::Engine as _;
use kube::core::Status;
use kube::core::admission::AdmissionResponse;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use super::{ADMISSION_API_VERSION, ReviewError};

/// Encodes the AdmissionReview that answers with `response`, newline-terminated.
pub fn encode_response(response: AdmissionResponse) -> Result<Vec<u8>, ReviewError> {
    let review = ReviewOut {
        api_version: ADMISSION_API_VERSION,
        kind: "AdmissionReview",
        response: ResponseOut {
            allowed: response.allowed,
            audit_annotations: response
                .audit_annotations
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
            patch: response.patch.as_deref().map(Base64),
            // kube-core sets a patch only with its type, and JSON Patch is the one type.
            patch_type: response.patch.as_ref().map(|_| "JSONPatch"),
            status: SortedStatus(&response.result),
            uid: &response.uid,
            warnings: response.warnings.as_deref(),
        },
    };
    let mut out = Vec::with_capacity(256 + response.patch.as_ref().map_or(0, |p| p.len() * 4 / 3));
    serde_json::to_writer(&mut out, &review).map_err(ReviewError::Encode)?;
    out.push(b'\n');
    Ok(out)
}

/// Fields in sorted order, as every level below.
#[derive(Serialize)]
struct ReviewOut<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    kind: &'a str,
    response: ResponseOut<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseOut<'a> {
    allowed: bool,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    audit_annotations: BTreeMap<&'a str, &'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<Base64<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    status: SortedStatus<'a>,
    uid: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    warnings: Option<&'a [String]>,
}

/// Bytes as a base64 string.
struct Base64<'a>(&'a [u8]);

impl Serialize for Base64<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(self.0))
    }
}

/// A denial's status with its keys sorted; an admission's is empty (`{}`), written
/// without a detour.
struct SortedStatus<'a>(&'a Status);

impl Serialize for SortedStatus<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if *self.0 == Status::default() {
            return serializer.serialize_map(Some(0))?.end();
        }
        let value = serde_json::to_value(self.0).map_err(serde::ser::Error::custom)?;
        sorted(value).serialize(serializer)
    }
}

/// Rebuilds objects with sorted keys (a no-op unless serde_json keeps insertion order).
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use kube::core::admission::{AdmissionRequest, AdmissionResponse};
    use kube::core::{DynamicObject, Status};
    use serde_json::{Value, json};

    use super::{encode_response, sorted};

    /// The encoding this module replaced (a Value tree, the patch put in as base64,
    /// sorted, written): the oracle for the bytes.
    fn through_a_value(mut response: AdmissionResponse) -> Vec<u8> {
        use base64::Engine as _;
        let patch = response.patch.take();
        let mut value = serde_json::to_value(response.into_review()).expect("to a Value");
        if let (Some(patch), Some(Value::Object(map))) = (patch, value.get_mut("response")) {
            map.insert(
                "patch".to_owned(),
                Value::String(base64::engine::general_purpose::STANDARD.encode(patch)),
            );
        }
        let mut out = serde_json::to_vec(&sorted(value)).expect("written");
        out.push(b'\n');
        out
    }

    fn answer_to() -> AdmissionResponse {
        let review: kube::core::admission::AdmissionReview<DynamicObject> = serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "", "version": "v1", "kind": "PersistentVolume"},
                "resource": {"group": "", "version": "v1", "resource": "persistentvolumes"},
                "operation": "CREATE",
                "userInfo": {"username": "admin"},
                "name": "pv-a"
            }
        }))
        .expect("a review");
        let request: AdmissionRequest<DynamicObject> = review.try_into().expect("a request");
        AdmissionResponse::from(&request)
    }

    #[test]
    fn the_bytes_are_those_of_the_value_tree_encoding() {
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "add", "path": "/metadata/labels/topology.kubernetes.io~1zone", "value": "europe-west1-b"}
        ]))
        .expect("a patch");
        let mut annotated = answer_to().with_patch(patch).expect("patched");
        annotated.audit_annotations = HashMap::from([
            ("zeta".to_owned(), "last".to_owned()),
            ("alpha".to_owned(), "first".to_owned()),
            ("mid".to_owned(), "x\"y".to_owned()),
        ]);
        annotated.warnings = Some(vec!["one".into(), "two \u{e9}".into()]);
        let mut denied = answer_to().deny("the disk is in europe-west1-c, not europe-west1-b");
        denied.result = Status {
            code: 403,
            ..denied.result
        };
        let cases = [answer_to(), annotated, denied, answer_to().deny("")];
        for response in cases {
            let ours = encode_response(response.clone()).expect("encoded");
            assert_eq!(
                String::from_utf8(ours).expect("UTF-8"),
                String::from_utf8(through_a_value(response)).expect("UTF-8")
            );
        }
    }

    #[test]
    fn the_patch_is_base64_and_every_key_sorted() {
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/metadata/labels", "value": {}}])).expect("a patch");
        let mut response = answer_to().with_patch(patch).expect("patched");
        response.audit_annotations =
            HashMap::from([("b".to_owned(), "2".to_owned()), ("a".to_owned(), "1".to_owned())]);
        let out = encode_response(response).expect("encoded");
        assert_eq!(out.last(), Some(&b'\n'));
        let text = std::str::from_utf8(&out).expect("UTF-8");
        let value: Value = serde_json::from_str(text).expect("JSON");
        assert_eq!(value["response"]["patchType"], "JSONPatch");
        assert_eq!(
            value["response"]["patch"],
            "W3sib3AiOiJhZGQiLCJwYXRoIjoiL21ldGFkYXRhL2xhYmVscyIsInZhbHVlIjp7fX1d"
        );
        let order = [
            "\"allowed\"",
            "\"auditAnnotations\"",
            "\"a\"",
            "\"b\"",
            "\"patch\"",
            "\"patchType\"",
            "\"status\"",
            "\"uid\"",
        ];
        let at: Vec<usize> = order.iter().map(|key| text.find(key).expect(key)).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert!(
            text.starts_with("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{"),
            "{text}"
        );
    }
}
