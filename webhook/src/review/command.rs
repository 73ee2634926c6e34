//! The `review` subcommand: its input read as PersistentVolumes (each put in the
//! AdmissionReview of its CREATE, [`super::create_review`]) or AdmissionReviews, each
//! answered by [`Reviewer::answer_request`], the server's code, and printed as the
//! answering AdmissionReview, the PV as it will be stored, or what the webhook added.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

use base64::Engine as _;
use kube::core::admission::AdmissionRequest;
use serde::Deserialize;
use serde_json::Value;
use thiserror::Error;

use super::{Check, MAX_REVIEW_BYTES, ReviewError, ReviewObject, Reviewer, create_review, parse_review};
use crate::cli::{ReviewArgs, ReviewOutput};

/// Largest `--file` read: 32 MiB, 20,000 PersistentVolumes as `kubectl get pv -o yaml`
/// writes them (1.6 KB each). Each PV's review must also fit [`MAX_REVIEW_BYTES`].
pub const MAX_FILE_BYTES: usize = 32 * 1024 * 1024;

/// Why `review` could not answer.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CommandError {
    /// The input (`stdin` or the file, as `input` says), or a document in it.
    #[error("{input}: {message}")]
    Input { input: String, message: String },
    #[error("cannot write stdout: {0}")]
    Stdout(#[source] std::io::Error),
    #[error("cannot write stderr: {0}")]
    Stderr(#[source] std::io::Error),
}

/// Runs `review`: reads every input first (an unreadable PV stops the command before
/// anything is printed), then answers and prints each in turn. Exit status 2 when `-o pv` or
/// `-o diff` shows a refused PV, else 0.
pub async fn run(
    args: &ReviewArgs,
    reviewer: &Reviewer,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<ExitCode, CommandError> {
    let input = match &args.file {
        None => Input::review_from_stdin(stdin)?,
        Some(path) => Input::file(path, stdin)?,
    };
    let output = args
        .output
        .unwrap_or(if input.items.iter().all(|item| item.is_review()) {
            ReviewOutput::Review
        } else {
            ReviewOutput::Diff
        });
    let check = if args.validate { Check::Validate } else { Check::Mutate };
    // Every request read before any is answered, then read again to be answered: a
    // request holds a PersistentVolume struct of kilobytes, too many to keep 10,000.
    for index in 0..input.items.len() {
        input.request(index, output)?;
    }
    let mut printer = Printer {
        output,
        format: input.format,
        stdout,
        stderr,
        printed: 0,
        refused: false,
    };
    for (index, item) in input.items.iter().enumerate() {
        match input.request(index, output)? {
            None => printer.other(&item.object())?,
            Some(request) => {
                // Read again only to be shown: the input is held as JSON text.
                let object = match output {
                    ReviewOutput::Review => Value::Null,
                    _ => item.object(),
                };
                let label = label(&request, &object);
                let answer = reviewer
                    .answer_request(request, check)
                    .await
                    .map_err(|error| input.error(item.document, error))?;
                printer.answer(&label, &object, &answer.body, &input, item.document)?;
            }
        }
    }
    printer.stdout.flush().map_err(CommandError::Stdout)?;
    Ok(if printer.refused && output != ReviewOutput::Review {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// A request as the server reads it.
type Request = AdmissionRequest<ReviewObject>;

/// How the input was written, and so how `-o pv` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Yaml,
}

/// The input, read and sorted into what is reviewed.
struct Input {
    /// `stdin` or the file's path, as messages name it.
    name: String,
    format: Format,
    /// How many documents the input has: messages name one only if there are several.
    documents: usize,
    items: Vec<Item>,
}

struct Item {
    /// Which document it is in, from 1.
    document: usize,
    what: What,
    /// The PV or other object as compact JSON (much smaller than its `Value`); empty
    /// for an AdmissionReview, whose object is in its body.
    object: Vec<u8>,
}

enum What {
    /// An AdmissionReview, answered as it is.
    Review(Vec<u8>),
    /// A PersistentVolume, reviewed as a CREATE; `path` is where it is in its document
    /// (`items[3]` in a List, empty for a document that is the PV), for messages.
    Pv { path: String },
    /// Another object: not sent to the webhook (`-o pv` passes it through).
    Other,
}

impl Item {
    fn is_review(&self) -> bool {
        matches!(self.what, What::Review(_))
    }

    /// The PV (of an AdmissionReview: its request's object, if any), or the other object.
    fn object(&self) -> Value {
        match &self.what {
            What::Review(body) => serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|mut review| review.pointer_mut("/request/object").map(Value::take))
                .unwrap_or(Value::Null),
            What::Pv { .. } | What::Other => serde_json::from_slice(&self.object).unwrap_or(Value::Null),
        }
    }
}

/// The objects a document may be, for messages.
const WANTED: &str = "want a v1 PersistentVolume, a v1 List of them, or an admission.k8s.io/v1 AdmissionReview";

impl Input {
    /// Without `--file`: one AdmissionReview (JSON) on stdin, as the server reads a body.
    fn review_from_stdin(stdin: &mut dyn Read) -> Result<Self, CommandError> {
        let name = "stdin".to_owned();
        // Past the limit, parse_review refuses it as the server does.
        let body = read_at_most(stdin, MAX_REVIEW_BYTES).map_err(|message| CommandError::Input {
            input: name.clone(),
            message,
        })?;
        Ok(Self {
            name,
            format: Format::Json,
            documents: 1,
            items: vec![Item {
                document: 1,
                what: What::Review(body),
                object: Vec::new(),
            }],
        })
    }

    /// `--file PATH` (`-`: stdin): YAML or JSON documents.
    fn file(path: &Path, stdin: &mut dyn Read) -> Result<Self, CommandError> {
        let from_stdin = path == Path::new("-");
        let name = if from_stdin {
            "stdin".to_owned()
        } else {
            path.display().to_string()
        };
        let error = |message: String| CommandError::Input {
            input: name.clone(),
            message,
        };
        let bytes = if from_stdin {
            read_at_most(stdin, MAX_FILE_BYTES)
        } else {
            std::fs::File::open(path)
                .map_err(|e| format!("cannot read it: {e}"))
                .and_then(|mut file| read_at_most(&mut file, MAX_FILE_BYTES))
        }
        .map_err(error)?;
        if bytes.len() > MAX_FILE_BYTES {
            return Err(error(format!("it is larger than {MAX_FILE_BYTES} bytes")));
        }
        let mut items = Vec::new();
        let (format, count) =
            each_document(&bytes, |number, document| sort(number, document, &mut items)).map_err(error)?;
        if items.is_empty() {
            return Err(error(format!("no object in it: {WANTED}")));
        }
        Ok(Self {
            name,
            format,
            documents: count,
            items,
        })
    }

    /// A message about `document`, naming it if there are several.
    fn error(&self, document: usize, message: impl std::fmt::Display) -> CommandError {
        CommandError::Input {
            input: self.name.clone(),
            message: if self.documents > 1 {
                format!("document {document}: {message}")
            } else {
                message.to_string()
            },
        }
    }

    /// The request of the `index`th item (none for an object not sent to the webhook),
    /// read as the server reads it. A PV the webhook cannot read is an error, named by
    /// its field path in the input; so is an AdmissionReview's object, unless its answer
    /// (`-o review`) is what is asked for.
    fn request(&self, index: usize, output: ReviewOutput) -> Result<Option<Request>, CommandError> {
        let item = &self.items[index];
        let request = match &item.what {
            What::Other => return Ok(None),
            What::Review(body) => {
                let request = parse_review(body).map_err(|error| self.review_error(item.document, error))?;
                if output != ReviewOutput::Review
                    && let Some(Err(reason)) = request.object.as_ref().map(ReviewObject::persistent_volume)
                {
                    return Err(self.error(item.document, reason));
                }
                request
            }
            What::Pv { path } => {
                let uid = format!("00000000-0000-0000-0000-{:012}", index + 1);
                let body = create_review(&item.object(), &uid).map_err(|error| self.error(item.document, error))?;
                let request = parse_review(&body).map_err(|error| self.error(item.document, error))?;
                if let Some(Err(reason)) = request.object.as_ref().map(ReviewObject::persistent_volume) {
                    return Err(self.error(item.document, in_input(path, reason)));
                }
                request
            }
        };
        Ok(Some(request))
    }

    /// An AdmissionReview that cannot be answered; on stdin without `--file`, with how to
    /// review a PersistentVolume instead.
    fn review_error(&self, document: usize, error: ReviewError) -> CommandError {
        #[derive(Deserialize)]
        struct KindOnly {
            kind: Option<String>,
        }
        let hint = self.name == "stdin"
            && self.format == Format::Json
            && matches!(self.items.first(), Some(Item { what: What::Review(body), .. })
                if serde_json::from_slice::<KindOnly>(body).ok().and_then(|k| k.kind).as_deref() != Some("AdmissionReview"));
        if hint {
            self.error(
                document,
                format!("{error}; to review a PersistentVolume, give it with -f FILE (-f - for stdin)"),
            )
        } else {
            self.error(document, error)
        }
    }
}

/// At most `limit` bytes of `reader` and one more, which tells "too large" from
/// "exactly the limit".
fn read_at_most(reader: &mut dyn Read, limit: usize) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    Ok(bytes)
}

/// Gives each document of `bytes` in turn to `each`, with its number from 1: JSON (one
/// or several values) when it starts with `{` or `[`, else YAML (`---`-separated
/// documents; JSON is YAML too). One at a time: only the items sorted out of them are
/// kept. Returns the format and how many documents there are.
fn each_document(
    bytes: &[u8],
    each: impl FnMut(usize, Value) -> Result<(), String>,
) -> Result<(Format, usize), String> {
    let first = bytes.iter().find(|byte| !byte.is_ascii_whitespace());
    if matches!(first, Some(b'{' | b'[')) {
        let documents = serde_json::Deserializer::from_slice(bytes)
            .into_iter::<Value>()
            .map(|document| document.map_err(|e| format!("not JSON: {e}")));
        return Ok((Format::Json, walk(documents, each)?));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let documents = serde_yaml_ng::Deserializer::from_str(text)
        .map(|document| Value::deserialize(document).map_err(|e| format!("not YAML: {e}")));
    Ok((Format::Yaml, walk(documents, each)?))
}

/// Gives each document to `each`; its error names the document if there are several.
fn walk(
    documents: impl Iterator<Item = Result<Value, String>>,
    mut each: impl FnMut(usize, Value) -> Result<(), String>,
) -> Result<usize, String> {
    let mut documents = documents.peekable();
    let mut count = 0;
    while let Some(document) = documents.next() {
        count += 1;
        each(count, document?).map_err(|message| {
            if count > 1 || documents.peek().is_some() {
                format!("document {count}: {message}")
            } else {
                message
            }
        })?;
    }
    Ok(count)
}

/// Sorts one document into items: a PV, each PV of a List, an AdmissionReview, another
/// object; an empty document is none.
fn sort(document: usize, value: Value, items: &mut Vec<Item>) -> Result<(), String> {
    if value.is_null() {
        return Ok(());
    }
    if !value.is_object() {
        return Err(format!("not an object: {WANTED}"));
    }
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
    let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let v1 = |what: &str| {
        if api_version == "v1" {
            Ok(())
        } else {
            Err(format!("apiVersion {api_version:?} of a {what}: want \"v1\""))
        }
    };
    match kind.as_str() {
        "" => return Err(format!("it has no `kind`: {WANTED}")),
        "AdmissionReview" => {
            items.push(Item {
                document,
                what: What::Review(json(&value)?),
                object: Vec::new(),
            });
        }
        "PersistentVolume" => {
            v1("PersistentVolume")?;
            items.push(Item {
                document,
                what: What::Pv { path: String::new() },
                object: json(&value)?,
            });
        }
        "List" | "PersistentVolumeList" => {
            v1(&kind)?;
            let Value::Object(mut list) = value else {
                return Ok(());
            };
            let list_items = match list.remove("items") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(list_items)) => list_items,
                Some(_) => return Err("items: not a list".to_owned()),
            };
            for (index, item) in list_items.into_iter().enumerate() {
                // A PersistentVolumeList's items carry no kind of their own.
                let item_kind = match item.get("kind") {
                    None if kind == "PersistentVolumeList" => "PersistentVolume",
                    other => other.and_then(Value::as_str).unwrap_or_default(),
                };
                let what = match item_kind {
                    _ if !item.is_object() => return Err(format!("items[{index}]: not an object")),
                    "PersistentVolume" => {
                        if let Some(version) = item.get("apiVersion")
                            && version != "v1"
                        {
                            return Err(format!("items[{index}].apiVersion {version}: want \"v1\""));
                        }
                        What::Pv {
                            path: format!("items[{index}]"),
                        }
                    }
                    "" => return Err(format!("items[{index}]: it has no `kind`")),
                    _ => What::Other,
                };
                items.push(Item {
                    document,
                    what,
                    object: json(&item)?,
                });
            }
        }
        _ => items.push(Item {
            document,
            what: What::Other,
            object: json(&value)?,
        }),
    }
    Ok(())
}

/// `reason`, naming a field of the review built for a PV (`request.object.spec.csi:
/// ...`, or `request.object: ...` for a field the PV lacks), made to name it where the
/// PV is in the input: `path` (`items[1]`, or empty for a document that is the PV).
fn in_input(path: &str, reason: &str) -> String {
    let Some(rest) = reason.strip_prefix("request.object") else {
        return reason.to_owned();
    };
    match (path, rest.strip_prefix('.'), rest.strip_prefix(": ")) {
        ("", Some(below), _) | ("", _, Some(below)) => below.to_owned(),
        (_, Some(below), _) => format!("{path}.{below}"),
        (_, _, Some(message)) => format!("{path}: {message}"),
        _ => reason.to_owned(),
    }
}

fn json(value: &Value) -> Result<Vec<u8>, String> {
    serde_json::to_vec(value).map_err(|e| e.to_string())
}

/// `PersistentVolume NAME`, as the request names its object.
fn label(request: &Request, object: &Value) -> String {
    let name = match request.name.as_str() {
        "" => object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        name => name,
    };
    format!("{} {name}", request.kind.kind)
}

/// The answer's fields `-o pv` and `-o diff` show.
#[derive(Deserialize)]
struct AnswerView {
    response: ResponseView,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResponseView {
    allowed: bool,
    #[serde(default)]
    audit_annotations: BTreeMap<String, String>,
    #[serde(default)]
    patch: Option<String>,
    #[serde(default)]
    status: StatusView,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Deserialize, Default)]
struct StatusView {
    #[serde(default)]
    message: String,
}

struct Printer<'a> {
    output: ReviewOutput,
    format: Format,
    stdout: &'a mut dyn Write,
    stderr: &'a mut dyn Write,
    /// Objects or blocks printed so far, to separate the next.
    printed: usize,
    refused: bool,
}

