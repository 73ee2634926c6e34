//! vCenter sessions never in an error: a fake vCenter that echoes the caller's session
//! in its error texts, as a server may (a fault quoting the request, a proxy's page).
//! The fake follows vSphere's documented API as far as the client uses it: vim25 SOAP
//! at `/sdk` (`RetrieveServiceContent`; `Login` answered with the `vmware_soap_session`
//! cookie that later calls carry; faults as HTTP 500 with a `faultstring`) and the
//! Automation REST API at `/rest` (`POST …/cis/session` with basic authentication
//! answering `{"value": id}`, the ID then sent as `vmware-api-session-id`; errors as
//! `{"type", "value": {"messages": [{"default_message"}]}}`). Its inventory answers are
//! the fixtures recorded from govmomi's simulator (tests/data/vsphere/). Loopback only.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use cloud_access::logging::SECRET_FRAGMENT;
use cloud_access::vsphere::{Trust, VcenterClient, VsphereError};
use secrecy::SecretString;
use serde_json::json;

const USER: &str = "administrator@vsphere.local";
const PASSWORD: &str = "Fake-Pa55word-never-shown";
/// The SOAP session the fake's `Login` gives (the cookie's value, quoted as vCenter
/// quotes it).
const SOAP_SESSION: &str = "52b0c6f4-7a1e-4c2d-9e3f-0a1b2c3d4e5f";
/// The REST session ID the fake's `cis/session` gives.
const REST_SESSION: &str = "8f1d2c3b4a596877-rest-session-id";

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

/// What the fake does wrong.
#[derive(Clone, Copy)]
enum Echo {
    /// `RetrievePropertiesEx` faults, its text quoting the request's Cookie header.
    SoapFault,
    /// The inventory is answered; the tag association call fails, its message quoting
    /// the request's session ID.
    RestError,
}

/// A fake vCenter on 127.0.0.1; its base URL.
async fn start(echo: Echo) -> url::Url {
    let logged_in = Arc::new(AtomicBool::new(false));
    let sdk = {
        let logged_in = logged_in.clone();
        move |headers: HeaderMap, body: String| {
            let logged_in = logged_in.clone();
            async move {
                if body.contains("<RetrieveServiceContent") {
                    return xml(StatusCode::OK, fixture("service-content.xml"));
                }
                if body.contains("<Login") {
                    logged_in.store(true, Ordering::SeqCst);
                    let mut response = xml(
                        StatusCode::OK,
                        envelope(&format!(
                            "<LoginResponse xmlns=\"urn:vim25\"><returnval><key>{SOAP_SESSION}</key>\
                             <userName>{USER}</userName></returnval></LoginResponse>"
                        )),
                    );
                    let cookie = format!("vmware_soap_session=\"{SOAP_SESSION}\"; Path=/; HttpOnly; Secure");
                    response
                        .headers_mut()
                        .insert(header::SET_COOKIE, cookie.parse().expect("a header value"));
                    return response;
                }
                let cookie = headers
                    .get(header::COOKIE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("none")
                    .to_owned();
                match echo {
                    Echo::SoapFault => xml(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        envelope(&format!(
                            "<soapenv:Fault><faultcode>ServerFaultCode</faultcode>\
                             <faultstring>Permission to perform this operation was denied for session {cookie} (fragment {})</faultstring>\
                             <detail><NoPermissionFault xmlns=\"urn:vim25\" xsi:type=\"NoPermission\"/></detail></soapenv:Fault>",
                            &SOAP_SESSION[..SECRET_FRAGMENT]
                        )),
                    ),
                    Echo::RestError if body.contains("<type>Datastore</type>") => {
                        xml(StatusCode::OK, fixture("datastores.xml"))
                    }
                    Echo::RestError => xml(StatusCode::OK, fixture("ancestors.xml")),
                }
            }
        }
    };
    let session = |headers: HeaderMap| async move {
        let basic = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if basic.starts_with("Basic ") {
            axum::Json(json!({"value": REST_SESSION})).into_response()
        } else {
            StatusCode::UNAUTHORIZED.into_response()
        }
    };
    let association = |headers: HeaderMap| async move {
        let id = headers
            .get("vmware-api-session-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_owned();
        let message = format!(
            "Session {id} may not list tags (its start: {})",
            &REST_SESSION[..SECRET_FRAGMENT]
        );
        (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"type": "com.vmware.vapi.std.errors.invalid_argument",
                "value": {"messages": [{"default_message": message, "id": "x"}]}})),
        )
            .into_response()
    };
    let app = axum::Router::new()
        .route("/sdk", post(sdk))
        .route("/rest/com/vmware/cis/session", post(session))
        .route("/rest/com/vmware/cis/tagging/tag-association", post(association));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    tokio::spawn(async move { axum::serve(listener, app).await.expect("the fake serves") });
    url::Url::parse(&format!("http://127.0.0.1:{port}/")).expect("a URL")
}

fn client(base: url::Url) -> VcenterClient {
    let _ = rustls::crypto::ring::default_provider().install_default();
    VcenterClient::new(
        base,
        USER.to_owned(),
        SecretString::from(PASSWORD.to_owned()),
        &Trust::System,
        Duration::from_secs(10),
    )
    .expect("a client")
}

/// `error` (shown and debugged) names the vCenter and keeps vSphere's `words`, but no
/// run of [`SECRET_FRAGMENT`] characters of `session` or of the password.
fn assert_clean(error: &VsphereError, session: &str, words: &str) {
    let text = format!("{error} {error:?}");
    assert!(text.contains(words), "vSphere's text is kept: {text}");
    assert!(text.contains("<redacted>"), "the session is cut out: {text}");
    assert!(text.contains("127.0.0.1"), "the vCenter is named: {text}");
    for secret in [session, PASSWORD] {
        for fragment in secret.as_bytes().windows(SECRET_FRAGMENT) {
            let fragment = std::str::from_utf8(fragment).expect("ASCII");
            assert!(!text.contains(fragment), "{fragment:?} of a secret in: {text}");
        }
    }
}

#[tokio::test]
async fn a_soap_fault_quoting_the_session_cookie_is_cleaned() {
    let vcenter = client(start(Echo::SoapFault).await);
    let error = vcenter.datastore("zonal-ds").await.expect_err("the fault");
    assert!(matches!(error, VsphereError::Fault { .. }), "{error:?}");
    assert_clean(
        &error,
        SOAP_SESSION,
        "Permission to perform this operation was denied for session",
    );
}

#[tokio::test]
async fn a_rest_error_quoting_the_session_id_is_cleaned() {
    let vcenter = client(start(Echo::RestError).await);
    let datastore = vcenter.datastore("zonal-ds").await.expect("the datastore");
    let error = vcenter
        .host_labels(&datastore, "k8s-zone", "k8s-region")
        .await
        .expect_err("the tagging error");
    assert!(matches!(error, VsphereError::Status { status: 400, .. }), "{error:?}");
    assert_clean(&error, REST_SESSION, "may not list tags");
}
