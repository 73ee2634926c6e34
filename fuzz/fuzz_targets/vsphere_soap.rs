//! vSphere answers: every SOAP answer parser of `cloud_access::vsphere::soap`
//! (RetrieveServiceContent, Login, RetrievePropertiesEx/ContinueRetrievePropertiesEx
//! of datastores and ancestors, RetrieveVStorageObject) and every REST answer
//! parser of `vsphere::tagging`, each on the same bytes: no panic (the caps on an
//! answer's shape refuse, they do not panic). Property: a page of datastores that
//! parses survives a print-parse: written back as a `RetrievePropertiesEx` answer
//! (values escaped by `soap::escape`, as requests are), it reads as the same
//! datastores, names, host mounts and token; a printed page over the bytes cap (escaping
//! can lengthen a CDATA section's text) is refused by that cap.
#![no_main]

use cloud_access::vsphere::soap::{self, DatastoreMounts, MoRef, Page, Parsed};
use cloud_access::vsphere::tagging;
use libfuzzer_sys::fuzz_target;

fn moref(name: &str, moref: &MoRef) -> String {
    format!(
        "<{name} type=\"{}\">{}</{name}>",
        soap::escape(&moref.kind),
        soap::escape(&moref.value)
    )
}

/// `page` as vCenter writes it: one `objects` per datastore with its `name` (left
/// out when empty, which reads as empty) and its host mounts (no `mountInfo`: absent
/// flags read as mounted and accessible). No namespace declarations: the parser reads
/// local names, and the printed answer then holds no more elements, attributes or
/// nesting than any answer that parsed to `page`.
fn print(page: &Page<DatastoreMounts>) -> String {
    let mut objects = String::new();
    for datastore in &page.items {
        objects.push_str("<objects>");
        objects.push_str(&moref("obj", &datastore.datastore));
        if !datastore.name.is_empty() {
            objects.push_str(&format!(
                "<propSet><name>name</name><val>{}</val></propSet>",
                soap::escape(&datastore.name)
            ));
        }
        if !datastore.hosts.is_empty() {
            objects.push_str("<propSet><name>host</name><val>");
            for host in &datastore.hosts {
                objects.push_str(&format!("<DatastoreHostMount>{}</DatastoreHostMount>", moref("key", host)));
            }
            objects.push_str("</val></propSet>");
        }
        objects.push_str("</objects>");
    }
    let token = page
        .token
        .as_deref()
        .map(|t| format!("<token>{}</token>", soap::escape(t)))
        .unwrap_or_default();
    format!(
        "<Envelope><Body><RetrievePropertiesExResponse><returnval>{token}{objects}</returnval>\
         </RetrievePropertiesExResponse></Body></Envelope>"
    )
}

fuzz_target!(|data: &[u8]| {
    let _ = tagging::parse_attached_tags(data);
    let _ = tagging::parse_tag(data);
    let _ = tagging::parse_category_name(data);
    let _ = tagging::parse_session(data);
    let _ = tagging::error_text(data);
    let Ok(xml) = std::str::from_utf8(data) else {
        return;
    };
    let _ = soap::parse_ok(xml);
    let _ = soap::parse_service_content(xml);
    let _ = soap::parse_entities(xml);
    let _ = soap::parse_vstorage_datastore(xml);
    let Ok(page) = soap::parse_datastores(xml) else {
        return;
    };
    let printed = print(&page);
    match soap::parse_datastores(&printed) {
        Ok(again) => assert_eq!(again, page, "printed as {printed}"),
        Err(Parsed::Garbage(reason)) if printed.len() > soap::MAX_ANSWER_BYTES => {
            assert!(reason.contains("bytes (the cap per answer)"), "{reason}");
        }
        Err(error) => panic!("the printed page does not parse: {error:?}\nprinted as {printed}"),
    }
});
