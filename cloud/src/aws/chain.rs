//! The standard credential chain, in the SDKs' order: environment, web
//! identity token file (IRSA), container credentials (EKS Pod Identity,
//! ECS), then the EC2 instance role through IMDSv2. What it finds is kept
//! until shortly before it expires.

use std::path::Path;
use std::time::{Duration, SystemTime};

use secrecy::SecretString;
use tokio::sync::Mutex;
use url::Url;

use super::config::AwsConfig;
use super::credentials::{AwsCredentials, CredentialsDocument, CredentialsError};
use super::endpoints;
use super::sts;
use crate::metadata::{self, MetadataClient, MetadataError, Provider};

/// IMDS answers at once or not at all (the SDKs' default).
const IMDS_TIMEOUT: Duration = Duration::from_secs(1);

/// The standard chain. One instance per process; it caches what it finds.
#[derive(Debug)]
pub struct CredentialsChain {
    http: reqwest::Client,
    region: String,
    config: AwsConfig,
    cached: Mutex<Option<AwsCredentials>>,
}

impl CredentialsChain {
    /// A chain for calls in `region` (STS's endpoint), reading its sources'
    /// variables from `config`.
    pub fn new(http: reqwest::Client, region: impl Into<String>, config: AwsConfig) -> Self {
        Self {
            http,
            region: region.into(),
            config,
            cached: Mutex::new(None),
        }
    }

    fn env(&self, name: &str) -> Option<String> {
        self.config.var(name).map(str::to_owned)
    }

    /// Cached credentials while fresh, else the first source that has some.
    pub async fn credentials(&self) -> Result<AwsCredentials, CredentialsError> {
        let mut cached = self.cached.lock().await;
        if let Some(credentials) = cached.as_ref().filter(|c| c.fresh(SystemTime::now())) {
            return Ok(credentials.clone());
        }
        let found = self.find().await?;
        tracing::debug!(source = found.source, expires_at = ?found.expires_at, "AWS credentials");
        *cached = Some(found.clone());
        Ok(found)
    }

    async fn find(&self) -> Result<AwsCredentials, CredentialsError> {
        if let Some(found) = self.environment()? {
            return Ok(found);
        }
        if let Some(found) = self.web_identity().await? {
            return Ok(found);
        }
        if let Some(found) = self.container().await? {
            return Ok(found);
        }
        let imds = match self.instance_role().await? {
            InstanceRole::Found(found) => return Ok(found),
            InstanceRole::Disabled => "IMDS disabled".to_owned(),
            InstanceRole::NoRole => "the instance has no role in IMDS".to_owned(),
            InstanceRole::Unavailable(error) => format!("no instance role from IMDS ({error})"),
        };
        let tried = [
            "no AWS_ACCESS_KEY_ID",
            "no AWS_WEB_IDENTITY_TOKEN_FILE",
            "no AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI",
            &imds,
        ];
        Err(CredentialsError::NotFound {
            tried: tried.join("; "),
        })
    }

    async fn web_identity(&self) -> Result<Option<AwsCredentials>, CredentialsError> {
        let Some(token_file) = self.env("AWS_WEB_IDENTITY_TOKEN_FILE") else {
            return Ok(None);
        };
        let source_error = |reason: String| CredentialsError::Source {
            source_name: "the web identity token file",
            reason,
        };
        let role_arn = self
            .env("AWS_ROLE_ARN")
            .ok_or_else(|| source_error("AWS_ROLE_ARN is not set next to AWS_WEB_IDENTITY_TOKEN_FILE".into()))?;
        // Checked before it is sent to STS or shown: a newline in it would
        // forge log lines, and STS would only answer with a vaguer error.
        if super::arn::role_account(&role_arn).is_none() {
            return Err(source_error(format!(
                "AWS_ROLE_ARN=\"{}\" is not an IAM role ARN: use {}",
                crate::logging::clean_text(&role_arn, &[], 200),
                super::arn::ROLE_ARN_FORM
            )));
        }
        let token = read_token_file(&token_file)
            .map_err(|e| source_error(format!("cannot read AWS_WEB_IDENTITY_TOKEN_FILE {e}")))?;
        let session = self
            .env("AWS_ROLE_SESSION_NAME")
            .unwrap_or_else(|| "cloud-node-suite".to_owned());
        let endpoint = endpoints::endpoint(endpoints::STS, &self.region, self.config.endpoints())
            .map_err(|e| source_error(e.to_string()))?;
        let credentials =
            sts::assume_role_with_web_identity(&self.http, &endpoint, &role_arn, &session, token.trim(), None)
                .await
                .map_err(|e| source_error(e.to_string()))?;
        Ok(Some(AwsCredentials {
            source: "web identity (IRSA)",
            ..credentials
        }))
    }

