//! vim25 SOAP, as much as the topology lookup needs: request envelopes written as
//! templates (every value escaped), answers read with roxmltree by local names (vCenter
//! and govmomi's simulator spell namespaces differently). Pure: no I/O, tested on
//! answers recorded from the simulator (`tests/data/vsphere/`).

use std::fmt::Write as _;

use roxmltree::{Document, Node};

/// XML Schema instance namespace (`xsi:type`).
const XSI: &str = "http://www.w3.org/2001/XMLSchema-instance";

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

/// Escapes text for an XML element or attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
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
         </objectSet></specSet><options></options></RetrievePropertiesEx>",
        collector.element("_this"),
        root.element("obj")
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
         {sets}</specSet><options></options></RetrievePropertiesEx>",
        collector.element("_this")
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

fn parse(xml: &str) -> ParseResult<Document<'_>> {
    Document::parse(xml).map_err(|e| Parsed::Garbage(format!("not XML: {e}")))
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
    let objects: Vec<_> = children(returnval, "objects").collect();
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
}
