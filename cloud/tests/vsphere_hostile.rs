//! Hostile vCenter answers (issue 24 D1, D2): a fake vCenter on loopback whose
//! `RetrievePropertiesEx` answers are built to cost CPU or memory, and the client's
//! refusals, each naming its cap. The fake follows vSphere's documented API as far as
//! the client uses it: vim25 SOAP at `/sdk` (`RetrieveServiceContent`; `Login` answered
//! with the `vmware_soap_session` cookie; any other call without that cookie is the
//! `NotAuthenticated` fault, HTTP 500), and `RetrievePropertiesEx` pages as
//! `RetrieveOptions.maxObjects` asks (no `maxObjects`: the whole result in one page),
//! each page but the last with a new token for `ContinueRetrievePropertiesEx`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use cloud_access::api::{CallErrorKind, CallFailure};
use cloud_access::vsphere::soap::{MAX_ANSWER_BYTES, MAX_ELEMENTS, MAX_ITEMS, MAX_OBJECTS_PER_PAGE, MAX_PAGES};
use cloud_access::vsphere::{Trust, VcenterClient, VsphereError};
use secrecy::SecretString;

const USER: &str = "administrator@vsphere.local";
const PASSWORD: &str = "Fake-Pa55word-never-shown";
const SESSION: &str = "vmware_soap_session=\"7c1d0e2f-hostile-session\"";

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

/// A `RetrievePropertiesEx` answer: `objects`, then `token` if given.
fn retrieve_answer(objects: &str, token: Option<&str>) -> String {
    let token = token.map(|t| format!("<token>{t}</token>")).unwrap_or_default();
    envelope(&format!(
        "<RetrievePropertiesExResponse xmlns=\"urn:vim25\"><returnval>{token}{objects}</returnval>\
         </RetrievePropertiesExResponse>"
    ))
}

/// A datastore named `name` mounted by `hosts` hosts.
fn datastore(name: &str, hosts: usize) -> String {
    let mounts: String = (0..hosts)
        .map(|h| format!("<DatastoreHostMount><key type=\"HostSystem\">host-{h}</key></DatastoreHostMount>"))
        .collect();
    format!(
        "<objects><obj type=\"Datastore\">{name}</obj><propSet><name>name</name><val>{name}</val></propSet>\
         <propSet><name>host</name><val xsi:type=\"ArrayOfDatastoreHostMount\">{mounts}</val></propSet></objects>"
    )
}

/// What the fake answers `RetrievePropertiesEx` and `ContinueRetrievePropertiesEx` with.
#[derive(Clone, Copy)]
enum Inventory {
    /// `count` datastores (`ds-0`…), one host each, paged as `maxObjects` asks.
    Datastores(usize),
    /// One element with 100,000 attributes, 1 MiB (D1's answer).
    Attributes,
    /// Empty `<objects/>`, about this many bytes (D2: 28.6 MiB reached 340 MiB).
    EmptyObjects(usize),
    /// A page of datastores, and always the token `same` (D2: 1.85 GiB in 20 s).
    SameToken,
    /// Pages without objects, each with a new token.
    NewTokens,
    /// Pages of `maxObjects` datastores of 1,000 hosts each, each with a new token.
    ManyMounts,
}

/// The number in `<{tag}>N</{tag}>` of a request.
fn number_in(body: &str, tag: &str) -> Option<usize> {
    let start = body.find(&format!("<{tag}>"))? + tag.len() + 2;
    let end = start + body[start..].find('<')?;
    body[start..end].parse().ok()
}

struct Fake {
    base: url::Url,
    /// `RetrievePropertiesEx` and `ContinueRetrievePropertiesEx` calls answered.
    pages: Arc<AtomicUsize>,
    /// The `maxObjects` last asked for (0: never asked).
    max_objects: Arc<AtomicUsize>,
}

