//! vim25 SOAP, as much as the topology lookup needs: request envelopes written as
//! templates (every value escaped), answers read with roxmltree by local names (vCenter
//! and govmomi's simulator spell namespaces differently). Pure: no I/O, tested on
//! answers recorded from the simulator (`tests/data/vsphere/`).
//!
//! Every answer is hostile: its bytes, elements, attributes, nesting and namespace
//! declarations are capped in one linear pass before roxmltree reads it, a page holds
//! at most the objects asked for, and a retrieval's pages, items and continuation
//! tokens are capped by [`Paging`]. Each refusal is a [`Parsed::Garbage`] naming its cap.

use std::collections::HashSet;
use std::fmt::Write as _;

use roxmltree::{Document, Node, ParsingOptions};

/// XML Schema instance namespace (`xsi:type`).
const XSI: &str = "http://www.w3.org/2001/XMLSchema-instance";

/// The bytes of one answer: a page of [`MAX_OBJECTS_PER_PAGE`] datastores, each
/// mounted by 300 hosts (vCenter writes about 300 bytes per mount), fits.
pub const MAX_ANSWER_BYTES: usize = 2 << 20;
/// The objects one `RetrievePropertiesEx` page may hold: what we ask vCenter for
/// (`<options><maxObjects>`; vCenter never sends more).
pub const MAX_OBJECTS_PER_PAGE: usize = 20;
/// The pages of one retrieval (10,000 objects at [`MAX_OBJECTS_PER_PAGE`]).
pub const MAX_PAGES: usize = 500;
/// What one retrieval keeps, over all its pages: objects and datastores' host mounts
/// (a datastore looked up by name keeps only its own; a First Class Disk's lookup,
/// every datastore).
pub const MAX_ITEMS: usize = 50_000;
/// A continuation token's bytes (vCenter's are short).
pub const MAX_TOKEN_BYTES: usize = 1024;

/// A managed object reference: its type and its ID (`HostSystem`, `host-21`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MoRef {
    pub kind: String,
    pub value: String,
}

impl MoRef {
    pub fn new(kind: &str, value: &str) -> Self {
        Self {
            kind: kind.to_owned(),
            value: value.to_owned(),
        }
    }

    /// As a request element: `<name type="Kind">value</name>`.
    fn element(&self, name: &str) -> String {
        format!(
            "<{name} type=\"{}\">{}</{name}>",
            escape(&self.kind),
            escape(&self.value)
        )
    }
}

impl std::fmt::Display for MoRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.kind, self.value)
    }
}

/// A SOAP fault: the fault's type (`InvalidLogin`, `NotAuthenticated`, …) and vSphere's
/// own text (`faultstring`, or the type when it is empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub kind: String,
    pub text: String,
}

impl Fault {
    /// The session is gone (expired, or the server restarted): log in again.
    pub fn is_not_authenticated(&self) -> bool {
        self.kind == "NotAuthenticated"
    }
}

/// Why an answer could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    Fault(Fault),
    Garbage(String),
}

type ParseResult<T> = Result<T, Parsed>;

/// Escapes text for an XML element or attribute: the markup characters, and tab, CR
/// and LF as references (XML reads a raw CR as LF, and raw white space in an attribute
/// as a space).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c => out.push(c),
        }
    }
    out
}

fn envelope(body: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
         <soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" \
         xmlns:xsi=\"{XSI}\"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"
    )
}

/// `ServiceInstance.RetrieveServiceContent`.
pub fn retrieve_service_content() -> String {
    envelope(
        "<RetrieveServiceContent xmlns=\"urn:vim25\"><_this type=\"ServiceInstance\">ServiceInstance</_this></RetrieveServiceContent>",
    )
}

/// `SessionManager.Login`. The body holds the password: it is sent, never logged.
pub fn login(session_manager: &MoRef, user: &str, password: &str) -> String {
    envelope(&format!(
        "<Login xmlns=\"urn:vim25\">{}<userName>{}</userName><password>{}</password></Login>",
        session_manager.element("_this"),
        escape(user),
        escape(password)
    ))
}

/// `RetrieveOptions` asking vCenter for pages of at most [`MAX_OBJECTS_PER_PAGE`].
fn paged() -> String {
    format!("<options><maxObjects>{MAX_OBJECTS_PER_PAGE}</maxObjects></options>")
}

