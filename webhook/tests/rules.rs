//! Rules files: loading, validation errors (index + reason), matching order.

mod common;

use std::path::Path;

use common::*;
use pv_topology_webhook::rules::{Rules, RulesError};
use pv_topology_webhook::source::{InTree, VolumeIdentity};
use pv_topology_webhook::topology::Topology;
use serde_json::json;

fn parse(text: &str) -> Result<Rules, RulesError> {
    Rules::parse(Path::new("bad.yaml"), text)
}

const VALID_FIRST: &str = "rules:\n  - driver: ebs.csi.aws.com\n    zones: [a]\n";

#[test]
fn fixture_and_example_rules_load() {
    assert_eq!(fixture_rules().rules().len(), 3);
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rules.yaml");
    let rules = Rules::load(&[example]).unwrap();
    assert!(!rules.rules().is_empty());
}

#[test]
fn bad_rules_name_the_index_and_the_reason() {
    let cases = [
        ("driver: a.b\n    inTree: cinder", "not both"),
        ("zones: [a]", "set `driver`"),
        (
            "inTree: nfs\n    zones: [a]",
            "`inTree: nfs` is not one of awsElasticBlockStore",
        ),
        ("driver: ''\n    zones: [a]", "`driver` is empty"),
        (
            "driver: ebs.csi.aws.com\n    volumeHandle: '(unclosed'",
            "not a valid regular expression",
        ),
        (
            "driver: ebs.csi.aws.com\n    volumeHandle: '(?P<zoen>.*)'",
            "named group `zoen`",
        ),
        (
            "driver: ebs.csi.aws.com\n    volumeHandle: '(?P<zone>.*)'\n    zones: [a]",
            "both a `zone` group",
        ),
        (
            "driver: ebs.csi.aws.com\n    volumeHandle: '(?P<region>.*)'\n    region: r",
            "both a `region` group",
        ),
        (
            "driver: ebs.csi.aws.com\n    volumeHandle: 'vol-.*'",
            "gives no topology",
        ),
        ("driver: ebs.csi.aws.com", "gives no topology"),
        (
            "driver: ebs.csi.aws.com\n    zones: [a/b]",
            "zone \"a/b\" is not a valid label value",
        ),
        ("driver: ebs.csi.aws.com\n    zones: [a__b]", "separates zones"),
        (
            "driver: ebs.csi.aws.com\n    region: ''",
            "region \"\" is not a valid label value",
        ),
        (
            "driver: ebs.csi.aws.com\n    zones: [a]\n    topologyKey: 'Bad Key'",
            "`topologyKey` \"Bad Key\"",
        ),
        (
            "driver: csi.example.com\n    zones: [a]",
            "no built-in topology key; set `topologyKey`",
        ),
        ("driver: ebs.csi.aws.com\n    zone: a", "unknown field `zone`"),
        ("driver: ebs.csi.aws.com\n    zones: a", "invalid type"),
        (
            "inTree: cinder\n    zones: [a]\n    topologyKey: topology.kubernetes.io/region",
            "not topology.kubernetes.io/region",
        ),
    ];
    for (rule, reason) in cases {
        let text = format!("{VALID_FIRST}  - {rule}\n");
        let error = parse(&text).expect_err(rule);
        match &error {
            RulesError::Rule { index, reason: got, .. } => {
                assert_eq!(*index, 1, "{rule}");
                assert!(got.contains(reason), "{rule}: {got}");
            }
            other => panic!("{rule}: {other:?}"),
        }
        let message = error.to_string();
        assert!(message.starts_with("rules file bad.yaml: rules[1]: "), "{message}");
    }
}

#[test]
fn bad_layouts_are_refused() {
    for (text, reason) in [
        ("- driver: a", "expected a mapping"),
        ("other: 1", "no `rules` list"),
        ("rules: {}", "`rules` must be a list"),
        ("rules: []\nextra: 1", "unknown top-level key extra"),
        ("", "expected a mapping"),
    ] {
        let message = parse(text).expect_err(text).to_string();
        assert!(message.starts_with("rules file bad.yaml: "), "{message}");
        assert!(message.contains(reason), "{text:?}: {message}");
    }
    let error = parse("rules: [\n").unwrap_err();
    assert!(matches!(error, RulesError::Yaml { .. }), "{error:?}");
    assert!(error.to_string().contains("not valid YAML"));
    assert!(parse("rules: []").unwrap().rules().is_empty());
}

