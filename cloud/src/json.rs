//! JSON documents from outside the program, read into the types that describe them.

/// `body` read as a JSON object into `T`, or `None`. serde's derived `Deserialize`
/// also reads a struct from a JSON array, field by position; an answer that is not
/// an object is not the document the caller asked for.
pub fn object_from_slice<T: serde::de::DeserializeOwned>(body: &[u8]) -> Option<T> {
    let object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    object.then(|| serde_json::from_slice(body).ok()).flatten()
}

/// The `reason` and `message` of a Kubernetes API `Status` (`kind: Status`), the
/// body of every refusal the apiserver sends; `None` for any other body.
pub fn kubernetes_status(body: &[u8]) -> Option<(String, String)> {
    #[derive(serde::Deserialize)]
    struct Status {
        #[serde(default)]
        kind: String,
        #[serde(default)]
        message: String,
        #[serde(default)]
        reason: String,
    }
    object_from_slice::<Status>(body)
        .filter(|s| s.kind == "Status")
        .map(|s| (s.reason, s.message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Pair {
        name: String,
        count: u32,
    }

    #[test]
    fn an_object_is_read_and_an_array_is_not() {
        let pair = Pair {
            name: "a".into(),
            count: 2,
        };
        assert_eq!(object_from_slice(b" \n{\"name\": \"a\", \"count\": 2}"), Some(pair));
        // serde_json alone reads this array as the struct, by position.
        assert!(serde_json::from_slice::<Pair>(br#"["a", 2]"#).is_ok());
        assert_eq!(object_from_slice::<Pair>(br#"["a", 2]"#), None);
        assert_eq!(object_from_slice::<Pair>(b"not json"), None);
        assert_eq!(object_from_slice::<Pair>(b"{\"name\": 3}"), None);
    }

    #[test]
    fn a_status_is_read_and_anything_else_is_not() {
        let status = br#"{"kind":"Status","apiVersion":"v1","reason":"Forbidden","message":"no","code":403}"#;
        assert_eq!(
            kubernetes_status(status),
            Some(("Forbidden".to_owned(), "no".to_owned()))
        );
        assert_eq!(kubernetes_status(br#"{"kind":"Pod","message":"no"}"#), None);
        assert_eq!(kubernetes_status(b"<html>"), None);
    }
}