async fn start(inventory: Inventory) -> Fake {
    let pages = Arc::new(AtomicUsize::new(0));
    let max_objects = Arc::new(AtomicUsize::new(0));
    let attributes: String = (0..100_000).map(|i| format!(" a{i}=\"\"")).collect();
    let attributes = Arc::new(retrieve_answer(&format!("<objects{attributes}/>"), None));
    let sdk = {
        let (pages, max_objects) = (pages.clone(), max_objects.clone());
        move |headers: HeaderMap, body: String| {
            let (pages, max_objects, attributes) = (pages.clone(), max_objects.clone(), attributes.clone());
            async move {
                if body.contains("<RetrieveServiceContent") {
                    return xml(
                        StatusCode::OK,
                        envelope(
                            "<RetrieveServiceContentResponse xmlns=\"urn:vim25\"><returnval>\
                             <rootFolder type=\"Folder\">group-d1</rootFolder>\
                             <propertyCollector type=\"PropertyCollector\">propertyCollector</propertyCollector>\
                             <sessionManager type=\"SessionManager\">SessionManager</sessionManager>\
                             </returnval></RetrieveServiceContentResponse>",
                        ),
                    );
                }
                if body.contains("<Login") {
                    let mut response = xml(
                        StatusCode::OK,
                        envelope(
                            "<LoginResponse xmlns=\"urn:vim25\"><returnval><key>k</key></returnval></LoginResponse>",
                        ),
                    );
                    let cookie = format!("{SESSION}; Path=/; HttpOnly");
                    response
                        .headers_mut()
                        .insert(header::SET_COOKIE, cookie.parse().expect("a header value"));
                    return response;
                }
                let cookie = headers.get(header::COOKIE).and_then(|v| v.to_str().ok());
                if cookie != Some(SESSION) {
                    return xml(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        envelope(
                            "<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>The session is not authenticated.</faultstring>\
                             <detail><NotAuthenticatedFault xmlns=\"urn:vim25\" xsi:type=\"NotAuthenticated\"/></detail></soapenv:Fault>",
                        ),
                    );
                }
                let page = pages.fetch_add(1, Ordering::SeqCst);
                // A continuation pages as its retrieval asked (one retrieval at a time here).
                let asked = match number_in(&body, "maxObjects") {
                    Some(asked) => {
                        max_objects.store(asked, Ordering::SeqCst);
                        Some(asked)
                    }
                    None if body.contains("<ContinueRetrievePropertiesEx") => {
                        Some(max_objects.load(Ordering::SeqCst)).filter(|&n| n > 0)
                    }
                    None => None,
                };
                let answer = match inventory {
                    Inventory::Datastores(count) => {
                        let per_page = asked.unwrap_or(count).max(1);
                        let first = number_in(&body, "token").unwrap_or(0);
                        let last = (first + per_page).min(count);
                        let objects: String = (first..last).map(|i| datastore(&format!("ds-{i}"), 1)).collect();
                        let token = (last < count).then(|| last.to_string());
                        retrieve_answer(&objects, token.as_deref())
                    }
                    Inventory::Attributes => attributes.as_ref().clone(),
                    Inventory::EmptyObjects(bytes) => retrieve_answer(&"<objects/>".repeat(bytes / 10), None),
                    Inventory::SameToken => {
                        let objects: String = (0..asked.unwrap_or(20))
                            .map(|i| datastore(&format!("ds-{i}"), 1))
                            .collect();
                        retrieve_answer(&objects, Some("same"))
                    }
                    Inventory::NewTokens => retrieve_answer("", Some(&format!("t{page}"))),
                    Inventory::ManyMounts => {
                        let objects: String = (0..asked.unwrap_or(20))
                            .map(|i| datastore(&format!("ds-{page}-{i}"), 1_000))
                            .collect();
                        retrieve_answer(&objects, Some(&format!("t{page}")))
                    }
                };
                xml(StatusCode::OK, answer)
            }
        }
    };
    let app = axum::Router::new().route("/sdk", post(sdk));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    tokio::spawn(async move { axum::serve(listener, app).await.expect("the fake serves") });
    Fake {
        base: url::Url::parse(&format!("http://127.0.0.1:{port}/")).expect("a URL"),
        pages,
        max_objects,
    }
}