    async fn container(&self) -> Result<Option<AwsCredentials>, CredentialsError> {
        let source_error = |reason: String| CredentialsError::Source {
            source_name: "the container credentials endpoint",
            reason,
        };
        let url = if let Some(relative) = self.env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") {
            format!("http://169.254.170.2{relative}")
        } else if let Some(full) = self.env("AWS_CONTAINER_CREDENTIALS_FULL_URI") {
            full
        } else {
            return Ok(None);
        };
        let url = Url::parse(&url).map_err(|e| source_error(format!("{url:?}: {e}")))?;
        // Its user information or query may hold a secret: never shown.
        let shown = crate::http::shown_url(&url);
        if !container_endpoint_allowed(&url) {
            return Err(source_error(format!(
                "{shown} is neither https nor a loopback or the EKS/ECS link-local address, so it may not receive credentials"
            )));
        }
        let mut request = self.http.get(url.clone());
        let authorization = match self.env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") {
            Some(file) => Some(
                read_token_file(&file)
                    .map_err(|e| source_error(format!("cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE {e}")))?,
            ),
            None => self.env("AWS_CONTAINER_AUTHORIZATION_TOKEN"),
        };
        if let Some(token) = authorization {
            request = request.header(reqwest::header::AUTHORIZATION, token.trim());
        }
        let response = request
            .send()
            .await
            .map_err(|e| source_error(format!("{shown}: {}", e.without_url())))?;
        let status = response.status();
        if !status.is_success() {
            return Err(source_error(format!("{shown} answered HTTP {}", status.as_u16())));
        }
        let body = crate::http::read_body(response, MAX_CREDENTIALS_ANSWER)
            .await
            .map_err(|e| match e {
                crate::http::BodyError::Transport(e) => source_error(format!("{shown}: {}", e.without_url())),
                too_large => source_error(too_large.to_string()),
            })?;
        let document = CredentialsDocument::parse(&body)
            .ok_or_else(|| source_error(format!("{shown} sent something that is not credentials")))?;
        Ok(Some(
            document.into_credentials("container credentials (EKS Pod Identity/ECS)"),
        ))
    }

    /// The instance role's credentials, read through the one IMDSv2 client.
    async fn instance_role(&self) -> Result<InstanceRole, CredentialsError> {
        let source_error = |reason: String| CredentialsError::Source {
            source_name: "the EC2 instance role",
            reason,
        };
        let Some(endpoint) = self.config.imds_endpoint().map_err(|e| source_error(e.to_string()))? else {
            return Ok(InstanceRole::Disabled);
        };
        let role = async {
            let client = MetadataClient::new(Provider::Aws, endpoint, IMDS_TIMEOUT)?;
            metadata::aws::instance_role_credentials(&client).await
        };
        Ok(match role.await {
            Ok(Some(document)) => InstanceRole::Found(
                CredentialsDocument::parse(document.as_bytes())
                    .ok_or_else(|| source_error("IMDS sent something that is not credentials".into()))?
                    .into_credentials("the EC2 instance role"),
            ),
            Ok(None) => InstanceRole::NoRole,
            Err(error) => InstanceRole::Unavailable(error),
        })
    }
}

/// What IMDS said about the instance role.
enum InstanceRole {
    Found(AwsCredentials),
    Disabled,
    NoRole,
    /// Not on EC2, or IMDS unreachable: the chain says so and goes on.
    Unavailable(MetadataError),
}

impl CredentialsChain {
    fn environment(&self) -> Result<Option<AwsCredentials>, CredentialsError> {
        match (self.env("AWS_ACCESS_KEY_ID"), self.env("AWS_SECRET_ACCESS_KEY")) {
            (Some(access_key_id), Some(secret)) => Ok(Some(AwsCredentials {
                access_key_id,
                secret_access_key: SecretString::from(secret),
                session_token: self.env("AWS_SESSION_TOKEN").map(SecretString::from),
                expires_at: None,
                source: "the environment",
            })),
            (Some(_), None) => Err(CredentialsError::Source {
                source_name: "the environment",
                reason: "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not".into(),
            }),
            _ => Ok(None),
        }
    }
}

/// Far above any credentials answer (a few KB).
const MAX_CREDENTIALS_ANSWER: usize = 1 << 20;

/// Far above any real token (a service-account token is 1-2 KB).
const MAX_TOKEN_FILE: u64 = 64 << 10;

/// A token file named by the environment: a regular file of bounded size, so
/// that a FIFO or device there cannot hang the program or exhaust memory.
fn read_token_file(path: &str) -> Result<String, crate::files::FileError> {
    crate::files::read_regular_to_string(Path::new(path), MAX_TOKEN_FILE)
}