/// `RetrievePropertiesEx` of every datastore's `name` and `host` mounts, by a traversal
/// from the root folder through folders and each datacenter's datastore folder
/// (stateless: no view to create and destroy per session).
pub fn datastores(collector: &MoRef, root: &MoRef) -> String {
    envelope(&format!(
        "<RetrievePropertiesEx xmlns=\"urn:vim25\">{}<specSet>\
         <propSet><type>Datastore</type><pathSet>name</pathSet><pathSet>host</pathSet></propSet>\
         <objectSet>{}<skip>true</skip>\
         <selectSet xsi:type=\"TraversalSpec\"><name>folder</name><type>Folder</type><path>childEntity</path><skip>false</skip>\
         <selectSet><name>folder</name></selectSet><selectSet><name>datacenter</name></selectSet></selectSet>\
         <selectSet xsi:type=\"TraversalSpec\"><name>datacenter</name><type>Datacenter</type><path>datastoreFolder</path><skip>false</skip>\
         <selectSet><name>folder</name></selectSet></selectSet>\
         </objectSet></specSet>{}</RetrievePropertiesEx>",
        collector.element("_this"),
        root.element("obj"),
        paged()
    ))
}

/// `RetrievePropertiesEx` of `name` and `parent` of `objects` and all their ancestors
/// (a traversal up `parent`, as govmomi's `mo.Ancestors`).
pub fn ancestors(collector: &MoRef, objects: &[MoRef]) -> String {
    let mut sets = String::new();
    for object in objects {
        let _ = write!(
            sets,
            "<objectSet>{}<selectSet xsi:type=\"TraversalSpec\"><name>up</name><type>ManagedEntity</type>\
             <path>parent</path><skip>false</skip><selectSet><name>up</name></selectSet></selectSet></objectSet>",
            object.element("obj")
        );
    }
    envelope(&format!(
        "<RetrievePropertiesEx xmlns=\"urn:vim25\">{}<specSet>\
         <propSet><type>ManagedEntity</type><pathSet>name</pathSet><pathSet>parent</pathSet></propSet>\
         {sets}</specSet>{}</RetrievePropertiesEx>",
        collector.element("_this"),
        paged()
    ))
}

/// `ContinueRetrievePropertiesEx`: the next page of a retrieval.
pub fn continue_retrieve(collector: &MoRef, token: &str) -> String {
    envelope(&format!(
        "<ContinueRetrievePropertiesEx xmlns=\"urn:vim25\">{}<token>{}</token></ContinueRetrievePropertiesEx>",
        collector.element("_this"),
        escape(token)
    ))
}

/// `VcenterVStorageObjectManager.RetrieveVStorageObject`: a First Class Disk on one datastore.
pub fn retrieve_vstorage_object(manager: &MoRef, id: &str, datastore: &MoRef) -> String {
    envelope(&format!(
        "<RetrieveVStorageObject xmlns=\"urn:vim25\">{}<id><id>{}</id></id>{}</RetrieveVStorageObject>",
        manager.element("_this"),
        escape(id),
        datastore.element("datastore")
    ))
}

/// What the lookup uses of the service content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceContent {
    pub root_folder: MoRef,
    pub property_collector: MoRef,
    pub session_manager: MoRef,
    /// Absent on ESXi and before vCenter 6.5.
    pub vstorage_object_manager: Option<MoRef>,
}

/// A datastore and the hosts that mount it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatastoreMounts {
    pub datastore: MoRef,
    pub name: String,
    /// Hosts whose mount is both mounted and accessible.
    pub hosts: Vec<MoRef>,
}

/// A managed entity's name and parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entity {
    pub object: MoRef,
    pub name: String,
    pub parent: Option<MoRef>,
}

/// One page of a retrieval and the token of the next, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub token: Option<String>,
}

/// What a retrieved item keeps, as [`MAX_ITEMS`] counts it.
pub trait Held {
    fn held(&self) -> usize;
}

impl Held for DatastoreMounts {
    /// The datastore and each host mounting it.
    fn held(&self) -> usize {
        1 + self.hosts.len()
    }
}

impl Held for Entity {
    fn held(&self) -> usize {
        1
    }
}

