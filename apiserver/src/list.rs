//! One page of a list (`PersistentVolumeList`, `PodList`), read with its item count
//! bounded while parsing: items past the page's `limit` are refused as they are met,
//! before they are built.

use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use cloud_access::logging::clean_text;

use super::{ApiError, MESSAGE_LIMIT};

/// One page of a list.
#[derive(Debug)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// The token for the next page; none (or empty): the last page.
    pub continue_token: Option<String>,
}

impl<T> Default for Page<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            continue_token: None,
        }
    }
}

/// A page of the list `kind` (e.g. `PersistentVolumeList`) with at most `limit` items.
pub fn parse_page<T: DeserializeOwned>(body: &[u8], kind: &str, limit: u32) -> Result<Page<T>, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let page = PageSeed {
        kind,
        limit,
        item: PhantomData,
    }
    .deserialize(&mut deserializer)
    .and_then(|page| deserializer.end().map(|()| page))
    .map_err(|e| match e.to_string() {
        m if m.starts_with(TOO_MANY) => ApiError::TooManyItems(limit),
        m => ApiError::Decode {
            kind: kind.to_owned(),
            message: clean_text(&m, &[], MESSAGE_LIMIT),
        },
    })?;
    Ok(page)
}

/// How the items' visitor says "too many" through serde's error.
const TOO_MANY: &str = "too many items";

struct PageSeed<'k, T> {
    kind: &'k str,
    limit: u32,
    item: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for PageSeed<'_, T> {
    type Value = Page<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Page<T>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for PageSeed<'_, T> {
    type Value = Page<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a {} object", self.kind)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Page<T>, A::Error> {
        let mut page = Page::default();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "kind" => {
                    let kind: String = map.next_value()?;
                    if kind != self.kind {
                        return Err(serde::de::Error::custom(format!(
                            "its kind is {}",
                            clean_text(&kind, &[], 64)
                        )));
                    }
                }
                "metadata" => {
                    let metadata: ListMeta = map.next_value()?;
                    page.continue_token = metadata.continue_.filter(|t| !t.is_empty());
                }
                "items" => {
                    page.items = map.next_value_seed(ItemsSeed {
                        limit: self.limit,
                        item: PhantomData,
                    })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(page)
    }
}

struct ItemsSeed<T> {
    limit: u32,
    item: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for ItemsSeed<T> {
    type Value = Vec<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for ItemsSeed<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of items")
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<T>()? {
            if items.len() >= self.limit as usize {
                return Err(serde::de::Error::custom(TOO_MANY));
            }
            items.push(item);
        }
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PersistentVolume;

    use super::*;

    const PVS: &str = "PersistentVolumeList";

    fn pv(name: &str) -> serde_json::Value {
        serde_json::json!({"metadata": {"name": name}, "spec": {}})
    }

    #[test]
    fn a_page_reads_its_items_and_token() {
        let body = serde_json::json!({
            "kind": "PersistentVolumeList", "apiVersion": "v1",
            "metadata": {"continue": "next", "resourceVersion": "5"},
            "items": [pv("a"), pv("b")],
        });
        let page: Page<PersistentVolume> = parse_page(body.to_string().as_bytes(), PVS, 2).expect("a page of two");
        assert_eq!(page.items.len(), 2);
        assert_eq!(page.items[1].metadata.name.as_deref(), Some("b"));
        assert_eq!(page.continue_token.as_deref(), Some("next"));
        let last: Page<PersistentVolume> =
            parse_page(br#"{"metadata":{"continue":""},"items":null}"#, PVS, 2).expect("the last page");
        assert!(last.items.is_empty() && last.continue_token.is_none());
    }

    #[test]
    fn a_page_past_its_limit_or_not_the_list_asked_for_is_refused() {
        let parse = |body: &[u8]| parse_page::<PersistentVolume>(body, PVS, 2);
        let body = serde_json::json!({"items": [pv("a"), pv("b"), pv("c")]}).to_string();
        assert!(matches!(parse(body.as_bytes()), Err(ApiError::TooManyItems(2))));
        // Counted as met: a million tiny items stop at the third.
        let mut huge = String::from(r#"{"items":["#);
        huge.push_str(&"{},".repeat(1_000_000));
        huge.push_str("{}]}");
        assert!(matches!(parse(huge.as_bytes()), Err(ApiError::TooManyItems(2))));
        let status = br#"{"kind":"Status","message":"no"}"#;
        let error = parse(status).unwrap_err().to_string();
        assert!(error.contains("its kind is Status"), "{error}");
        assert!(error.contains("not a PersistentVolumeList"), "{error}");
        let pods = br#"{"kind":"PodList","items":[]}"#;
        assert!(parse(pods).unwrap_err().to_string().contains("its kind is PodList"));
        assert!(matches!(parse(b""), Err(ApiError::Decode { .. })));
        assert!(matches!(
            parse(br#"{"items":[]} trailing"#),
            Err(ApiError::Decode { .. })
        ));
    }
}
