//! Reading an AdmissionReview: [`parse_review`], and the views and deserializers it
//! reads through. Each view keeps only what the decision uses, so a review costs the
//! strings it keeps (docs/decisions.md, "Reading a review: only what the decision uses").
//!
//! The body is read in passes over the same bytes, each keeping what it needs:
//! 1. [`Header`]: `apiVersion` and `kind`, checked first; serde_json reads the whole
//!    text, so a syntax error is found here;
//! 2. [`Envelope`]: the request's fields without its objects;
//! 3. [`ObjectOnly`]: the object, as a reduced PersistentVolume ([`PvView`]) with the
//!    nodeAffinity budget;
//! 4. [`OldObjectOnly`]: an UPDATE's old object, the same way with a budget of its own
//!    (only for an UPDATE, which only `/validate` judges).
//!
//! A pass that fails is followed by one more read of the same view with
//! `serde_path_to_error` ([`located`]), for the field path its error names; a review
//! that reads pays nothing for it.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, AzureDiskVolumeSource, CSIPersistentVolumeSource, CinderPersistentVolumeSource,
    GCEPersistentDiskVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume,
    PersistentVolumeSpec, VolumeNodeAffinity, VsphereVirtualDiskVolumeSource,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::core::admission::{AdmissionRequest, Operation};
use kube::core::{GroupVersionKind, GroupVersionResource, TypeMeta};
use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{ADMISSION_API_VERSION, MAX_REVIEW_BYTES, ReviewError};
use crate::answer::PROVISIONED_BY_ANNOTATION;
use crate::model::{MAX_AFFINITY_ITEMS, ReviewObject};
use crate::topology::{BETA_REGION_LABEL, BETA_ZONE_LABEL, REGION_LABEL, ZONE_LABEL};

/// The review's `apiVersion` and `kind`, checked before anything else is read.
#[derive(Deserialize)]
struct Header {
    #[serde(rename = "apiVersion", default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
}

/// The review's request without its objects (the fields of kube's AdmissionRequest).
#[derive(Deserialize)]
struct Envelope {
    request: Option<RequestFields>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestFields {
    uid: String,
    kind: GroupVersionKind,
    resource: GroupVersionResource,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    request_kind: Option<GroupVersionKind>,
    #[serde(default)]
    request_resource: Option<GroupVersionResource>,
    #[serde(default)]
    request_sub_resource: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    operation: Operation,
    user_info: UserInfo,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    options: Option<RawExtension>,
}

/// The review again, this time for its object alone.
#[derive(Deserialize)]
struct ObjectOnly {
    request: ObjectField,
}

#[derive(Deserialize)]
struct ObjectField {
    #[serde(default, deserialize_with = "optional_object")]
    object: Option<PvView>,
}

/// The review again, for its old object alone (UPDATE).
#[derive(Deserialize)]
struct OldObjectOnly {
    request: OldObjectField,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OldObjectField {
    #[serde(default, deserialize_with = "optional_object")]
    old_object: Option<PvView>,
}

#[derive(Deserialize)]
struct PvView {
    #[serde(deserialize_with = "object")]
    metadata: MetaView,
    #[serde(default, deserialize_with = "optional_object")]
    spec: Option<SpecView>,
}

#[derive(Deserialize)]
struct MetaView {
    #[serde(default, deserialize_with = "topology_labels")]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default, deserialize_with = "trust_annotations")]
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecView {
    #[serde(default)]
    csi: Option<CsiView>,
    #[serde(default)]
    aws_elastic_block_store: Option<AWSElasticBlockStoreVolumeSource>,
    #[serde(default)]
    gce_persistent_disk: Option<GCEPersistentDiskVolumeSource>,
    #[serde(default)]
    azure_disk: Option<AzureDiskVolumeSource>,
    #[serde(default)]
    cinder: Option<CinderPersistentVolumeSource>,
    #[serde(default)]
    vsphere_volume: Option<VsphereVirtualDiskVolumeSource>,
    #[serde(default)]
    node_affinity: Option<AffinityView>,
}

/// `spec.csi` without its unbounded maps (volumeAttributes, secret references).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CsiView {
    #[serde(default)]
    driver: Option<String>,
    #[serde(default)]
    volume_handle: Option<String>,
}

#[derive(Deserialize)]
struct AffinityView {
    #[serde(default)]
    required: Option<SelectorView>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SelectorView {
    #[serde(default, deserialize_with = "budgeted")]
    node_selector_terms: Option<Vec<TermView>>,
}

/// A nodeSelectorTerm without matchFields, which the decision does not use.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TermView {
    #[serde(default, deserialize_with = "budgeted")]
    match_expressions: Option<Vec<RequirementView>>,
}

#[derive(Deserialize)]
struct RequirementView {
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    operator: Option<String>,
    #[serde(default, deserialize_with = "budgeted")]
    values: Option<Vec<String>>,
}

impl From<PvView> for PersistentVolume {
    fn from(view: PvView) -> Self {
        let spec = view.spec.map(|spec| PersistentVolumeSpec {
            csi: spec.csi.map(|csi| CSIPersistentVolumeSource {
                driver: csi.driver.unwrap_or_default(),
                volume_handle: csi.volume_handle.unwrap_or_default(),
                ..Default::default()
            }),
            aws_elastic_block_store: spec.aws_elastic_block_store,
            gce_persistent_disk: spec.gce_persistent_disk,
            azure_disk: spec.azure_disk,
            cinder: spec.cinder,
            vsphere_volume: spec.vsphere_volume,
            node_affinity: spec.node_affinity.map(|affinity| VolumeNodeAffinity {
                required: affinity.required.map(|selector| NodeSelector {
                    node_selector_terms: selector
                        .node_selector_terms
                        .unwrap_or_default()
                        .into_iter()
                        .map(|term| NodeSelectorTerm {
                            match_expressions: term.match_expressions.map(|requirements| {
                                requirements
                                    .into_iter()
                                    .map(|r| NodeSelectorRequirement {
                                        key: r.key.unwrap_or_default(),
                                        operator: r.operator.unwrap_or_default(),
                                        values: r.values,
                                    })
                                    .collect()
                            }),
                            match_fields: None,
                        })
                        .collect(),
                }),
            }),
            ..Default::default()
        });
        PersistentVolume {
            metadata: ObjectMeta {
                labels: view.metadata.labels,
                annotations: view.metadata.annotations,
                ..Default::default()
            },
            spec,
            status: None,
        }
    }
}

/// `null` as `None`; anything else is given to the visitor, which says what it takes
/// (Go decodes `null` into a map, slice or struct as its zero value).
struct OrNull<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for OrNull<V> {
    type Value = Option<V::Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.expecting(f)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self.0).map(Some)
    }
}