/// The pages of one retrieval: at most [`MAX_PAGES`], [`MAX_ITEMS`] kept over all of
/// them, and no continuation token twice (vCenter gives each page a new one; a token
/// again is a retrieval that never ends).
#[derive(Debug, Default)]
pub struct Paging {
    pages: usize,
    items: usize,
    tokens: HashSet<String>,
}

impl Paging {
    /// Counts a page that keeps `held` items and ends with `token`: the token to ask
    /// `ContinueRetrievePropertiesEx` with, or `None` when the retrieval is complete.
    pub fn next(&mut self, held: usize, token: Option<String>) -> ParseResult<Option<String>> {
        self.pages += 1;
        self.items = self.items.saturating_add(held);
        let garbage = |reason: String| Err(Parsed::Garbage(reason));
        if self.items > MAX_ITEMS {
            return garbage(format!(
                "more than {MAX_ITEMS} items (objects and host mounts) in {} pages (the cap per retrieval)",
                self.pages
            ));
        }
        let Some(token) = token else { return Ok(None) };
        if self.pages >= MAX_PAGES {
            return garbage(format!("more than {MAX_PAGES} pages (the cap per retrieval)"));
        }
        if token.len() > MAX_TOKEN_BYTES {
            return garbage(format!(
                "a continuation token of {} bytes (the cap is {MAX_TOKEN_BYTES})",
                token.len()
            ));
        }
        if !self.tokens.insert(token.clone()) {
            return garbage(format!(
                "page {} repeats the continuation token {token:?}: the retrieval would never end",
                self.pages
            ));
        }
        Ok(Some(token))
    }
}

fn child<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children().find(|n| n.is_element() && n.tag_name().name() == name)
}

fn children<'a, 'i: 'a>(node: Node<'a, 'i>, name: &'a str) -> impl Iterator<Item = Node<'a, 'i>> + 'a {
    node.children()
        .filter(move |n| n.is_element() && n.tag_name().name() == name)
}

fn text<'a>(node: Node<'a, '_>) -> &'a str {
    node.text().unwrap_or("")
}

fn xsi_type<'a>(node: Node<'a, '_>) -> Option<&'a str> {
    node.attributes()
        .find(|a| a.name() == "type" && a.namespace() == Some(XSI))
        .map(|a| a.value())
}

fn moref(node: Node<'_, '_>) -> ParseResult<MoRef> {
    let kind = node
        .attributes()
        .find(|a| a.name() == "type" && a.namespace().is_none())
        .map(|a| a.value())
        .ok_or_else(|| Parsed::Garbage(format!("<{}> has no type", node.tag_name().name())))?;
    Ok(MoRef::new(kind, text(node)))
}

/// The body's first element, or the fault it carries.
fn body<'a, 'i>(doc: &'a Document<'i>) -> ParseResult<Node<'a, 'i>> {
    let envelope = doc.root_element();
    let body = child(envelope, "Body").ok_or_else(|| Parsed::Garbage("no SOAP Body".to_owned()))?;
    let first = body
        .children()
        .find(Node::is_element)
        .ok_or_else(|| Parsed::Garbage("an empty SOAP Body".to_owned()))?;
    if first.tag_name().name() == "Fault" {
        return Err(Parsed::Fault(fault(first)));
    }
    Ok(first)
}

fn fault(node: Node<'_, '_>) -> Fault {
    let detail = child(node, "detail").and_then(|d| d.children().find(Node::is_element));
    let kind = detail
        .map(|d| {
            xsi_type(d)
                .map(str::to_owned)
                .unwrap_or_else(|| d.tag_name().name().trim_end_matches("Fault").to_owned())
        })
        .unwrap_or_default();
    let text = child(node, "faultstring").map(text).unwrap_or("").trim().to_owned();
    let text = if text.is_empty() { kind.clone() } else { text };
    Fault { kind, text }
}