fn client(base: url::Url) -> VcenterClient {
    let _ = rustls::crypto::ring::default_provider().install_default();
    VcenterClient::new(
        base,
        USER.to_owned(),
        SecretString::from(PASSWORD.to_owned()),
        &Trust::System,
        Duration::from_secs(60),
    )
    .expect("a client")
}

/// The error of looking up a datastore in `inventory`, and how long it took.
async fn refused(inventory: Inventory) -> (VsphereError, Duration, Fake) {
    let fake = start(inventory).await;
    let vcenter = client(fake.base.clone());
    let started = Instant::now();
    let error = vcenter.datastore("ds-1").await.expect_err("refused");
    (error, started.elapsed(), fake)
}

fn assert_garbage(error: &VsphereError, call: &str, words: &str) {
    let text = error.to_string();
    assert!(
        matches!(error.call_kind(), Some(CallErrorKind::Garbage { .. })),
        "{error:?}"
    );
    assert!(text.contains(&format!("{call}: an answer we cannot use")), "{text}");
    assert!(text.contains(words), "{text}");
    assert!(text.contains("127.0.0.1"), "the vCenter is named: {text}");
}

#[tokio::test]
async fn datastores_are_found_across_pages_of_the_size_asked_for() {
    let fake = start(Inventory::Datastores(45)).await;
    let vcenter = client(fake.base.clone());
    let found = vcenter.datastore("ds-44").await.expect("found on the third page");
    assert_eq!(found.name, "ds-44");
    assert_eq!(fake.max_objects.load(Ordering::SeqCst), MAX_OBJECTS_PER_PAGE);
    assert_eq!(
        fake.pages.load(Ordering::SeqCst),
        45usize.div_ceil(MAX_OBJECTS_PER_PAGE)
    );
}

#[tokio::test]
async fn an_element_with_100000_attributes_is_refused_at_once() {
    // Before: 18-20 s of roxmltree in a release build, on an async worker.
    let (error, took, _) = refused(Inventory::Attributes).await;
    assert_garbage(&error, "RetrievePropertiesEx", "more than 16 attributes on one element");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test]
async fn pages_of_empty_objects_are_refused_by_bytes_and_by_elements() {
    let (error, _, _) = refused(Inventory::EmptyObjects(28_600 * 1024)).await;
    assert!(
        matches!(error.call_kind(), Some(CallErrorKind::Transport { .. })),
        "{error:?}"
    );
    assert!(error.to_string().contains("is larger than 2 MiB"), "{error}");
    // Within the bytes, the elements are capped.
    let (error, _, _) = refused(Inventory::EmptyObjects(MAX_ANSWER_BYTES - 1024)).await;
    assert_garbage(
        &error,
        "RetrievePropertiesEx",
        &format!("more than {MAX_ELEMENTS} elements"),
    );
}

#[tokio::test]
async fn a_repeated_continuation_token_is_an_error_naming_it() {
    let (error, _, fake) = refused(Inventory::SameToken).await;
    assert_garbage(
        &error,
        "ContinueRetrievePropertiesEx",
        "page 2 repeats the continuation token \"same\"",
    );
    assert_eq!(fake.pages.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn pages_and_items_are_capped_however_each_page_looks() {
    let (error, _, fake) = refused(Inventory::NewTokens).await;
    assert_garbage(
        &error,
        "ContinueRetrievePropertiesEx",
        &format!("more than {MAX_PAGES} pages"),
    );
    assert_eq!(fake.pages.load(Ordering::SeqCst), MAX_PAGES);
    // Items kept: a First Class Disk's lookup keeps every datastore and its mounts.
    let fake = start(Inventory::ManyMounts).await;
    let error = client(fake.base.clone())
        .disk_datastore("14ac54dc-ce36-465b-b5da-ec3d9e531424")
        .await
        .expect_err("refused");
    assert_garbage(
        &error,
        "ContinueRetrievePropertiesEx",
        &format!("more than {MAX_ITEMS} items"),
    );
    // 20 datastores of 1,000 mounts a page: the cap is met on the third.
    let per_page = MAX_OBJECTS_PER_PAGE * 1_001;
    assert_eq!(fake.pages.load(Ordering::SeqCst), MAX_ITEMS / per_page + 1);
}
