//! The vSphere Automation REST API's tagging, as much as the lookup needs (the `/rest`
//! paths, which vCenter 6.5 and later and govmomi's `vapi/simulator` serve): which tags
//! are attached to objects, and a tag's name and category. Pure: request bodies and
//! answers; the calls are [`super::client`]'s.

use serde::Deserialize;
use serde_json::json;

use super::soap::MoRef;

/// `POST` here with basic authentication: a session ID.
pub const SESSION_PATH: &str = "rest/com/vmware/cis/session";
/// The header the session ID travels in.
pub const SESSION_HEADER: &str = "vmware-api-session-id";
/// `POST` the objects here: the tags attached to each.
pub const ATTACHED_TAGS_PATH: &str =
    "rest/com/vmware/cis/tagging/tag-association?~action=list-attached-tags-on-objects";
/// `GET` `…/id:{tag}`.
pub const TAG_PATH: &str = "rest/com/vmware/cis/tagging/tag";
/// `GET` `…/id:{category}`.
pub const CATEGORY_PATH: &str = "rest/com/vmware/cis/tagging/category";

/// The `/rest` answers wrap their value.
#[derive(Deserialize)]
struct Value<T> {
    value: T,
}

/// The body asking for the tags attached to `objects`.
pub fn attached_tags_request(objects: &[MoRef]) -> serde_json::Value {
    let ids: Vec<_> = objects.iter().map(|o| json!({"type": o.kind, "id": o.value})).collect();
    json!({ "object_ids": ids })
}

#[derive(Deserialize)]
struct ObjectId {
    #[serde(rename = "type")]
    kind: String,
    id: String,
}

#[derive(Deserialize)]
struct AttachedTags {
    object_id: ObjectId,
    /// `null` for an object without tags (the simulator's answer).
    #[serde(default)]
    tag_ids: Option<Vec<String>>,
}

/// The answer to [`attached_tags_request`]: each object and the IDs of its tags.
pub fn parse_attached_tags(body: &[u8]) -> Result<Vec<(MoRef, Vec<String>)>, String> {
    let answer: Value<Vec<AttachedTags>> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    Ok(answer
        .value
        .into_iter()
        .map(|a| {
            (
                MoRef::new(&a.object_id.kind, &a.object_id.id),
                a.tag_ids.unwrap_or_default(),
            )
        })
        .collect())
}

/// A tag: its name and the ID of its category.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Tag {
    pub name: String,
    pub category_id: String,
}

/// The answer of `GET …/tag/id:{tag}`.
pub fn parse_tag(body: &[u8]) -> Result<Tag, String> {
    let answer: Value<Tag> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    Ok(answer.value)
}

#[derive(Deserialize)]
struct Category {
    name: String,
}

/// The name in the answer of `GET …/category/id:{category}`.
pub fn parse_category_name(body: &[u8]) -> Result<String, String> {
    let answer: Value<Category> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    Ok(answer.value.name)
}

/// The session ID in the answer of `POST …/session`.
pub fn parse_session(body: &[u8]) -> Result<String, String> {
    let answer: Value<String> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    Ok(answer.value)
}

/// vSphere's own text in a REST error answer (`{"type": …, "value": {"messages":
/// [{"default_message": …}]}}`), when it has one.
pub fn error_text(body: &[u8]) -> Option<String> {
    let answer: serde_json::Value = serde_json::from_slice(body).ok()?;
    let messages: Vec<&str> = answer
        .pointer("/value/messages")
        .and_then(|m| m.as_array())
        .map(|m| m.iter().filter_map(|m| m["default_message"].as_str()).collect())
        .unwrap_or_default();
    if !messages.is_empty() {
        return Some(messages.join("; "));
    }
    answer["type"].as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attached_tags() {
        let objects = [MoRef::new("HostSystem", "host-37")];
        assert_eq!(
            attached_tags_request(&objects),
            json!({"object_ids": [{"type": "HostSystem", "id": "host-37"}]})
        );
        // Recorded from the simulator.
        let body = br#"{"value":[{"object_id":{"type":"HostSystem","id":"host-37"},"tag_ids":null},{"object_id":{"type":"ClusterComputeResource","id":"domain-c28"},"tag_ids":["urn:vmomi:InventoryServiceTag:b7d7:GLOBAL"]}]}"#;
        let tags = parse_attached_tags(body).expect("parsed");
        assert_eq!(tags[0], (MoRef::new("HostSystem", "host-37"), Vec::new()));
        assert_eq!(tags[1].1, ["urn:vmomi:InventoryServiceTag:b7d7:GLOBAL"]);
        assert!(parse_attached_tags(b"{}").is_err());
    }

    #[test]
    fn tags_categories_sessions_errors() {
        let tag = parse_tag(br#"{"value":{"id":"t","name":"zone-a","category_id":"c"}}"#).expect("parsed");
        assert_eq!((tag.name.as_str(), tag.category_id.as_str()), ("zone-a", "c"));
        let name = parse_category_name(br#"{"value":{"id":"c","name":"k8s-zone","cardinality":"SINGLE"}}"#);
        assert_eq!(name.as_deref(), Ok("k8s-zone"));
        assert_eq!(parse_session(br#"{"value":"c844"}"#).as_deref(), Ok("c844"));
        let error = br#"{"type":"com.vmware.vapi.std.errors.unauthenticated","value":{"messages":[{"default_message":"Authentication required.","id":"x"}]}}"#;
        assert_eq!(error_text(error).as_deref(), Some("Authentication required."));
        assert_eq!(
            error_text(br#"{"type":"com.vmware.vapi.std.errors.not_found"}"#).as_deref(),
            Some("com.vmware.vapi.std.errors.not_found")
        );
        assert_eq!(error_text(b""), None);
    }
}
