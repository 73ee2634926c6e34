//! `review -f FILE`: PersistentVolumes (YAML or JSON, several documents, a `v1 List`)
//! and AdmissionReviews reviewed as CREATEs through the server's code, answered as an
//! AdmissionReview (`-o review`), the PV as stored (`-o pv`) or what was added
//! (`-o diff`); input errors name the field path. End to end through the built binary.

mod common;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use common::*;
use serde_json::{Value, json};

fn files_dir() -> PathBuf {
    data_dir().join("files")
}

fn file(name: &str) -> String {
    files_dir().join(name).to_str().expect("a UTF-8 path").to_owned()
}

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pv-topology-webhook"))
        .args(args)
        .env_remove("PV_TOPOLOGY_WEBHOOK_RULES")
        .env_remove("PV_TOPOLOGY_WEBHOOK_FILE")
        .env_remove("PV_TOPOLOGY_WEBHOOK_OUTPUT")
        .env_remove("PV_TOPOLOGY_WEBHOOK_VALIDATE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    // The binary may exit before reading stdin (a file given): ignore a broken pipe.
    let _ = child.stdin.take().expect("stdin piped").write_all(stdin);
    child.wait_with_output().expect("the binary ends")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("UTF-8 stdout")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("UTF-8 stderr")
}

fn assert_exit(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(output),
        stderr(output)
    );
}

/// One line on stderr, exit 1, nothing on stdout, naming each of `needles`.
fn assert_one_line_error(output: &Output, needles: &[&str]) {
    assert_exit(output, 1);
    assert!(output.stdout.is_empty(), "{}", stdout(output));
    let message = stderr(output);
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(message.starts_with("pv-topology-webhook: "), "{message}");
    for needle in needles {
        assert!(message.contains(needle), "{message:?} does not name {needle:?}");
    }
}

/// The AdmissionReviews of `-o review`, one per line.
fn answers(output: &Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is one AdmissionReview"))
        .collect()
}

/// The YAML documents of `-o pv`.
fn yaml_documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|document| serde::Deserialize::deserialize(document).expect("a YAML document"))
        .collect()
}

fn gce_labels() -> Value {
    json!({"topology.kubernetes.io/zone": "us-central1-a", "topology.kubernetes.io/region": "us-central1"})
}

fn gce_affinity() -> Value {
    json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "topology.gke.io/zone", "operator": "In", "values": ["us-central1-a"]}
    ]}]}})
}

#[test]
fn a_yaml_pv_is_shown_as_a_diff_by_default() {
    let output = run(&["review", "-f", &file("pd-zonal.yaml")], b"");
    assert_exit(&output, 0);
    assert_eq!(
        stdout(&output),
        "PersistentVolume pd-zonal: admitted, labeled (source: builtin)\n\
         \x20 + label topology.kubernetes.io/region=us-central1\n\
         \x20 + label topology.kubernetes.io/zone=us-central1-a\n\
         \x20 + nodeAffinity term 0: topology.gke.io/zone In (us-central1-a)\n"
    );
    assert!(output.stderr.is_empty(), "{}", stderr(&output));
    // The same, named explicitly, and from stdin with `-f -`.
    let explicit = run(&["review", "--file", &file("pd-zonal.yaml"), "-o", "diff"], b"");
    assert_eq!(explicit.stdout, output.stdout);
    let text = std::fs::read(files_dir().join("pd-zonal.yaml")).expect("the fixture");
    let piped = run(&["review", "-f", "-"], &text);
    assert_eq!(piped.stdout, output.stdout, "{}", stderr(&piped));
}

