//! SigV4-signed AWS API calls (JSON and query protocols) with retries of
//! throttling and transient errors, inside the caller's deadline.

use std::time::{Duration, Instant, SystemTime};

use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use secrecy::ExposeSecret;
use url::Url;

use super::credentials::AwsCredentials;
use super::endpoints::{self, EndpointOptions, Service};
use super::error::{AwsError, json_error, read_answer, transport_error, xml_error};
use crate::api::{CallError, CallErrorKind};

const MAX_ATTEMPTS: u32 = 5;
const BACKOFF_BASE: Duration = Duration::from_millis(50);
const BACKOFF_CAP: Duration = Duration::from_secs(2);

/// Signed calls in one region.
#[derive(Debug, Clone)]
pub struct AwsClient {
    http: reqwest::Client,
    region: String,
    endpoints: EndpointOptions,
}

enum Protocol<'a> {
    Json { target: &'a str },
    Query,
}

impl AwsClient {
    pub fn new(http: reqwest::Client, region: impl Into<String>, endpoints: EndpointOptions) -> Self {
        Self {
            http,
            region: region.into(),
            endpoints,
        }
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    pub fn endpoint(&self, service: Service) -> Result<Url, AwsError> {
        Ok(endpoints::endpoint(service, &self.region, &self.endpoints)?)
    }

    /// A JSON-protocol call (`X-Amz-Target: {target_prefix}.{action}`).
    pub async fn json(
        &self,
        service: Service,
        target_prefix: &str,
        action: &'static str,
        body: &serde_json::Value,
        credentials: &AwsCredentials,
        deadline: Instant,
    ) -> Result<serde_json::Value, AwsError> {
        let target = format!("{target_prefix}.{action}");
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        let answer = self
            .call(
                service,
                action,
                Protocol::Json { target: &target },
                bytes,
                credentials,
                deadline,
            )
            .await?;
        serde_json::from_slice(&answer).map_err(|e| AwsError::garbage(service.signing_name, action, e.to_string()))
    }

    /// A query-protocol call (form-encoded, XML answer), as EC2 and STS use.
    pub async fn query(
        &self,
        service: Service,
        action: &'static str,
        version: &str,
        params: &[(&str, &str)],
        credentials: &AwsCredentials,
        deadline: Instant,
    ) -> Result<String, AwsError> {
        // The serializer is not Send: it must be gone before the first await.
        let body = {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("Action", action).append_pair("Version", version);
            for (name, value) in params {
                form.append_pair(name, value);
            }
            form.finish().into_bytes()
        };
        let answer = self
            .call(service, action, Protocol::Query, body, credentials, deadline)
            .await?;
        String::from_utf8(answer).map_err(|e| AwsError::garbage(service.signing_name, action, e.to_string()))
    }

    async fn call(
        &self,
        service: Service,
        action: &'static str,
        protocol: Protocol<'_>,
        body: Vec<u8>,
        credentials: &AwsCredentials,
        deadline: Instant,
    ) -> Result<Vec<u8>, AwsError> {
        let url = self.endpoint(service)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let remaining = deadline.saturating_duration_since(Instant::now());
            let result = if remaining.is_zero() {
                Err(AwsError::call(
                    service.signing_name,
                    action,
                    crate::http::shown_url(&url),
                    CallErrorKind::Transport {
                        reason: "deadline reached".into(),
                        timeout: true,
                    },
                ))
            } else {
                self.attempt(service, action, &protocol, &url, &body, credentials, remaining)
                    .await
            };
            let error = match result {
                Ok(answer) => return Ok(answer),
                Err(error) if !error.retryable() => return Err(error),
                Err(error) => error,
            };
            // Full jitter: a random pause up to the exponential bound.
            let bound = BACKOFF_BASE.saturating_mul(1 << attempt.min(10)).min(BACKOFF_CAP);
            let pause = bound.mul_f64(fastrand::f64());
            let left = deadline.saturating_duration_since(Instant::now());
            if attempt >= MAX_ATTEMPTS || left <= pause {
                // AWS's own refusal stands as it is; a call that kept
                // failing to get through becomes the retries' failure.
                return Err(match error {
                    AwsError::Call {
                        error:
                            last @ CallError {
                                kind: CallErrorKind::Transport { .. },
                                ..
                            },
                        ..
                    } => AwsError::Deadline {
                        action,
                        attempts: attempt,
                        last,
                    },
                    other => other,
                });
            }
            tracing::debug!(service = service.signing_name, action, attempt, ?pause, %error, "retrying");
            tokio::time::sleep(pause).await;
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn attempt(
        &self,
        service: Service,
        action: &'static str,
        protocol: &Protocol<'_>,
        url: &Url,
        body: &[u8],
        credentials: &AwsCredentials,
        timeout: Duration,
    ) -> Result<Vec<u8>, AwsError> {
        let content_type = match protocol {
            Protocol::Json { .. } => "application/x-amz-json-1.1",
            Protocol::Query => "application/x-www-form-urlencoded; charset=utf-8",
        };
        let mut headers: Vec<(&str, String)> = vec![("content-type", content_type.to_owned())];
        if let Protocol::Json { target } = protocol {
            headers.push(("x-amz-target", (*target).to_owned()));
        }
        let host = match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => String::new(),
        };
        headers.push(("host", host));
        let signed = self.sign(service, url, &headers, body, credentials)?;
        let mut request = self.http.post(url.clone()).timeout(timeout).body(body.to_vec());
        for (name, value) in headers.iter().filter(|(n, _)| *n != "host") {
            request = request.header(*name, value);
        }
        for (name, value) in &signed {
            request = request.header(name.as_str(), value.as_str());
        }
        let response = request
            .send()
            .await
            .map_err(|e| transport_error(service.signing_name, action, url, e))?;
        let status = response.status().as_u16();
        let error_type = response
            .headers()
            .get("x-amzn-errortype")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let answer = read_answer(service, action, url, response).await?;
        if (200..300).contains(&status) {
            return Ok(answer);
        }
        // The signing key never travels, but a server may echo the session
        // token (or a confused one the key): neither is shown.
        let secrets: Vec<&str> = std::iter::once(credentials.secret_access_key.expose_secret())
            .chain(credentials.session_token.as_ref().map(|t| t.expose_secret()))
            .collect();
        Err(match protocol {
            Protocol::Json { .. } => json_error(
                service.signing_name,
                action,
                status,
                error_type.as_deref(),
                &answer,
                &secrets,
            ),
            Protocol::Query => xml_error(
                service.signing_name,
                action,
                status,
                &String::from_utf8_lossy(&answer),
                &secrets,
            ),
        })
    }

    /// The SigV4 headers for one request.
    fn sign(
        &self,
        service: Service,
        url: &Url,
        headers: &[(&str, String)],
        body: &[u8],
        credentials: &AwsCredentials,
    ) -> Result<Vec<(String, String)>, AwsError> {
        let signing_error = |reason: String| AwsError::Signing {
            service: service.signing_name,
            reason,
        };
        let identity: Identity = credentials.for_signing().into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(service.signing_name)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| signing_error(e.to_string()))?
            .into();
        let signable = SignableRequest::new(
            "POST",
            url.as_str(),
            headers.iter().map(|(n, v)| (*n, v.as_str())),
            SignableBody::Bytes(body),
        )
        .map_err(|e| signing_error(e.to_string()))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| signing_error(e.to_string()))?
            .into_parts();
        Ok(instructions
            .headers()
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// EC2 and ECR answers are read up to their caps, however the body
    /// is framed; more is refused without being read.
    fn test_credentials() -> AwsCredentials {
        AwsCredentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "secret".to_owned().into(),
            session_token: None,
            expires_at: None,
            source: "test",
        }
    }

