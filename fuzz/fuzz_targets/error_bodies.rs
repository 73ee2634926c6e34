//! Cloud error bodies -> each cloud's reader of them, chosen by the first
//! byte: AWS query-protocol XML (`aws::error::xml_error`, as STS and EC2
//! refusals are read) and JSON-protocol (`aws::error::json_error`, ECR),
//! Google's (`gcp::error::ErrorDetail::parse`), Azure's
//! (`azure::error::read_detail`), OpenStack's (`openstack::error::read_detail`)
//! and an OAuth token endpoint's (`token_exchange::oauth_error_detail`). The
//! rest of the input is the body, then after a NUL the secret the call held
//! (the token or key a server may echo).
//!
//! Properties: what is shown is one line (no control character); it holds no
//! run of 12 characters of the secret (`logging::SECRET_FRAGMENT`); an AWS
//! error always has a code (the body's, else `HTTP<status>`) and names the
//! service, action and status.
#![no_main]

use cloud_access::api::CallFailure;
use cloud_access::aws::error::{AwsError, json_error, xml_error};
use cloud_access::{azure, gcp, openstack};
use credential_provider::backend::token_exchange::oauth_error_detail;
use fuzz::{assert_no_secret, token_like, two};
use libfuzzer_sys::fuzz_target;

fn one_line(shown: &str) {
    assert!(!shown.chars().any(char::is_control), "not one line: {shown:?}");
}

fn aws(error: &AwsError, service: &str, action: &str) {
    let (Some(code), Some(status)) = (error.code(), error.status()) else {
        panic!("an error body read as something else: {error:?}");
    };
    assert!(!code.is_empty(), "no code: {error:?}");
    let shown = error.to_string();
    assert!(
        shown.starts_with(&format!("{service} {action}: ")) && shown.contains(&format!("(HTTP {status})")),
        "{shown:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Some((body, secret)) = two(rest) else {
        return;
    };
    let secrets: Vec<&str> = token_like(secret).into_iter().collect();
    let shown = match which % 6 {
        0 => {
            let error = xml_error("sts", "AssumeRoleWithWebIdentity", 400, body, &secrets);
            aws(&error, "sts", "AssumeRoleWithWebIdentity");
            error.to_string()
        }
        1 => {
            let error = json_error("ecr", "GetAuthorizationToken", 400, None, body.as_bytes(), &secrets);
            aws(&error, "ecr", "GetAuthorizationToken");
            error.to_string()
        }
        2 => gcp::error::ErrorDetail::parse(body.as_bytes(), &secrets).to_string(),
        3 => azure::error::read_detail(body.as_bytes(), &secrets).to_string(),
        4 => openstack::error::read_detail(body.as_bytes(), &secrets).to_string(),
        _ => {
            let detail = oauth_error_detail(body.as_bytes(), token_like(secret).unwrap_or_default());
            assert!(detail.is_empty() || detail.starts_with(": "), "{detail:?}");
            detail
        }
    };
    one_line(&shown);
    if let Some(secret) = token_like(secret) {
        assert_no_secret(&shown, secret, "the error");
    }
});