fn or_null<'de, D: Deserializer<'de>, V: Visitor<'de>>(d: D, visitor: V) -> Result<Option<V::Value>, D::Error> {
    d.deserialize_option(OrNull(visitor))
}

/// Reads a `T` from a JSON object only: serde's derive would also take an array, as a
/// tuple of the fields.
struct ObjectOf<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectOf<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map))
    }
}

fn optional_object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    or_null(d, ObjectOf(PhantomData))
}

fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    d.deserialize_map(ObjectOf(PhantomData))
}

/// Reads a map of strings, keeping only the entries whose keys are listed; every value
/// must still be a string.
struct KeptEntries(&'static [&'static str]);

impl<'de> Visitor<'de> for KeptEntries {
    type Value = BTreeMap<String, String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            let value: String = map.next_value()?;
            if self.0.contains(&key.as_str()) {
                kept.insert(key, value);
            }
        }
        Ok(kept)
    }
}

fn topology_labels<'de, D: Deserializer<'de>>(d: D) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    // The beta zone label is a lookup's hint (crate::source::identify_pv); the beta
    // labels are checked by the validation too.
    or_null(
        d,
        KeptEntries(&[ZONE_LABEL, REGION_LABEL, BETA_ZONE_LABEL, BETA_REGION_LABEL]),
    )
}

fn trust_annotations<'de, D: Deserializer<'de>>(d: D) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    or_null(d, KeptEntries(&[PROVISIONED_BY_ANNOTATION]))
}

thread_local! {
    /// Items of nodeAffinity (terms, requirements and values together) that may still be
    /// read in the object being read, and whether one more was there. Per thread: an
    /// object is read in one synchronous call ([`parse_review`]), which resets them.
    static AFFINITY_BUDGET: Cell<usize> = const { Cell::new(0) };
    static AFFINITY_OVER: Cell<bool> = const { Cell::new(false) };
}

/// Reads a list (`null` is none) while the nodeAffinity budget lasts, and skips the rest
/// unread: past [`MAX_AFFINITY_ITEMS`] the decision leaves nodeAffinity alone, so more
/// would only cost memory.
struct Budgeted<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for Budgeted<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let left = AFFINITY_BUDGET.get();
            if left == 0 {
                if seq.next_element::<IgnoredAny>()?.is_some() {
                    AFFINITY_OVER.set(true);
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                }
                return Ok(items);
            }
            AFFINITY_BUDGET.set(left - 1);
            match seq.next_element()? {
                Some(item) => items.push(item),
                None => {
                    AFFINITY_BUDGET.set(AFFINITY_BUDGET.get() + 1);
                    return Ok(items);
                }
            }
        }
    }
}

fn budgeted<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Vec<T>>, D::Error> {
    or_null(d, Budgeted(PhantomData))
}

