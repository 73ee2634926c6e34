//! STS `AssumeRoleWithWebIdentity`: a role's credentials for a web identity
//! token (a Kubernetes service-account token). The call itself is not
//! signed: the token is the proof.

use std::time::Duration;

use secrecy::SecretString;
use url::Url;

use super::credentials::{AwsCredentials, parse_timestamp};
use super::error::{self, AwsError};

const ACTION: &str = "AssumeRoleWithWebIdentity";

/// Assumes `role_arn` with `token`. Errors carry STS's own code
/// (`AccessDenied`, `InvalidIdentityToken`, `ExpiredTokenException`, …).
pub async fn assume_role_with_web_identity(
    http: &reqwest::Client,
    endpoint: &Url,
    role_arn: &str,
    session_name: &str,
    token: &str,
    duration: Option<Duration>,
) -> Result<AwsCredentials, AwsError> {
    let duration_text = duration.map(|d| d.as_secs().to_string());
    let mut form = vec![
        ("Action", ACTION),
        ("Version", "2011-06-15"),
        ("RoleArn", role_arn),
        ("RoleSessionName", session_name),
        ("WebIdentityToken", token),
    ];
    if let Some(seconds) = &duration_text {
        form.push(("DurationSeconds", seconds));
    }
    let response = http
        .post(endpoint.clone())
        .header(reqwest::header::ACCEPT, "text/xml")
        .form(&form)
        .send()
        .await
        .map_err(|e| error::transport_error("sts", ACTION, endpoint, e))?;
    let status = response.status().as_u16();
    let body = error::read_answer(super::endpoints::STS, ACTION, endpoint, response).await?;
    let body = String::from_utf8_lossy(&body);
    if !(200..300).contains(&status) {
        // STS may echo the token it refuses: whoever holds it (the request
        // or the node's AWS_WEB_IDENTITY_TOKEN_FILE), it is cut out here.
        return Err(error::xml_error("sts", ACTION, status, &body, &[token]));
    }
    parse_credentials(&body).ok_or_else(|| AwsError::garbage("sts", ACTION, "the answer has no Credentials"))
}

/// The `Credentials` element of an `AssumeRoleWithWebIdentity` answer
/// (`None` without one, or without its keys).
pub fn parse_credentials(xml: &str) -> Option<AwsCredentials> {
    let document = roxmltree::Document::parse(xml).ok()?;
    let credentials = document.descendants().find(|n| n.has_tag_name("Credentials"))?;
    let field = |name: &str| {
        credentials
            .children()
            .find(|n| n.has_tag_name(name))
            .and_then(|n| n.text())
            .map(str::to_owned)
    };
    Some(AwsCredentials {
        access_key_id: field("AccessKeyId")?,
        secret_access_key: SecretString::from(field("SecretAccessKey")?),
        session_token: field("SessionToken").map(SecretString::from),
        expires_at: field("Expiration").as_deref().and_then(parse_timestamp),
        source: "STS AssumeRoleWithWebIdentity",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;
    use std::time::UNIX_EPOCH;

    #[test]
    fn reads_the_credentials_element() {
        let xml = r#"<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIAEXAMPLE</AccessKeyId><SecretAccessKey>secret</SecretAccessKey><SessionToken>session</SessionToken><Expiration>2026-11-30T05:34:04.519829Z</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"#;
        let credentials = parse_credentials(xml).unwrap();
        assert_eq!(credentials.access_key_id, "ASIAEXAMPLE");
        assert_eq!(credentials.secret_access_key.expose_secret(), "secret");
        let expires = credentials
            .expires_at
            .unwrap()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert_eq!(expires, 1_796_016_844);
    }
}