/// The caps on one vCenter answer's shape, checked in one linear pass before roxmltree
/// parses it: roxmltree's duplicate-attribute check compares each attribute of an
/// element with all before it (100,000 attributes: 18 s), a namespace declaration
/// copies those in scope, and every node costs memory. vCenter's answers (and
/// govmomi's simulator's) carry at most 4 attributes on an element, nest about 12
/// deep and declare 2 namespaces per object; a page holds at most
/// [`MAX_OBJECTS_PER_PAGE`] objects.
pub const MAX_ATTRIBUTES_PER_ELEMENT: usize = 16;
/// Elements in one answer (comments, CDATA sections and processing instructions
/// count as elements): a page of 20 datastores, each mounted by 300 hosts, has about
/// 42,000 (7 per mount). Parsing the largest answer these caps allow takes about
/// 10 MiB (roxmltree's tree and what is read from it).
pub const MAX_ELEMENTS: usize = 50_000;
/// Attributes in one answer (about one per host mount in a page of datastores).
pub const MAX_ATTRIBUTES: usize = 50_000;
/// How deep elements nest in one answer.
pub const MAX_DEPTH: usize = 32;
/// Namespace declarations (`xmlns`, `xmlns:p`) in one answer.
pub const MAX_NAMESPACE_DECLARATIONS: usize = 1_000;

/// Refuses an answer beyond the caps above, or with a DTD (roxmltree refuses DTDs too;
/// refused here so that no entity is ever counted). One pass over the bytes; what it
/// cannot read as markup is left for roxmltree to refuse, so it only needs to count
/// correctly on well-formed XML (roxmltree stops at the first malformed byte).
fn check_shape(xml: &str) -> ParseResult<()> {
    let garbage = |reason: String| Err(Parsed::Garbage(reason));
    let bytes = xml.as_bytes();
    let (mut elements, mut attributes, mut declarations, mut depth) = (0usize, 0usize, 0usize, 0usize);
    let mut at = 0;
    while let Some(offset) = bytes[at..].iter().position(|&b| b == b'<') {
        let start = at + offset;
        let rest = &xml[start..];
        let skip_to = |end: &str| rest.find(end).map_or(bytes.len(), |i| start + i + end.len());
        if rest.starts_with("<!--") {
            elements += 1;
            at = skip_to("-->");
        } else if rest.starts_with("<![CDATA[") {
            elements += 1;
            at = skip_to("]]>");
        } else if rest.starts_with("<!") {
            return garbage("a DTD or declaration (<!…): vCenter sends none".to_owned());
        } else if rest.starts_with("<?") {
            elements += 1;
            at = skip_to("?>");
        } else if rest.starts_with("</") {
            depth = depth.saturating_sub(1);
            at = skip_to(">");
        } else {
            elements += 1;
            depth += 1;
            if elements > MAX_ELEMENTS {
                return garbage(format!("more than {MAX_ELEMENTS} elements (the cap per answer)"));
            }
            if depth > MAX_DEPTH {
                return garbage(format!(
                    "elements nested deeper than {MAX_DEPTH} elements (the cap per answer)"
                ));
            }
            // The start tag: each `=` outside quotes is an attribute; its name is the
            // run before it (spaces allowed around `=`).
            let mut on_element = 0;
            let mut quote = None;
            let mut end = bytes.len();
            for (i, &b) in bytes.iter().enumerate().skip(start + 1) {
                match (quote, b) {
                    (Some(q), b) if b == q => quote = None,
                    (Some(_), _) => {}
                    (None, b'"' | b'\'') => quote = Some(b),
                    (None, b'=') => {
                        on_element += 1;
                        attributes += 1;
                        if on_element > MAX_ATTRIBUTES_PER_ELEMENT {
                            return garbage(format!(
                                "more than {MAX_ATTRIBUTES_PER_ELEMENT} attributes on one element (the cap per element)"
                            ));
                        }
                        if attributes > MAX_ATTRIBUTES {
                            return garbage(format!("more than {MAX_ATTRIBUTES} attributes (the cap per answer)"));
                        }
                        let before = xml[start + 1..i].trim_end();
                        let name = before.rsplit(|c: char| c.is_ascii_whitespace()).next().unwrap_or("");
                        if name == "xmlns" || name.starts_with("xmlns:") {
                            declarations += 1;
                            if declarations > MAX_NAMESPACE_DECLARATIONS {
                                return garbage(format!(
                                    "more than {MAX_NAMESPACE_DECLARATIONS} namespace declarations (the cap per answer)"
                                ));
                            }
                        }
                    }
                    (None, b'>') => {
                        end = i;
                        break;
                    }
                    (None, _) => {}
                }
            }
            if end > 0 && end < bytes.len() && bytes[end - 1] == b'/' {
                depth -= 1;
            }
            at = (end + 1).min(bytes.len());
        }
    }
    Ok(())
}

