//! The gcfg (git-config) parser of cloud provider configs
//! (`cloud_access::gcfg::Gcfg::parse`), with each section's accessors.
//!
//! Properties: every key a section lists can be read (`get`, `get_all`,
//! `line_of`), and its line is within the text.
#![no_main]

use cloud_access::gcfg::Gcfg;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = Gcfg::parse(text) else {
        return;
    };
    let lines = text.lines().count().max(1);
    for section in config.all() {
        assert!(
            section.line >= 1 && section.line <= lines,
            "section line {}",
            section.line
        );
        for key in section.keys() {
            assert!(section.get_all(key).count() >= 1, "listed key {key:?} has no value");
            let _ = section.get(key);
            let _ = section.get_bool(key);
            let line = section.line_of(key).expect("a listed key has a line");
            assert!(line >= section.line && line <= lines, "key {key:?} on line {line}");
        }
        let _ = config.sections(&section.name).count();
        let _ = config.section(&section.name);
    }
});
