//! vCenter sessions never in an error: a fake vCenter that echoes the caller's session
//! in its error texts, as a server may (a fault quoting the request, a proxy's page).
//! The fake follows vSphere's documented API as far as the client uses it: vim25 SOAP
//! at `/sdk` (`RetrieveServiceContent`; `Login` answered with the `vmware_soap_session`
//! cookie that later calls carry; faults as HTTP 500 with a `faultstring`) and the
//! Automation REST API at `/rest` (`POST …/cis/session` with basic authentication
//! answering `{"value": id}`, the ID then sent as `vmware-api-session-id`; errors as
//! `{"type", "value": {"messages": [{"default_message"}]}}`). Its inventory answers are
//! the fixtures recorded from govmomi's simulator (tests/data/vsphere/). As vCenter
//! does, it refuses a `Login` with another user or password (`InvalidLogin`), any SOAP
//! call but `RetrieveServiceContent` and `Login` without the session's cookie
//! (`NotAuthenticated`), `cis/session` without the user's basic credentials and any
//! other REST call without the session's ID (401 `unauthenticated`): a client that
//! dropped its session would meet those refusals, not the errors the tests expect.
//! Loopback only.

use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use cloud_access::api::{CallErrorKind, CallFailure};
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

/// vim25's fault: HTTP 500 with `faultstring` and the fault's type in `detail`.
fn fault(text: &str, detail: &str) -> Response {
    xml(
        StatusCode::INTERNAL_SERVER_ERROR,
        envelope(&format!(
            "<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>{text}</faultstring>\
             <detail>{detail}</detail></soapenv:Fault>"
        )),
    )
}

/// The `NotAuthenticated` fault vCenter answers a call without a session.
fn not_authenticated() -> Response {
    fault(
        "The session is not authenticated.",
        "<NotAuthenticatedFault xmlns=\"urn:vim25\" xsi:type=\"NotAuthenticated\">\
         <object type=\"Folder\">group-d1</object><privilegeId>System.View</privilegeId></NotAuthenticatedFault>",
    )
}

/// Whether `headers` carry the fake's SOAP session cookie.
fn has_soap_session(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .any(|pair| pair.trim() == format!("vmware_soap_session=\"{SOAP_SESSION}\""))
}

/// The Automation API's 401 for a call without valid credentials or session.
fn unauthenticated() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        axum::Json(json!({"type": "com.vmware.vapi.std.errors.unauthenticated",
            "value": {"messages": [{"default_message": "Authentication required.",
                "id": "com.vmware.vapi.endpoint.method.authentication.required", "args": []}]}})),
    )
        .into_response()
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
    let sdk = {
        move |headers: HeaderMap, body: String| async move {
            if body.contains("<RetrieveServiceContent") {
                return xml(StatusCode::OK, fixture("service-content.xml"));
            }
            if body.contains("<Login") {
                let credentials = format!("<userName>{USER}</userName><password>{PASSWORD}</password>");
                if !body.contains(&credentials) {
                    return fault(
                        "Cannot complete login due to an incorrect user name or password.",
                        "<InvalidLoginFault xmlns=\"urn:vim25\" xsi:type=\"InvalidLogin\"/>",
                    );
                }
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
            if !has_soap_session(&headers) {
                return not_authenticated();
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
    };
    let session = |headers: HeaderMap| async move {
        let basic = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        use base64::Engine;
        let expected = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
        if basic == format!("Basic {expected}") {
            axum::Json(json!({"value": REST_SESSION})).into_response()
        } else {
            unauthenticated()
        }
    };
    let association = |headers: HeaderMap| async move {
        let id = headers
            .get("vmware-api-session-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_owned();
        if id != REST_SESSION {
            return unauthenticated();
        }
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
    assert!(
        matches!(error.call_kind(), Some(CallErrorKind::Api { status: 400, .. })),
        "{error:?}"
    );
    assert_clean(&error, REST_SESSION, "may not list tags");
}

#[tokio::test]
async fn the_fake_refuses_calls_without_a_session_as_vcenter_does() {
    let base = start(Echo::SoapFault).await;
    let http = reqwest::Client::builder().no_proxy().build().expect("a client");
    let soap = |body: &str, cookie: Option<&str>| {
        let mut request = http.post(base.join("sdk").expect("a URL")).body(envelope(body));
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, cookie);
        }
        request.send()
    };
    let retrieve = "<RetrievePropertiesEx xmlns=\"urn:vim25\"><_this type=\"PropertyCollector\">propertyCollector</_this></RetrievePropertiesEx>";
    for cookie in [
        None,
        Some("vmware_soap_session=\"52b0c6f4-0000-0000-0000-000000000000\""),
    ] {
        let answer = soap(retrieve, cookie).await.expect("an answer");
        assert_eq!(answer.status(), 500);
        let text = answer.text().await.expect("a body");
        assert!(text.contains("xsi:type=\"NotAuthenticated\""), "{cookie:?}: {text}");
    }
    let login = |password: &str| {
        format!(
            "<Login xmlns=\"urn:vim25\"><_this type=\"SessionManager\">SessionManager</_this>\
             <userName>{USER}</userName><password>{password}</password></Login>"
        )
    };
    let refused = soap(&login("wrong"), None).await.expect("an answer");
    assert!(refused.text().await.expect("a body").contains("InvalidLogin"));
    let with_session = soap(retrieve, Some(&format!("vmware_soap_session=\"{SOAP_SESSION}\"")))
        .await
        .expect("an answer");
    let text = with_session.text().await.expect("a body");
    assert!(
        text.contains("NoPermission"),
        "with the session, the call is judged: {text}"
    );

    let rest = |path: &str| http.post(base.join(path).expect("a URL"));
    let no_session = rest("rest/com/vmware/cis/tagging/tag-association")
        .send()
        .await
        .expect("an answer");
    assert_eq!(no_session.status(), 401);
    let wrong = rest("rest/com/vmware/cis/session")
        .basic_auth(USER, Some("wrong"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(wrong.status(), 401);
    let right = rest("rest/com/vmware/cis/session")
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .await
        .expect("an answer");
    assert_eq!(right.status(), 200);
}