#[test]
fn output_pv_is_the_stored_pv_in_the_input_format() {
    let output = run(&["review", "-f", &file("pd-zonal.yaml"), "-o", "pv"], b"");
    assert_exit(&output, 0);
    let documents = yaml_documents(&stdout(&output));
    assert_eq!(documents.len(), 1, "{}", stdout(&output));
    let pv = &documents[0];
    let mut labels = gce_labels();
    labels["app"] = json!("db");
    assert_eq!(pv["metadata"]["labels"], labels, "added to the labels it had");
    assert_eq!(pv["spec"]["nodeAffinity"], gce_affinity());
    // What the webhook does not touch is kept, whole.
    assert_eq!(pv["metadata"]["name"], "pd-zonal");
    assert_eq!(pv["spec"]["capacity"], json!({"storage": "10Gi"}));
    assert_eq!(pv["spec"]["csi"]["fsType"], "ext4");
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");

    // JSON in, JSON out: a v1 List's items, one object each.
    let rules = data_dir().join("rules.yaml");
    let output = run(
        &[
            "review",
            "-f",
            &file("list.json"),
            "-o",
            "pv",
            "--rules",
            rules.to_str().expect("UTF-8"),
        ],
        b"",
    );
    assert_exit(&output, 0);
    let pvs: Vec<Value> = serde_json::Deserializer::from_str(&stdout(&output))
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("JSON objects");
    assert_eq!(pvs.len(), 2, "{}", stdout(&output));
    assert_eq!(pvs[0]["metadata"]["name"], "onprem");
    assert_eq!(
        pvs[0]["metadata"]["labels"],
        json!({"topology.kubernetes.io/zone": "dc1-rack2", "topology.kubernetes.io/region": "dc1"})
    );
    assert_eq!(pvs[1]["metadata"]["labels"], gce_labels());
    assert_eq!(pvs[1]["spec"]["nodeAffinity"], gce_affinity());
}

#[test]
fn output_review_answers_each_pv_as_a_create() {
    let output = run(&["review", "-f", &file("several.yaml"), "-o", "review"], b"");
    assert_exit(&output, 0);
    let answers = answers(&output);
    // Three PVs; the claim is not sent to the webhook.
    assert_eq!(answers.len(), 3, "{}", stdout(&output));
    let outcomes: Vec<&Value> = answers
        .iter()
        .map(|answer| &answer["response"]["auditAnnotations"]["outcome"])
        .collect();
    assert_eq!(outcomes, [&json!("labeled"), &json!("labeled"), &json!("unrecognized")]);
    for answer in &answers {
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(answer["kind"], "AdmissionReview");
        assert_eq!(answer["response"]["allowed"], true);
        assert!(answer["response"]["uid"].as_str().is_some_and(|uid| !uid.is_empty()));
    }
    assert_eq!(answers[0]["response"]["patchType"], "JSONPatch");
    assert_eq!(answers[2]["response"].get("patch"), None);
}

#[test]
fn several_documents_give_one_block_each() {
    let output = run(&["review", "-f", &file("several.yaml")], b"");
    assert_exit(&output, 0);
    assert_eq!(
        stdout(&output),
        "PersistentVolume pd-zonal: admitted, labeled (source: builtin)\n\
         \x20 + label topology.kubernetes.io/region=us-central1\n\
         \x20 + label topology.kubernetes.io/zone=us-central1-a\n\
         \x20 + nodeAffinity term 0: topology.gke.io/zone In (us-central1-a)\n\
         \n\
         PersistentVolume ebs-lax: admitted, labeled (source: builtin)\n\
         \x20 + label topology.kubernetes.io/region=us-west-2\n\
         \x20 + label topology.kubernetes.io/zone=us-west-2-lax-1a\n\
         \x20 + nodeAffinity term 0: topology.kubernetes.io/zone In (us-west-2-lax-1a), topology.kubernetes.io/region In (us-west-2)\n\
         \n\
         PersistentVolumeClaim data: not a PersistentVolume, not sent to the webhook\n\
         \n\
         PersistentVolume nfs: admitted, unrecognized\n"
    );
    // `-o pv` keeps every object, in order: the claim passes through unchanged.
    let output = run(&["review", "-f", &file("several.yaml"), "-o", "pv"], b"");
    assert_exit(&output, 0);
    let documents = yaml_documents(&stdout(&output));
    let kinds: Vec<&Value> = documents.iter().map(|d| &d["kind"]).collect();
    assert_eq!(
        kinds,
        [
            &json!("PersistentVolume"),
            &json!("PersistentVolume"),
            &json!("PersistentVolumeClaim"),
            &json!("PersistentVolume")
        ]
    );
    assert_eq!(documents[0]["metadata"]["labels"], gce_labels());
    assert_eq!(
        documents[1]["metadata"]["labels"]["topology.kubernetes.io/zone"],
        "us-west-2-lax-1a"
    );
    assert_eq!(documents[2]["spec"]["volumeName"], "pd-zonal");
    assert_eq!(documents[3]["metadata"].get("labels"), None, "nfs is left alone");
}

