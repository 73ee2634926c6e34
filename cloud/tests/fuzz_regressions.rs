//! Inputs the fuzz targets (fuzz/, docs/testing.md "Fuzzing") found to break
//! a property, kept under tests/data/fuzz/<target>/.

use std::path::PathBuf;

use cloud_access::go_duration;

fn input(target: &str, name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/fuzz")
        .join(target)
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `.000…0001954644088s` (55 fraction digits): the fraction's scale passed
/// u128 and the parse overflowed (a panic in debug builds, a wrong duration
/// in release ones). Go keeps the scale as a float64: the fraction is too
/// small to count, the duration is 0.
#[test]
fn a_fraction_with_more_digits_than_an_integer_holds() {
    let text = input("go_duration", "fraction-past-u128.txt");
    assert_eq!(go_duration::parse(&text), Ok(0));
    // The same digits after one second: Go's answer is exactly 1s.
    let one_more = format!("1{text}");
    assert_eq!(go_duration::parse(&one_more), Ok(1_000_000_000));
}

/// `{"AccessKeyId": "", …}` (aws_answers): the credentials document of IMDS
/// and the container endpoints was read as credentials with an empty key,
/// which every AWS call would then be refused for, far from the cause. A
/// document with an empty key or secret is not credentials.
#[test]
fn a_credentials_document_with_an_empty_key_is_not_credentials() {
    use cloud_access::aws::credentials::CredentialsDocument;
    let text = input("aws_answers", "empty-access-key-id.json");
    assert!(CredentialsDocument::parse(text.as_bytes()).is_none(), "{text}");
    let empty_secret = r#"{"AccessKeyId": "AKIDEXAMPLE", "SecretAccessKey": ""}"#;
    assert!(CredentialsDocument::parse(empty_secret.as_bytes()).is_none());
    let whole = r#"{"AccessKeyId": "AKIDEXAMPLE", "SecretAccessKey": "secret", "Token": "t"}"#;
    let credentials = CredentialsDocument::parse(whole.as_bytes())
        .expect("a whole document is credentials")
        .into_credentials("test");
    assert_eq!(credentials.access_key_id, "AKIDEXAMPLE");
}

/// `{"__type": "…#"}` (error_bodies): a JSON-protocol error type whose short
/// name (after the last `#`, as Smithy's rule reads it) is empty gave an
/// error with an empty code. The code is then `HTTP<status>`, as for a body
/// without a type.
#[test]
fn an_error_type_ending_in_a_hash_has_the_status_as_its_code() {
    use cloud_access::aws::error::json_error;
    let body = input("error_bodies", "json-type-ending-in-hash.json");
    let error = json_error("ecr", "GetAuthorizationToken", 400, None, body.as_bytes(), &[]);
    assert_eq!(error.code(), Some("HTTP400"), "{error}");
    let named = json_error(
        "ecr",
        "GetAuthorizationToken",
        400,
        None,
        br#"{"__type": "a#Throttling"}"#,
        &[],
    );
    assert_eq!(named.code(), Some("Throttling"));
}

/// `["AKID…", "secret…", …]`: serde reads a struct from a JSON array too, so
/// a credentials document that is no object was read as credentials (the
/// same as token_exchange_answer found in the token-exchange backend).
#[test]
fn a_credentials_document_that_is_not_an_object_is_not_credentials() {
    use cloud_access::aws::credentials::CredentialsDocument;
    let text = input("aws_answers", "array-document.json");
    assert!(CredentialsDocument::parse(text.as_bytes()).is_none(), "{text}");
}
