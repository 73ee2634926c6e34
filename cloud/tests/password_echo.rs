//! Passwords and client secrets never in an error, in any form the client sent them:
//! for each client that sends one (vCenter's SOAP `Login` body and REST basic
//! authentication, Keystone's password body, Entra's client-secret form), a fake on
//! loopback that refuses the credential (401) or fails (500, as a proxy may) and quotes
//! what it was sent: the request's `Authorization` header or its body. The error, shown
//! and debugged, must hold no run of [`SECRET_FRAGMENT`] characters of the secret as it
//! is, nor of any encoding the request carried it in: base64 of `user:password` (HTTP
//! Basic, the user's part too), XML-escaped (SOAP), in a JSON string (Keystone),
//! form-encoded (Entra), or percent-encoded as a URL component.
//!
//! The fakes follow the services' documented shapes as far as the clients read them:
//! vim25 faults (HTTP 500, `faultstring`), the Automation API's
//! `{"type", "value": {"messages": [{"default_message"}]}}`, Keystone's
//! `{"error": {"code", "title", "message"}}` and Entra's OAuth
//! `{"error", "error_description"}`; each also refuses a request without the
//! credential it expects.

use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use cloud_access::logging::SECRET_FRAGMENT;
use serde_json::json;

/// Every run of 12 characters of it holds a `"`, which every encoding changes, and
/// it has the characters on which encoders differ (`~`, a space, `+`, `/`, `\`, `&`,
/// `<`): a piece of the raw secret found in an encoded form is never 12 long.
const SECRET: &str = r#"Qx8Q~w"rd 5+/k\a&b<"c~d e"f+g9"#;
const USER: &str = "administrator@vsphere.local";