#[tokio::test]
async fn an_admission_review_file_is_answered_as_on_stdin() {
    let body = fixture("gce-pd-csi-zonal.json");
    let review_path = data_dir().join("gce-pd-csi-zonal.json");
    let review_path = review_path.to_str().expect("UTF-8");
    let from_file = run(&["review", "-f", review_path], b"");
    assert_exit(&from_file, 0);
    // An AdmissionReview's default output is the answer, the library's bytes.
    assert_eq!(from_file.stdout, plain().review(&body).await.expect("answered").body);
    let from_stdin = run(&["review"], &body);
    assert_eq!(from_stdin.stdout, from_file.stdout);
    // A review read from stdin can be shown as a diff, or as the stored PV, too.
    let diff = run(&["review", "-o", "diff"], &body);
    assert_exit(&diff, 0);
    assert!(
        stdout(&diff).starts_with("PersistentVolume pd-zonal: admitted, labeled (source: builtin)\n"),
        "{}",
        stdout(&diff)
    );
    let pv = run(&["review", "-o", "pv"], &body);
    assert_exit(&pv, 0);
    let pv: Value = serde_json::from_slice(&pv.stdout).expect("a JSON review gives a JSON PV");
    assert_eq!(pv["metadata"]["labels"], gce_labels());
    assert_eq!(pv["spec"]["nodeAffinity"], gce_affinity());
}

#[test]
fn a_refused_pv_is_shown_with_its_reason_and_exit_status_2() {
    let output = run(&["review", "--validate", "-f", &file("lying-zone.yaml")], b"");
    assert_exit(&output, 2);
    let text = stdout(&output);
    assert!(
        text.starts_with("PersistentVolume pd-lying: refused, contradicts: "),
        "{text}"
    );
    assert!(text.contains("us-central1-b"), "{text}");
    // `-o pv`: nothing would be stored; the refusal is one line on stderr.
    let output = run(
        &["review", "--validate", "-f", &file("lying-zone.yaml"), "-o", "pv"],
        b"",
    );
    assert_exit(&output, 2);
    assert!(output.stdout.is_empty(), "{}", stdout(&output));
    let message = stderr(&output);
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(
        message.starts_with("pv-topology-webhook: PersistentVolume pd-lying refused: "),
        "{message}"
    );
    // `-o review` answers as the server would, with exit status 0.
    let output = run(
        &["review", "--validate", "-f", &file("lying-zone.yaml"), "-o", "review"],
        b"",
    );
    assert_exit(&output, 0);
    assert_eq!(answers(&output)[0]["response"]["allowed"], false);
}

/// The beta keys the in-tree labeler wrote are judged in labels and nodeAffinity.
#[test]
fn the_legacy_beta_keys_are_judged_by_review_validate() {
    let output = run(&["review", "--validate", "-f", &file("legacy-beta-keys.yaml")], b"");
    assert_exit(&output, 2);
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("PersistentVolume legacy-good: "), "{text}");
    assert!(!lines[0].contains("refused"), "{text}");
    assert!(
        lines[1].starts_with("PersistentVolume legacy-lying: refused, contradicts: "),
        "{text}"
    );
    for says in [
        "label failure-domain.beta.kubernetes.io/zone=\"us-east-1c\", but the disk is in zone us-east-1a",
        "nodeAffinity term 0: failure-domain.beta.kubernetes.io/zone In [\"us-east-1c\"], but the disk is in zone us-east-1a",
    ] {
        assert!(lines[1].contains(says), "{says} not in {text}");
    }
}