fn parse(xml: &str) -> ParseResult<Document<'_>> {
    if xml.len() > MAX_ANSWER_BYTES {
        return Err(Parsed::Garbage(format!(
            "an answer of more than {MAX_ANSWER_BYTES} bytes (the cap per answer)"
        )));
    }
    check_shape(xml)?;
    // roxmltree's own cap as a second guard: elements, texts (at most two per element:
    // before its end tag and after it) and the root.
    let options = ParsingOptions {
        nodes_limit: u32::try_from(3 * MAX_ELEMENTS + 2).unwrap_or(u32::MAX),
        ..ParsingOptions::default()
    };
    Document::parse_with_options(xml, options).map_err(|e| Parsed::Garbage(format!("not XML: {e}")))
}

/// Checks an answer whose content is not needed (a fault, or not SOAP, is the error).
pub fn parse_ok(xml: &str) -> ParseResult<()> {
    body(&parse(xml)?).map(|_| ())
}

/// The answer of [`retrieve_service_content`].
pub fn parse_service_content(xml: &str) -> ParseResult<ServiceContent> {
    let doc = parse(xml)?;
    let returnval = child(body(&doc)?, "returnval").ok_or_else(|| Parsed::Garbage("no returnval".to_owned()))?;
    let required = |name: &str| {
        child(returnval, name)
            .ok_or_else(|| Parsed::Garbage(format!("no {name} in the service content")))
            .and_then(moref)
    };
    Ok(ServiceContent {
        root_folder: required("rootFolder")?,
        property_collector: required("propertyCollector")?,
        session_manager: required("sessionManager")?,
        vstorage_object_manager: child(returnval, "vStorageObjectManager").map(moref).transpose()?,
    })
}

/// The objects of a `RetrievePropertiesEx` (or `Continue…`) answer, each with its
/// properties; a property vSphere could not read because the session is gone is the
/// `NotAuthenticated` fault (the simulator answers so instead of faulting the call).
fn objects<'a, 'i>(doc: &'a Document<'i>) -> ParseResult<(Vec<Node<'a, 'i>>, Option<String>)> {
    let Some(returnval) = child(body(doc)?, "returnval") else {
        // No object matched: vSphere leaves returnval out.
        return Ok((Vec::new(), None));
    };
    let token = child(returnval, "token").map(|t| text(t).to_owned());
    let objects: Vec<_> = children(returnval, "objects").take(MAX_OBJECTS_PER_PAGE + 1).collect();
    if objects.len() > MAX_OBJECTS_PER_PAGE {
        return Err(Parsed::Garbage(format!(
            "a page of more than the {MAX_OBJECTS_PER_PAGE} objects per page asked for (maxObjects)"
        )));
    }
    for object in &objects {
        for missing in children(*object, "missingSet") {
            let inner = child(missing, "fault").and_then(|f| f.children().find(Node::is_element));
            let kind = inner.and_then(xsi_type).unwrap_or("");
            if kind == "NotAuthenticated" {
                return Err(Parsed::Fault(Fault {
                    kind: kind.to_owned(),
                    text: "the session is not authenticated".to_owned(),
                }));
            }
        }
    }
    Ok((objects, token))
}

fn property<'a, 'i>(object: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    children(object, "propSet")
        .find(|p| child(*p, "name").map(text) == Some(name))
        .and_then(|p| child(p, "val"))
}

/// The answer of [`datastores`].
pub fn parse_datastores(xml: &str) -> ParseResult<Page<DatastoreMounts>> {
    let doc = parse(xml)?;
    let (objects, token) = objects(&doc)?;
    let mut items = Vec::new();
    for object in objects {
        let datastore = child(object, "obj")
            .ok_or_else(|| Parsed::Garbage("an object without obj".to_owned()))
            .and_then(moref)?;
        let name = property(object, "name").map(text).unwrap_or("").to_owned();
        let mut hosts = Vec::new();
        if let Some(val) = property(object, "host") {
            for mount in children(val, "DatastoreHostMount") {
                let Some(key) = child(mount, "key") else { continue };
                let info = child(mount, "mountInfo");
                // Absent flags are true, as vSphere documents for `mounted` and `accessible`.
                let flag = |name| info.and_then(|i| child(i, name)).map(text) != Some("false");
                if flag("mounted") && flag("accessible") {
                    hosts.push(moref(key)?);
                }
            }
        }
        items.push(DatastoreMounts { datastore, name, hosts });
    }
    Ok(Page { items, token })
}