/// A fake on 127.0.0.1 serving `app`; its base URL.
async fn serve(app: axum::Router) -> url::Url {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    tokio::spawn(async move { axum::serve(listener, app).await.expect("the fake serves") });
    url::Url::parse(&format!("http://127.0.0.1:{port}/")).expect("a URL")
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// The forms of [`SECRET`] a request may carry, written by the encoders themselves
/// (and the two that are not a crate's, spelled out).
fn encodings() -> Vec<(&'static str, String)> {
    vec![
        ("raw", SECRET.to_owned()),
        (
            "form-encoded",
            url::form_urlencoded::byte_serialize(SECRET.as_bytes()).collect(),
        ),
        (
            "percent-encoded",
            "Qx8Q~w%22rd%205%2B%2Fk%5Ca%26b%3C%22c~d%20e%22f%2Bg9".to_owned(),
        ),
        (
            "JSON",
            serde_json::to_string(SECRET).unwrap().trim_matches('"').to_owned(),
        ),
        (
            "XML",
            "Qx8Q~w&quot;rd 5+/k\\a&amp;b&lt;&quot;c~d e&quot;f+g9".to_owned(),
        ),
        (
            "base64 of user:password",
            base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{SECRET}")),
        ),
        ("base64", base64::engine::general_purpose::STANDARD.encode(SECRET)),
    ]
}

/// `error`, shown and debugged, says `words` and holds no run of [`SECRET_FRAGMENT`]
/// characters of any form of the secret.
fn assert_no_secret(error: &(impl std::fmt::Display + std::fmt::Debug), words: &str) {
    let shown = format!("{error}");
    let debugged = format!("{error:?}");
    assert!(shown.contains(words), "the service's text is kept: {shown}");
    assert!(shown.contains("<redacted>"), "the echo was cut out: {shown}");
    for (form, encoded) in encodings() {
        for window in encoded.as_bytes().windows(SECRET_FRAGMENT) {
            let window = std::str::from_utf8(window).expect("ASCII");
            for text in [&shown, &debugged] {
                assert!(!text.contains(window), "{window:?} of the {form} secret in: {text}");
            }
        }
    }
}

fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

mod vsphere {
    use cloud_access::api::{CallErrorKind, CallFailure};
    use cloud_access::vsphere::{Trust, VcenterClient, VsphereError};
    use secrecy::SecretString;

    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!("{}/../tests/data/vsphere/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).expect("the fixture is in the repository")
    }

    fn envelope(body: &str) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><soapenv:Envelope \
             xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" \
             xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"
        )
    }

    fn xml(status: StatusCode, body: String) -> Response {
        (status, [(header::CONTENT_TYPE, "text/xml; charset=utf-8")], body).into_response()
    }

    fn escape(text: &str) -> String {
        text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
    }

    /// How the fake quotes what it was sent.
    #[derive(Clone, Copy)]
    enum Echo {
        /// `Login` is refused (InvalidLogin), the fault quoting the request's body.
        LoginBody,
        /// `cis/session` is refused (401), its message quoting `Authorization`.
        SessionRefused,
        /// `cis/session` fails (a proxy's 500 page), quoting `Authorization`.
        SessionProxyError,
    }

    async fn start(echo: Echo) -> url::Url {
        let sdk = move |headers: HeaderMap, body: String| async move {
            if body.contains("<RetrieveServiceContent") {
                return xml(StatusCode::OK, fixture("service-content.xml"));
            }
            if body.contains("<Login") {
                if matches!(echo, Echo::LoginBody) {
                    return xml(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        envelope(&format!(
                            "<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>Cannot complete \
                             login due to an incorrect user name or password; request: {}</faultstring><detail>\
                             <InvalidLoginFault xmlns=\"urn:vim25\" xsi:type=\"InvalidLogin\"/></detail></soapenv:Fault>",
                            escape(&body)
                        )),
                    );
                }
                let mut answer = xml(
                    StatusCode::OK,
                    envelope(&format!(
                        "<LoginResponse xmlns=\"urn:vim25\"><returnval><key>s-1</key><userName>{USER}</userName>\
                         </returnval></LoginResponse>"
                    )),
                );
                let cookie = "vmware_soap_session=\"52b0c6f4-7a1e-4c2d-9e3f-0a1b2c3d4e5f\"; Path=/; HttpOnly";
                answer
                    .headers_mut()
                    .insert(header::SET_COOKIE, cookie.parse().expect("a header value"));
                return answer;
            }
            if !header_text(&headers, header::COOKIE).contains("vmware_soap_session=") {
                return xml(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    fixture("not-authenticated-fault.xml"),
                );
            }
            if body.contains("<type>Datastore</type>") {
                xml(StatusCode::OK, fixture("datastores.xml"))
            } else {
                xml(StatusCode::OK, fixture("ancestors.xml"))
            }
        };
        let session = move |headers: HeaderMap| async move {
            let authorization = header_text(&headers, header::AUTHORIZATION);
            let unauthenticated = |message: String| {
                (
                    StatusCode::UNAUTHORIZED,
                    axum::Json(json!({"type": "com.vmware.vapi.std.errors.unauthenticated",
                        "value": {"messages": [{"id": "vapi.security.authentication.invalid",
                            "default_message": message}]}})),
                )
                    .into_response()
            };
            if !authorization.starts_with("Basic ") {
                return unauthenticated("Authentication required.".to_owned());
            }
            match echo {
                Echo::SessionRefused => {
                    unauthenticated(format!("Unable to authenticate user; Authorization: {authorization}"))
                }
                Echo::SessionProxyError | Echo::LoginBody => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("502 upstream refused POST /rest/com/vmware/cis/session (Authorization: {authorization})"),
                )
                    .into_response(),
            }
        };
        serve(
            axum::Router::new()
                .route("/sdk", post(sdk))
                .route("/rest/com/vmware/cis/session", post(session)),
        )
        .await
    }

    fn client(base: url::Url) -> VcenterClient {
        install_crypto();
        VcenterClient::new(
            base,
            USER.to_owned(),
            SecretString::from(SECRET),
            &Trust::System,
            Duration::from_secs(10),
        )
        .expect("a client")
    }

    /// The tagging REST session the host labels need, as the fake answers it.
    async fn session_error(echo: Echo) -> VsphereError {
        let vcenter = client(start(echo).await);
        let datastore = vcenter.datastore("zonal-ds").await.expect("the datastore");
        vcenter
            .host_labels(&datastore, "k8s-zone", "k8s-region")
            .await
            .expect_err("the session is refused")
    }

    #[tokio::test]
    async fn a_refused_login_quoting_the_soap_body_shows_no_password() {
        let vcenter = client(start(Echo::LoginBody).await);
        let error = vcenter.datastore("zonal-ds").await.expect_err("the login fails");
        assert!(matches!(error, VsphereError::LoginRefused { .. }), "{error:?}");
        assert_no_secret(&error, "incorrect user name or password");
    }

    #[tokio::test]
    async fn a_401_quoting_the_basic_authorization_shows_no_password() {
        let error = session_error(Echo::SessionRefused).await;
        assert!(matches!(error, VsphereError::LoginRefused { .. }), "{error:?}");
        assert_no_secret(&error, "Unable to authenticate user; Authorization: Basic <redacted>");
    }

    #[tokio::test]
    async fn a_proxys_500_quoting_the_basic_authorization_shows_no_password() {
        let error = session_error(Echo::SessionProxyError).await;
        assert!(
            matches!(error.call_kind(), Some(CallErrorKind::Api { status: 500, .. })),
            "{error:?}"
        );
        assert_no_secret(&error, "(Authorization: Basic <redacted>)");
    }
}

mod keystone {
    use cloud_access::api::CallFailure;
    use cloud_access::openstack::{OpenStackConfig, OpenStackError, volumes_client};

    use super::*;