#[test]
fn parse_errors_name_the_field_path() {
    let bad = file("bad-handle.yaml");
    for output in [
        run(&["review", "-f", &bad], b""),
        run(&["review", "-f", &bad, "-o", "review"], b""),
    ] {
        assert_one_line_error(
            &output,
            &[
                &bad,
                "spec.csi.volumeHandle",
                "invalid type: integer `5`, expected a string",
            ],
        );
        assert!(!stderr(&output).contains("request.object"), "{}", stderr(&output));
    }
    // In an AdmissionReview the path starts at the review.
    let without_kind = std::fs::read(files_dir().join("review-without-kind.json")).expect("the fixture");
    assert_one_line_error(
        &run(&["review"], &without_kind),
        &["stdin", "request: missing field `kind`"],
    );
    assert_one_line_error(
        &run(&["review", "-f", &file("review-without-kind.json")], b""),
        &["review-without-kind.json", "request: missing field `kind`"],
    );
    let mut bad_group: Value = serde_json::from_slice(&fixture("gce-pd-csi-zonal.json")).expect("JSON");
    bad_group["request"]["resource"]["group"] = json!(7);
    assert_one_line_error(
        &run(&["review"], &serde_json::to_vec(&bad_group).expect("JSON")),
        &["request.resource.group", "invalid type: integer `7`"],
    );
    // With several documents, the document is named too (from 1, empty ones counted).
    let pd_zonal = std::fs::read_to_string(files_dir().join("pd-zonal.yaml")).expect("the fixture");
    let bad_handle = std::fs::read_to_string(files_dir().join("bad-handle.yaml")).expect("the fixture");
    let several = format!("{pd_zonal}---\n{bad_handle}");
    assert_one_line_error(
        &run(&["review", "-f", "-"], several.as_bytes()),
        &["stdin: document 2: spec.csi.volumeHandle: invalid type"],
    );
    let no_kind = format!("{pd_zonal}---\n---\nmetadata: {{name: x}}\n");
    assert_one_line_error(
        &run(&["review", "-f", "-"], no_kind.as_bytes()),
        &["stdin: document 3: it has no `kind`"],
    );
    // A List's item is named by its index.
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "a"}, "spec": {}},
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "b"},
         "spec": {"csi": {"driver": 5, "volumeHandle": "h"}}},
    ]});
    assert_one_line_error(
        &run(&["review", "-f", "-"], &serde_json::to_vec(&list).expect("JSON")),
        &["stdin", "items[1].spec.csi.driver"],
    );
}

/// A review whose request's kind lacks its own `kind`.
fn review_with_kind_without_kind() -> Vec<u8> {
    let mut review: Value = serde_json::from_slice(&fixture("gce-pd-csi-zonal.json")).expect("JSON");
    review["request"]["kind"] = json!({"group": "", "version": "v1"});
    serde_json::to_vec(&review).expect("JSON")
}

#[test]
fn a_missing_field_is_named_under_the_object_that_lacks_it() {
    // serde names the object that lacks the field and the message names the field, once:
    // nothing before it at the top of the PV, the parent's path below.
    let no_metadata = b"apiVersion: v1\nkind: PersistentVolume\nspec: {}\n";
    assert_one_line_error(
        &run(&["review", "-f", "-"], no_metadata),
        &["pv-topology-webhook: stdin: missing field `metadata`"],
    );
    // In a List, under the item's index.
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "a"}, "spec": {}},
        {"apiVersion": "v1", "kind": "PersistentVolume", "spec": {}},
    ]});
    assert_one_line_error(
        &run(&["review", "-f", "-"], &serde_json::to_vec(&list).expect("JSON")),
        &["pv-topology-webhook: stdin: items[1]: missing field `metadata`"],
    );
    // In an AdmissionReview, the path starts at the review: `request` lacks `kind`,
    // and below it `request.kind` lacks its own.
    let without_kind = std::fs::read(files_dir().join("review-without-kind.json")).expect("the fixture");
    assert_one_line_error(&run(&["review"], &without_kind), &[": request: missing field `kind`"]);
    assert_one_line_error(
        &run(&["review", "-f", "-"], &review_with_kind_without_kind()),
        &[": request.kind: missing field `kind`"],
    );
}