impl Printer<'_> {
    /// An object that is not sent to the webhook.
    fn other(&mut self, object: &Value) -> Result<(), CommandError> {
        match self.output {
            ReviewOutput::Review => Ok(()),
            ReviewOutput::Pv => self.object(object),
            ReviewOutput::Diff => {
                let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
                let name = object
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                self.block(&format!(
                    "{kind} {name}: not a PersistentVolume, not sent to the webhook\n"
                ))
            }
        }
    }

    /// The answer `body` to the review of `object`.
    fn answer(
        &mut self,
        label: &str,
        object: &Value,
        body: &[u8],
        input: &Input,
        document: usize,
    ) -> Result<(), CommandError> {
        if self.output == ReviewOutput::Review {
            return self.stdout.write_all(body).map_err(CommandError::Stdout);
        }
        let response = serde_json::from_slice::<AnswerView>(body)
            .map_err(|e| input.error(document, format!("cannot read the webhook's answer: {e}")))?
            .response;
        let mut stored = object.clone();
        if let Some(patch) = &response.patch {
            apply(&mut stored, patch)
                .map_err(|e| input.error(document, format!("cannot apply the webhook's patch: {e}")))?;
        }
        self.refused |= !response.allowed;
        match self.output {
            ReviewOutput::Pv => {
                let mut notes = String::new();
                if !response.allowed {
                    notes.push_str(&format!(
                        "pv-topology-webhook: {label} refused: {}\n",
                        response.status.message
                    ));
                }
                for warning in &response.warnings {
                    notes.push_str(&format!("pv-topology-webhook: {label}: warning: {warning}\n"));
                }
                self.stderr.write_all(notes.as_bytes()).map_err(CommandError::Stderr)?;
                if response.allowed && !stored.is_null() {
                    self.object(&stored)?;
                }
                Ok(())
            }
            _ => self.block(&diff(label, &response, object, &stored)),
        }
    }

    fn object(&mut self, object: &Value) -> Result<(), CommandError> {
        let text = match self.format {
            Format::Json => serde_json::to_string_pretty(object)
                .map(|text| text + "\n")
                .map_err(|e| e.to_string()),
            Format::Yaml => serde_yaml_ng::to_string(object)
                .map(|text| if self.printed > 0 { format!("---\n{text}") } else { text })
                .map_err(|e| e.to_string()),
        };
        let text = text.map_err(|e| CommandError::Stdout(std::io::Error::other(e)))?;
        self.printed += 1;
        self.stdout.write_all(text.as_bytes()).map_err(CommandError::Stdout)
    }

    fn block(&mut self, text: &str) -> Result<(), CommandError> {
        if self.printed > 0 {
            self.stdout.write_all(b"\n").map_err(CommandError::Stdout)?;
        }
        self.printed += 1;
        self.stdout.write_all(text.as_bytes()).map_err(CommandError::Stdout)
    }
}