#[test]
fn unreadable_file_names_the_path() {
    let error = Rules::load(&["/nonexistent/rules.yaml".into()]).unwrap_err();
    assert!(matches!(error, RulesError::Read { .. }));
    assert!(error.to_string().contains("/nonexistent/rules.yaml"), "{error}");
}

#[test]
fn files_are_concatenated_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.yaml");
    let second = dir.path().join("second.yaml");
    std::fs::write(&first, "rules:\n  - inTree: cinder\n    zones: [from-first]\n").unwrap();
    std::fs::write(
        &second,
        "rules:\n  - inTree: cinder\n    zones: [from-second]\n  - inTree: azureDisk\n    region: westus\n",
    )
    .unwrap();
    let rules = Rules::load(&[first.clone(), second.clone()]).unwrap();
    assert_eq!(rules.rules().len(), 3);
    let cinder = rules.resolve(&VolumeIdentity::in_tree(InTree::Cinder, "v")).unwrap();
    assert_eq!(cinder.topology, Topology::new(["from-first"], None));
    assert_eq!(cinder.origin.path, first);
    let azure = rules.resolve(&VolumeIdentity::in_tree(InTree::AzureDisk, "d")).unwrap();
    assert_eq!(azure.origin.path, second);
    assert_eq!(azure.origin.index, 1);
    assert_eq!(
        azure.topology,
        Topology::new(Vec::<String>::new(), Some("westus".into()))
    );

    // An error in a later file names that file.
    std::fs::write(&second, "rules:\n  - inTree: floppy\n").unwrap();
    let message = Rules::load(&[first, second]).unwrap_err().to_string();
    assert!(message.contains("second.yaml: rules[0]: `inTree: floppy`"), "{message}");
}

#[test]
fn named_groups_give_zone_and_region() {
    let rules = rules(
        r#"
rules:
  - driver: csi.example.com
    volumeHandle: '^(?P<region>[a-z]+)(-(?P<zone>[a-z0-9]+))?:'
    topologyKey: example.com/zone
"#,
    );
    let both = rules
        .resolve(&VolumeIdentity::csi("csi.example.com", "east-z1:v"))
        .unwrap();
    assert_eq!(both.topology, Topology::new(["z1"], Some("east".into())));
    assert_eq!(both.topology_key, Some("example.com/zone"));
    // An optional zone group that did not take part leaves only the region.
    let region = rules
        .resolve(&VolumeIdentity::csi("csi.example.com", "east:v"))
        .unwrap();
    assert_eq!(
        region.topology,
        Topology::new(Vec::<String>::new(), Some("east".into()))
    );
    // No match: the rule does not apply.
    assert!(
        rules
            .resolve(&VolumeIdentity::csi("csi.example.com", "EAST:v"))
            .is_none()
    );
    assert!(rules.resolve(&VolumeIdentity::csi("other", "east:v")).is_none());
}

#[tokio::test]
async fn fixed_zones_and_region_without_handle_pattern() {
    let reviewer = reviewer(rules(
        "rules:\n  - driver: disk.csi.azure.com\n    zones: [westeurope-2, westeurope-1]\n    region: westeurope\n",
    ));
    let body = create_review(pv(csi("disk.csi.azure.com", "/subscriptions/s/disks/d"), None));
    let answer = review(&reviewer, &body).await;
    let object = patched_object(&body, &answer);
    assert_eq!(
        object["metadata"]["labels"],
        json!({"topology.kubernetes.io/zone": "westeurope-1__westeurope-2", "topology.kubernetes.io/region": "westeurope"})
    );
    assert_eq!(
        object["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"],
        json!([{"key": "topology.disk.csi.azure.com/zone", "operator": "In", "values": ["westeurope-1", "westeurope-2"]}])
    );
}