/// The SDKs' rule: https anywhere; http only to loopback or the ECS
/// (169.254.170.2) and EKS Pod Identity (169.254.170.23, fd00:ec2::23) agents.
fn container_endpoint_allowed(url: &Url) -> bool {
    if url.scheme() == "https" {
        return true;
    }
    if url.scheme() != "http" {
        return false;
    }
    if crate::endpoint::is_loopback(url) {
        return true;
    }
    matches!(
        url.host_str(),
        Some("169.254.170.2") | Some("169.254.170.23") | Some("[fd00:ec2::23]")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_endpoints_that_may_receive_credentials() {
        for ok in [
            "http://169.254.170.2/v2/credentials/x",
            "http://169.254.170.23/v1/credentials",
            "http://[fd00:ec2::23]/v1/credentials",
            "http://127.0.0.1:8080/creds",
            "https://creds.example.com/",
        ] {
            assert!(container_endpoint_allowed(&Url::parse(ok).unwrap()), "{ok}");
        }
        for bad in ["http://10.0.0.1/creds", "http://creds.example.com/", "ftp://127.0.0.1/"] {
            assert!(!container_endpoint_allowed(&Url::parse(bad).unwrap()), "{bad}");
        }
    }

    /// A role ARN from the environment is checked before anything is read
    /// or sent: a newline in it would forge log lines, and STS should
    /// never see a value that cannot be a role.
    #[tokio::test]
    async fn aws_role_arn_from_the_environment_must_be_a_role_arn() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let token = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(token.path(), "header.payload.signature").unwrap();
        // A loopback STS that counts calls and refuses them all.
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = calls.clone();
        let sts = axum::Router::new().fallback(move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async {
                (
                    axum::http::StatusCode::FORBIDDEN,
                    "<ErrorResponse><Error><Code>AccessDenied</Code></Error></ErrorResponse>",
                )
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let sts_url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, sts).await.unwrap() });
        for bad in [
            "arn:aws:iam::123456789012:role/puller\nE1130 forged log line",
            "puller",
            "arn:aws:iam::123456789012:user/alice",
        ] {
            let config = AwsConfig::from_variables([
                ("AWS_ENDPOINT_URL", sts_url.as_str()),
                ("AWS_WEB_IDENTITY_TOKEN_FILE", token.path().to_str().unwrap()),
                ("AWS_ROLE_ARN", bad),
            ]);
            let chain = CredentialsChain::new(reqwest::Client::new(), "us-east-1", config);
            let error = chain.credentials().await.unwrap_err().to_string();
            assert!(
                error.contains("AWS_ROLE_ARN") && error.contains("is not an IAM role ARN"),
                "{bad:?}: {error}"
            );
            assert!(!error.contains('\n'), "{error}");
        }
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0, "STS was called");
    }

    /// The instance role's IMDS answers are read up to 1 MiB; more is
    /// refused without being read, and the refusal is in the chain's error.
    #[tokio::test]
    async fn instance_role_answers_larger_than_the_cap_are_refused() {
        use crate::http::oversize;
        let _ = rustls::crypto::ring::default_provider().install_default();
        for framing in oversize::FRAMINGS {
            let (server, sent) = oversize::serve(framing).await;
            let config = AwsConfig::from_variables([("AWS_EC2_METADATA_SERVICE_ENDPOINT", server.as_str())]);
            let chain = CredentialsChain::new(reqwest::Client::new(), "us-east-1", config);
            let error = chain.credentials().await.unwrap_err().to_string();
            oversize::assert_refused(&error, &server, "1 MiB", &sent);
        }
    }

    /// The container credentials URL may carry a secret in its user
    /// information or query: errors show it without them.
    #[tokio::test]
    async fn container_endpoint_errors_never_show_the_urls_secrets() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        for url in [
            format!("http://agent:url-password-0123@127.0.0.1:{port}/creds?sig=url-query-secret"),
            "http://agent:url-password-0123@10.0.0.1/creds?sig=url-query-secret".to_owned(),
        ] {
            let config = AwsConfig::from_variables([
                ("AWS_CONTAINER_CREDENTIALS_FULL_URI", url.as_str()),
                ("AWS_EC2_METADATA_DISABLED", "true"),
            ]);
            let chain = CredentialsChain::new(reqwest::Client::new(), "us-east-1", config);
            let error = chain.credentials().await.unwrap_err().to_string();
            assert!(error.contains("/creds"), "{error}");
            assert!(
                !error.contains("url-password") && !error.contains("url-query-secret"),
                "{error}"
            );
        }
    }
}