/// A JSON error in the review's structure rather than its syntax.
fn structure(error: serde_json::Error, body: &[u8]) -> ReviewError {
    if error.is_data() {
        ReviewError::NotAReview(located::<Header>(body, error))
    } else {
        ReviewError::NotJson(error)
    }
}

/// Why reading a `T` from `body` failed, naming the field path (``request: missing field
/// `kind` ``), given the error of the quick read. Only then is the body read again, tracking
/// the path (an allocation per key), so that a review that reads costs nothing more.
fn located<'de, T: Deserialize<'de>>(body: &'de [u8], quick: serde_json::Error) -> String {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    match serde_path_to_error::deserialize::<_, T>(&mut deserializer) {
        Ok(_) => quick.to_string(),
        Err(error) => described(error),
    }
}

/// `path: message`; serde_json's line and column dropped where the path says where (they
/// count in a text the user may never have seen: the review `review -f` builds).
fn described(error: serde_path_to_error::Error<serde_json::Error>) -> String {
    let path = error.path().to_string();
    let inner = error.into_inner();
    let mut message = inner.to_string();
    if inner.is_data() && inner.line() != 0 {
        let position = format!(" at line {} column {}", inner.line(), inner.column());
        if let Some(kept) = message.strip_suffix(&position) {
            message = kept.to_owned();
        }
    }
    // For a missing field the path is the object that lacks it, and the message names
    // the field (``spec.csi: missing field `driver` ``); at the top, no path.
    if path == "." {
        return message;
    }
    format!("{path}: {message}")
}

/// Reads the object of `body` once `read` gave `error`, for the reason it is unreadable.
fn unreadable<'de, T: Deserialize<'de>>(body: &'de [u8], error: serde_json::Error) -> ReviewObject {
    AFFINITY_BUDGET.set(MAX_AFFINITY_ITEMS);
    AFFINITY_OVER.set(false);
    ReviewObject::unreadable(located::<T>(body, error))
}

/// Reads an `admission.k8s.io/v1` AdmissionReview that carries a request. The body is
/// read in passes that each keep only what they need: the header, the request without
/// its object, then the object as a [`ReviewObject`]. An object that cannot be read as
/// a PersistentVolume does not make the review unreadable: the decision answers it.
pub fn parse_review(body: &[u8]) -> Result<AdmissionRequest<ReviewObject>, ReviewError> {
    if body.len() > MAX_REVIEW_BYTES {
        return Err(ReviewError::TooLarge);
    }
    let header: Header = serde_json::from_slice(body).map_err(|error| structure(error, body))?;
    let (api_version, kind) = (header.api_version.unwrap_or_default(), header.kind.unwrap_or_default());
    if kind != "AdmissionReview" || api_version != ADMISSION_API_VERSION {
        return Err(ReviewError::NotAReview(format!(
            "apiVersion {api_version:?} and kind {kind:?}, want {ADMISSION_API_VERSION:?} and \"AdmissionReview\""
        )));
    }
    // The header pass read the whole text: what fails from here on is the review's
    // structure, even where serde_json calls it syntax (an enum given a number).
    let envelope: Envelope =
        serde_json::from_slice(body).map_err(|error| ReviewError::NotAReview(located::<Envelope>(body, error)))?;
    let fields = envelope
        .request
        .ok_or_else(|| ReviewError::NotAReview("it has no `request`".to_owned()))?;
    AFFINITY_BUDGET.set(MAX_AFFINITY_ITEMS);
    AFFINITY_OVER.set(false);
    let object = match serde_json::from_slice::<ObjectOnly>(body) {
        Ok(only) => only
            .request
            .object
            .map(|view| ReviewObject::readable(view.into(), AFFINITY_OVER.get())),
        Err(error) => Some(unreadable::<ObjectOnly>(body, error)),
    };
    // An UPDATE's old object, read the same way with a budget of its own: the
    // validation compares what the PV said with what it says.
    let old_object = if fields.operation == Operation::Update {
        AFFINITY_BUDGET.set(MAX_AFFINITY_ITEMS);
        AFFINITY_OVER.set(false);
        match serde_json::from_slice::<OldObjectOnly>(body) {
            Ok(only) => only
                .request
                .old_object
                .map(|view| ReviewObject::readable(view.into(), AFFINITY_OVER.get())),
            Err(error) => Some(unreadable::<OldObjectOnly>(body, error)),
        }
    } else {
        None
    };
    Ok(AdmissionRequest {
        types: TypeMeta { api_version, kind },
        uid: fields.uid,
        kind: fields.kind,
        resource: fields.resource,
        sub_resource: fields.sub_resource,
        request_kind: fields.request_kind,
        request_resource: fields.request_resource,
        request_sub_resource: fields.request_sub_resource,
        name: fields.name,
        namespace: fields.namespace,
        operation: fields.operation,
        user_info: fields.user_info,
        object,
        old_object,
        dry_run: fields.dry_run,
        options: fields.options,
    })
}