/// The answer of [`ancestors`].
pub fn parse_entities(xml: &str) -> ParseResult<Page<Entity>> {
    let doc = parse(xml)?;
    let (objects, token) = objects(&doc)?;
    let mut items = Vec::new();
    for object in objects {
        let me = child(object, "obj")
            .ok_or_else(|| Parsed::Garbage("an object without obj".to_owned()))
            .and_then(moref)?;
        let name = property(object, "name").map(text).unwrap_or("").to_owned();
        let parent = property(object, "parent").map(moref).transpose()?;
        items.push(Entity {
            object: me,
            name,
            parent,
        });
    }
    Ok(Page { items, token })
}

/// The datastore of the First Class Disk in a [`retrieve_vstorage_object`] answer.
pub fn parse_vstorage_datastore(xml: &str) -> ParseResult<MoRef> {
    let doc = parse(xml)?;
    let datastore = child(body(&doc)?, "returnval")
        .and_then(|r| child(r, "config"))
        .and_then(|c| child(c, "backing"))
        .and_then(|b| child(b, "datastore"))
        .ok_or_else(|| Parsed::Garbage("no config.backing.datastore in the storage object".to_owned()))?;
    moref(datastore)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!("{}/../tests/data/vsphere/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).expect("the fixture is in the repository")
    }

    #[test]
    fn values_are_escaped() {
        let body = login(&MoRef::new("SessionManager", "SessionManager"), "a<b", "p&\"'>");
        assert!(body.contains("<userName>a&lt;b</userName>"));
        assert!(body.contains("<password>p&amp;&quot;&apos;&gt;</password>"));
        Document::parse(&body).expect("well-formed");
        let hosts = [MoRef::new("HostSystem", "host-1"), MoRef::new("HostSystem", "h<2")];
        let body = ancestors(&MoRef::new("PropertyCollector", "pc"), &hosts);
        assert_eq!(body.matches("<objectSet>").count(), 2);
        Document::parse(&body).expect("well-formed");
    }

    #[test]
    fn line_ends_and_tabs_survive_escaping() {
        // XML reads a raw CR as LF, and a raw tab, CR or LF in an attribute as a space:
        // a password (or a value sent back) holding one must be sent as a reference.
        let value = "a\rb\r\nc\td\ne";
        let xml = format!("<x type=\"{}\">{}</x>", escape(value), escape(value));
        let doc = Document::parse(&xml).expect("well-formed");
        let x = doc.root_element();
        assert_eq!(x.attribute("type"), Some(value));
        assert_eq!(x.text(), Some(value));
    }

    #[test]
    fn service_content() {
        let content = parse_service_content(&fixture("service-content.xml")).expect("parsed");
        assert_eq!(content.root_folder, MoRef::new("Folder", "group-d1"));
        assert_eq!(content.property_collector.value, "propertyCollector");
        assert_eq!(content.session_manager.value, "SessionManager");
        assert_eq!(
            content.vstorage_object_manager,
            Some(MoRef::new("VcenterVStorageObjectManager", "VStorageObjectManager"))
        );
    }

    #[test]
    fn faults_carry_vspheres_text() {
        let Err(Parsed::Fault(fault)) = parse_ok(&fixture("login-refused.xml")) else {
            panic!("a fault")
        };
        assert_eq!(fault.kind, "InvalidLogin");
        assert_eq!(fault.text, "Login failure");
        let Err(Parsed::Fault(fault)) = parse_ok(&fixture("not-authenticated-fault.xml")) else {
            panic!("a fault")
        };
        assert!(fault.is_not_authenticated());
        assert_eq!(fault.text, "NotAuthenticated");
        // The simulator's way: a property it could not read for want of a session.
        let Err(Parsed::Fault(fault)) = parse_entities(&fixture("not-authenticated.xml")) else {
            panic!("a fault")
        };
        assert!(fault.is_not_authenticated());
        assert!(matches!(parse_ok("<x"), Err(Parsed::Garbage(_))));
        assert!(matches!(parse_ok("<a/>"), Err(Parsed::Garbage(_))));
    }

    #[test]
    fn datastores_and_their_mounted_hosts() {
        let page = parse_datastores(&fixture("datastores.xml")).expect("parsed");
        assert_eq!(page.token, None);
        let zonal = page.items.iter().find(|d| d.name == "zonal-ds").expect("listed");
        assert_eq!(zonal.datastore, MoRef::new("Datastore", "datastore-92"));
        assert_eq!(
            zonal.hosts,
            [MoRef::new("HostSystem", "host-37"), MoRef::new("HostSystem", "host-47")]
        );
        // An unmounted or inaccessible mount is no way to reach the datastore.
        let xml = fixture("datastores.xml").replacen("<mounted>true</mounted>", "<mounted>false</mounted>", 1);
        let page = parse_datastores(&xml).expect("parsed");
        assert_eq!(page.items[0].hosts.len(), 4);
    }

    #[test]
    fn ancestors_up_to_the_root() {
        let page = parse_entities(&fixture("ancestors.xml")).expect("parsed");
        let find = |v: &str| page.items.iter().find(|e| e.object.value == v).expect("listed");
        assert_eq!(find("host-37").name, "DC0_C0_H0");
        assert_eq!(
            find("host-37").parent,
            Some(MoRef::new("ClusterComputeResource", "domain-c28"))
        );
        assert_eq!(find("datacenter-1").parent, Some(MoRef::new("Folder", "group-d1")));
        assert_eq!(find("group-d1").parent, None);
    }

    #[test]
    fn a_first_class_disks_datastore() {
        let datastore = parse_vstorage_datastore(&fixture("vstorage-object.xml")).expect("parsed");
        assert_eq!(datastore, MoRef::new("Datastore", "datastore-92"));
    }

    /// A `RetrievePropertiesEx` answer whose `returnval` holds `inner`.
    fn retrieve_answer(inner: &str) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><soapenv:Envelope \
             xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" \
             xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"><soapenv:Body>\
             <RetrievePropertiesExResponse xmlns=\"urn:vim25\"><returnval>{inner}</returnval>\
             </RetrievePropertiesExResponse></soapenv:Body></soapenv:Envelope>"
        )
    }

    fn refused(xml: &str) -> String {
        match parse_datastores(xml) {
            Err(Parsed::Garbage(reason)) => reason,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn many_attributes_on_one_element_are_refused_at_once() {
        // Issue 24 D1: 1 MiB, 100,000 attributes on one element took roxmltree 18 s
        // (its duplicate-attribute check compares each attribute with all before it).
        let attributes: String = (0..100_000).map(|i| format!(" a{i}=\"\"")).collect();
        let xml = retrieve_answer(&format!("<objects{attributes}/>"));
        let started = std::time::Instant::now();
        let reason = refused(&xml);
        assert!(reason.contains("more than 16 attributes on one element"), "{reason}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        // Namespace declarations are attributes too.
        let declarations: String = (0..17).map(|i| format!(" xmlns:p{i}=\"urn:p{i}\"")).collect();
        let reason = refused(&retrieve_answer(&format!("<objects{declarations}/>")));
        assert!(reason.contains("more than 16 attributes on one element"), "{reason}");
    }

    #[test]
    fn elements_attributes_nesting_and_namespaces_are_capped() {
        // Issue 24 D2: a page of empty objects (28.6 MiB reached 340 MiB).
        let reason = refused(&retrieve_answer(&"<x/>".repeat(MAX_ELEMENTS)));
        assert!(
            reason.contains(&format!("more than {MAX_ELEMENTS} elements")),
            "{reason}"
        );
        let reason = refused(&retrieve_answer(&"<x a=\"\" b=\"\"/>".repeat(MAX_ATTRIBUTES / 2 + 1)));
        assert!(
            reason.contains(&format!("more than {MAX_ATTRIBUTES} attributes")),
            "{reason}"
        );
        let reason = refused(&" ".repeat(MAX_ANSWER_BYTES + 1));
        assert!(
            reason.contains(&format!("more than {MAX_ANSWER_BYTES} bytes")),
            "{reason}"
        );
        let deep = format!("{}{}", "<x>".repeat(40), "</x>".repeat(40));
        let reason = refused(&retrieve_answer(&deep));
        assert!(reason.contains("nested deeper than 32 elements"), "{reason}");
        let declaring = "<x xmlns:p=\"urn:p\"/>".repeat(1_001);
        let reason = refused(&retrieve_answer(&declaring));
        assert!(reason.contains("more than 1000 namespace declarations"), "{reason}");
        let reason = refused("<!DOCTYPE x [<!ENTITY a \"b\">]><x/>");
        assert!(reason.contains("a DTD"), "{reason}");
        // What the caps count is markup: the same characters in text, comments,
        // CDATA, processing instructions and attribute values are no elements.
        let lookalikes = "<!-- <x a='1'> <x> --><![CDATA[<x><x><x>]]><?pi <x>?>";
        let quoted: String = (0..40).map(|_| "<y v=\"&lt;x>\" w='>'/>").collect();
        let page = parse_datastores(&retrieve_answer(&format!("{lookalikes}{quoted}"))).expect("parsed");
        assert!(page.items.is_empty());
    }

    #[test]
    fn more_objects_than_asked_for_are_refused() {
        let object = "<objects><obj type=\"Datastore\">d</obj></objects>";
        let page = parse_datastores(&retrieve_answer(&object.repeat(20))).expect("parsed");
        assert_eq!(page.items.len(), 20);
        let reason = refused(&retrieve_answer(&object.repeat(21)));
        assert!(
            reason.contains("more than the 20 objects per page asked for"),
            "{reason}"
        );
    }

    #[test]
    fn retrievals_ask_for_pages_of_the_objects_a_page_may_hold() {
        let collector = MoRef::new("PropertyCollector", "pc");
        let asked = format!("<options><maxObjects>{MAX_OBJECTS_PER_PAGE}</maxObjects></options>");
        let bodies = [
            datastores(&collector, &MoRef::new("Folder", "group-d1")),
            ancestors(&collector, &[MoRef::new("HostSystem", "host-1")]),
        ];
        for body in bodies {
            assert!(body.contains(&asked), "{body}");
            Document::parse(&body).expect("well-formed");
        }
    }

    #[test]
    fn paging_ends_refuses_a_repeated_token_and_is_capped() {
        let mut paging = Paging::default();
        assert_eq!(paging.next(3, Some("1".into())), Ok(Some("1".into())));
        assert_eq!(paging.next(3, Some("2".into())), Ok(Some("2".into())));
        assert_eq!(paging.next(3, None), Ok(None));
        // Issue 24 D2: the same token every time paged until the deadline (218 MiB in 2 s).
        let mut paging = Paging::default();
        assert_eq!(paging.next(1, Some("same".into())), Ok(Some("same".into())));
        let Err(Parsed::Garbage(reason)) = paging.next(1, Some("same".into())) else {
            panic!("a repeated token")
        };
        assert!(
            reason.contains("page 2 repeats the continuation token \"same\""),
            "{reason}"
        );
        // A new token on every page: the pages are capped.
        let mut paging = Paging::default();
        let ended = (0..MAX_PAGES + 1).find_map(|i| paging.next(0, Some(i.to_string())).err());
        let Some(Parsed::Garbage(reason)) = ended else {
            panic!("pages are capped")
        };
        assert!(reason.contains(&format!("more than {MAX_PAGES} pages")), "{reason}");
        // Items over all pages, however few per page.
        let mut paging = Paging::default();
        assert_eq!(paging.next(MAX_ITEMS, Some("a".into())), Ok(Some("a".into())));
        let Err(Parsed::Garbage(reason)) = paging.next(1, None) else {
            panic!("items are capped")
        };
        assert!(reason.contains(&format!("more than {MAX_ITEMS} items")), "{reason}");
        let mut paging = Paging::default();
        let Err(Parsed::Garbage(reason)) = paging.next(0, Some("t".repeat(MAX_TOKEN_BYTES + 1))) else {
            panic!("a long token")
        };
        assert!(reason.contains("continuation token of 1025 bytes"), "{reason}");
        // What a page keeps: each datastore with its host mounts.
        let page = parse_datastores(&fixture("datastores.xml")).expect("parsed");
        let held: usize = page.items.iter().map(Held::held).sum();
        assert_eq!(
            held,
            page.items.len() + page.items.iter().map(|d| d.hosts.len()).sum::<usize>()
        );
    }
}