/// Applies the answer's base64 JSON Patch to `object`.
fn apply(object: &mut Value, patch: &str) -> Result<(), String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .map_err(|e| e.to_string())?;
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    json_patch::patch(object, &patch.0).map_err(|e| e.to_string())
}

/// `-o diff`'s block for one PV: the verdict, then the labels (`+` added, `~` changed)
/// and nodeAffinity terms (`-` as they were, `+` as they are) the patch changed, then
/// the warnings.
fn diff(label: &str, response: &ResponseView, before: &Value, after: &Value) -> String {
    let annotation = |key: &str| response.audit_annotations.get(key).map(String::as_str);
    let outcome = annotation(crate::answer::OUTCOME_AUDIT_KEY).unwrap_or("answered");
    let mut text = if response.allowed {
        match annotation(crate::answer::SOURCE_AUDIT_KEY) {
            Some(source) => format!("{label}: admitted, {outcome} (source: {source})\n"),
            None => format!("{label}: admitted, {outcome}\n"),
        }
    } else {
        format!("{label}: refused, {outcome}: {}\n", response.status.message)
    };
    let (old, new) = (labels(before), labels(after));
    for (key, value) in &new {
        match old.get(key) {
            None => text.push_str(&format!("  + label {key}={value}\n")),
            Some(was) if was != value => text.push_str(&format!("  ~ label {key}={was} -> {value}\n")),
            Some(_) => {}
        }
    }
    let (old, new) = (terms(before), terms(after));
    for index in 0..old.len().max(new.len()) {
        let (was, is) = (old.get(index), new.get(index));
        if was == is {
            continue;
        }
        if let Some(was) = was {
            text.push_str(&format!("  - nodeAffinity term {index}: {was}\n"));
        }
        if let Some(is) = is {
            text.push_str(&format!("  + nodeAffinity term {index}: {is}\n"));
        }
    }
    for warning in &response.warnings {
        text.push_str(&format!("  warning: {warning}\n"));
    }
    text
}