    /// Keystone's `POST /v3/auth/tokens`: a password body is required; the password
    /// is refused, quoting the body (401 in Keystone's shape), or a proxy fails
    /// quoting it (500, plain text).
    async fn start(refuse: bool) -> url::Url {
        let tokens = move |body: Bytes| async move {
            let text = String::from_utf8_lossy(&body).into_owned();
            let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            if request.pointer("/auth/identity/password/user/password").is_none() {
                return (StatusCode::BAD_REQUEST, "a password body is expected").into_response();
            }
            if refuse {
                (
                    StatusCode::UNAUTHORIZED,
                    axum::Json(json!({"error": {"code": 401, "title": "Unauthorized",
                        "message": format!("The request you have made requires authentication: {text}")}})),
                )
                    .into_response()
            } else {
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("proxy error for body {text}"),
                )
                    .into_response()
            }
        };
        serve(axum::Router::new().route("/identity/v3/auth/tokens", post(tokens))).await
    }

    async fn error(refuse: bool) -> OpenStackError {
        install_crypto();
        let base = start(refuse).await;
        // cloud.conf quotes the password, with gcfg's `\"` and `\\` escapes.
        let quoted = SECRET.replace('\\', "\\\\").replace('"', "\\\"");
        let text = format!(
            "[Global]\nauth-url = {base}identity/v3\nregion = RegionOne\nuser-id = u-0a1b2c3d\n\
             password = \"{quoted}\"\ntenant-id = 0123456789abcdef0123456789abcdef\n"
        );
        let config =
            OpenStackConfig::parse_cloud_conf(std::path::Path::new("cloud.conf"), &text, false).expect("the config");
        let volumes = volumes_client(&config, "password-echo-test", Duration::from_secs(10)).expect("a client");
        volumes
            .volume(
                "5a1c9e0e-1f6e-4d55-9a3e-3b0f4e0c7d11",
                Instant::now() + Duration::from_secs(10),
            )
            .await
            .expect_err("Keystone refuses")
    }

    #[tokio::test]
    async fn a_401_quoting_the_password_body_shows_no_password() {
        let error = error(true).await;
        assert_eq!(error.status(), Some(401), "{error:?}");
        assert_no_secret(&error, "requires authentication");
    }

    #[tokio::test]
    async fn a_proxys_500_quoting_the_password_body_shows_no_password() {
        let error = error(false).await;
        assert_eq!(error.status(), Some(500), "{error:?}");
        assert_no_secret(&error, "proxy error for body");
    }
}

mod entra {
    use cloud_access::api::CallFailure;
    use cloud_access::azure::{AzureError, ClientSecretCredential};
    use cloud_access::endpoint::SecureEndpoint;
    use secrecy::SecretString;

    use super::*;

    /// Entra's token endpoint: a form with `client_secret` is required; the secret
    /// is refused quoting the form (401 `invalid_client`), or a proxy fails quoting
    /// it (500).
    async fn start(refuse: bool) -> url::Url {
        let token = move |headers: HeaderMap, body: String| async move {
            let form = header_text(&headers, header::CONTENT_TYPE) == "application/x-www-form-urlencoded";
            if !form || !url::form_urlencoded::parse(body.as_bytes()).any(|(k, _)| k == "client_secret") {
                return (StatusCode::BAD_REQUEST, "a client_secret form is expected").into_response();
            }
            if refuse {
                (
                    StatusCode::UNAUTHORIZED,
                    axum::Json(json!({"error": "invalid_client",
                        "error_description": format!("AADSTS7000215: Invalid client secret provided in {body}")})),
                )
                    .into_response()
            } else {
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("gateway error, request body {body}"),
                )
                    .into_response()
            }
        };
        serve(axum::Router::new().route("/tenant-1/oauth2/v2.0/token", post(token))).await
    }

    async fn error(refuse: bool) -> AzureError {
        install_crypto();
        let base = start(refuse).await;
        let authority = SecureEndpoint::parse("authority", base.as_str()).expect("loopback");
        let http = reqwest::Client::builder().build().expect("a client");
        let credential = ClientSecretCredential::new(
            http,
            &authority,
            "tenant-1",
            "client-1",
            SecretString::from(SECRET),
            "https://management.core.windows.net/",
        )
        .expect("a credential");
        credential.fetch().await.expect_err("Entra refuses")
    }

    #[tokio::test]
    async fn a_401_quoting_the_secret_form_shows_no_secret() {
        let error = error(true).await;
        assert_eq!(error.status(), Some(401), "{error:?}");
        assert_no_secret(&error, "AADSTS7000215: Invalid client secret provided in");
    }

    #[tokio::test]
    async fn a_proxys_500_quoting_the_secret_form_shows_no_secret() {
        let error = error(false).await;
        assert_eq!(error.status(), Some(500), "{error:?}");
        assert_no_secret(&error, "gateway error, request body");
    }
}
