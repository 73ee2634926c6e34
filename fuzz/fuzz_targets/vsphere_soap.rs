//! vSphere answers: every SOAP answer parser of `cloud_access::vsphere::soap`
//! (RetrieveServiceContent, Login, RetrievePropertiesEx/ContinueRetrievePropertiesEx
//! of datastores and ancestors, RetrieveVStorageObject) and every REST answer
//! parser of `vsphere::tagging`, each on the same bytes: no panic.
#![no_main]

use cloud_access::vsphere::{soap, tagging};
use libfuzzer_sys::fuzz_target;

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
    let _ = soap::parse_datastores(xml);
    let _ = soap::parse_entities(xml);
    let _ = soap::parse_vstorage_datastore(xml);
});