#[tokio::test]
async fn the_server_names_a_missing_field_under_the_object_that_lacks_it() {
    // The unreadable object's warning: the object itself lacks metadata.
    let mut body: Value = serde_json::from_slice(&create_review(json!({"metadata": {"name": "x"}}))).expect("JSON");
    body["request"]["object"] = json!({"spec": {}});
    let answer = review(&plain(), &serde_json::to_vec(&body).expect("JSON")).await;
    assert_eq!(answer.outcome(), "unreadable");
    assert!(
        answer.warnings()[0].contains("(request.object: missing field `metadata`)"),
        "{:?}",
        answer.warnings()
    );
    // The refusal of a review that cannot be answered.
    let Err(error) = plain().review(&review_with_kind_without_kind()).await else {
        panic!("a request kind without its kind was answered");
    };
    assert!(
        error.to_string().ends_with(": request.kind: missing field `kind`"),
        "{error}"
    );
}

#[tokio::test]
async fn the_server_names_the_field_of_an_unreadable_object() {
    // The answer's warning (the server's and `-o review`'s) names the field too.
    let mut body: Value = serde_json::from_slice(&create_review(json!({"metadata": {"name": "x"}}))).expect("JSON");
    body["request"]["object"]["spec"] = json!({"csi": {"driver": "d", "volumeHandle": 5}});
    let answer = review(&plain(), &serde_json::to_vec(&body).expect("JSON")).await;
    assert_eq!(answer.outcome(), "unreadable");
    assert!(
        answer.warnings()[0].contains("request.object.spec.csi.volumeHandle: invalid type: integer `5`"),
        "{:?}",
        answer.warnings()
    );
}

#[test]
fn bad_inputs_are_one_line_errors() {
    // A PV on stdin without -f: the hint says how to review it.
    let pv = std::fs::read(files_dir().join("pd-zonal.yaml")).expect("the fixture");
    assert_one_line_error(&run(&["review"], &pv), &["stdin", "-f -"]);
    assert_one_line_error(
        &run(&["review", "-f", "/nonexistent/pv.yaml"], b""),
        &["/nonexistent/pv.yaml"],
    );
    assert_one_line_error(
        &run(&["review", "-f", "-"], b"apiVersion: v1\nkind: [unclosed\n"),
        &["stdin", "line 2"],
    );
    assert_one_line_error(
        &run(&["review", "-f", "-"], b"metadata:\n  name: x\n"),
        &["stdin", "kind"],
    );
    assert_one_line_error(
        &run(&["review", "-f", "-"], b"apiVersion: v2\nkind: PersistentVolume\n"),
        &["stdin", "apiVersion", "v1"],
    );
    assert_one_line_error(&run(&["review", "-f", "-"], b"---\n"), &["stdin", "no object in it"]);
    // The file's bound, 32 MiB, stated in docs/webhook.md.
    let over = vec![b' '; pv_topology_webhook::review::command::MAX_FILE_BYTES + 1];
    assert_one_line_error(
        &run(&["review", "-f", "-"], &over),
        &["stdin", "larger than 33554432 bytes"],
    );
    let output = run(&["review", "-o", "yaml"], b"");
    assert_ne!(output.status.code(), Some(0));
    assert!(stderr(&output).contains("--output"), "{}", stderr(&output));
}