/// The PV's labels, as text.
fn labels(pv: &Value) -> BTreeMap<&str, String> {
    pv.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| labels.iter().map(|(key, value)| (key.as_str(), text(value))).collect())
        .unwrap_or_default()
}

/// The PV's required nodeSelectorTerms, each as `key In (a, b), …`.
fn terms(pv: &Value) -> Vec<String> {
    let Some(terms) = pv
        .pointer("/spec/nodeAffinity/required/nodeSelectorTerms")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    terms
        .iter()
        .map(|term| {
            let mut requirements = Vec::new();
            for (field, prefix) in [("matchExpressions", ""), ("matchFields", "field ")] {
                for requirement in term.get(field).and_then(Value::as_array).into_iter().flatten() {
                    let part = |name: &str| requirement.get(name).map(text).unwrap_or_default();
                    let values: Vec<String> = requirement
                        .get("values")
                        .and_then(Value::as_array)
                        .map(|values| values.iter().map(text).collect())
                        .unwrap_or_default();
                    let mut line = format!("{prefix}{} {}", part("key"), part("operator"));
                    if !values.is_empty() {
                        line.push_str(&format!(" ({})", values.join(", ")));
                    }
                    requirements.push(line);
                }
            }
            if requirements.is_empty() {
                "(no requirements)".to_owned()
            } else {
                requirements.join(", ")
            }
        })
        .collect()
}

/// A string as it is; anything else as JSON.
fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