    #[tokio::test]
    async fn answers_larger_than_the_cap_are_refused() {
        use crate::http::oversize;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let credentials = test_credentials();
        let deadline = Instant::now() + Duration::from_secs(30);
        let client_of = |server: &str| {
            let endpoints = EndpointOptions {
                global_override: Some(server.to_owned()),
                ..EndpointOptions::default()
            };
            AwsClient::new(reqwest::Client::new(), "us-east-1", endpoints)
        };
        for framing in oversize::FRAMINGS {
            let (server, sent) = oversize::serve(framing).await;
            let error = super::super::ec2::describe_volumes(&client_of(&server), &["vol-1"], &credentials, deadline)
                .await
                .unwrap_err();
            assert!(
                matches!(
                    &error,
                    AwsError::Call {
                        error: CallError {
                            kind: CallErrorKind::Garbage { .. },
                            ..
                        },
                        ..
                    }
                ),
                "{framing:?}: {error}"
            );
            oversize::assert_refused(&error.to_string(), &server, "4 MiB", &sent);

            let (server, sent) = oversize::serve(framing).await;
            let error = super::super::ecr::authorization_token(&client_of(&server), false, &credentials, deadline)
                .await
                .unwrap_err()
                .to_string();
            oversize::assert_refused(&error, &server, "4 MiB", &sent);
        }
    }

    #[tokio::test]
    async fn transport_errors_do_not_show_the_endpoints_credentials() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let credentials = test_credentials();
        // A closed port: the connection is refused at once.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let endpoints = EndpointOptions {
            global_override: Some(format!("http://user:endpoint-password@{closed}/?token=query-secret")),
            ..EndpointOptions::default()
        };
        let client = AwsClient::new(reqwest::Client::new(), "us-east-1", endpoints);
        let deadline = Instant::now() + Duration::from_secs(2);
        let error = super::super::ec2::describe_volumes(&client, &["vol-1"], &credentials, deadline)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains(&closed.to_string()), "{error}");
        assert!(!error.contains("endpoint-password"), "{error}");
        assert!(!error.contains("query-secret"), "{error}");
    }

    #[test]
    fn error_codes_from_both_protocols() {
        let xml = r#"<Response><Errors><Error><Code>InvalidVolume.NotFound</Code><Message>The volume 'vol-1' does not exist.</Message></Error></Errors><RequestID>x</RequestID></Response>"#;
        let error = xml_error("ec2", "DescribeVolumes", 400, xml, &[]);
        assert_eq!(error.code(), Some("InvalidVolume.NotFound"));
        assert!(error.to_string().contains("The volume 'vol-1' does not exist."));
        assert!(!error.retryable());

        let json = br#"{"__type":"com.amazonaws.ecr#ThrottlingException","message":"Rate exceeded"}"#;
        let error = json_error("ecr", "GetAuthorizationToken", 400, None, json, &[]);
        assert_eq!(error.code(), Some("ThrottlingException"));
        assert!(error.retryable());
        let error = json_error(
            "ecr",
            "GetAuthorizationToken",
            400,
            Some("AccessDeniedException:http://internal"),
            b"{}",
            &[],
        );
        assert_eq!(error.code(), Some("AccessDeniedException"));
        assert!(json_error("ecr", "X", 503, None, b"", &[]).retryable());
    }
}
