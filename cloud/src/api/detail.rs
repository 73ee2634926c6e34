//! The pieces each cloud's `ErrorDetail` reads and shows an error body
//! with: remote text cleaned and cut, and [`CodeMessage`], the detail of
//! the clouds whose error bodies carry a code and a message.

use std::fmt;

use serde_json::Value;

use crate::logging::clean_text;

/// The most of a cloud's message kept in an error.
pub(crate) const MESSAGE_LIMIT: usize = 500;
/// The most of a code, reason or fault name kept (they are short identifiers).
pub(crate) const CODE_LIMIT: usize = 100;

/// A string `value` of an error body, trimmed, cleaned of `secrets` and cut
/// to `limit`; `None` when it is not a string or is blank.
pub(crate) fn remote_text(value: &Value, secrets: &[&str], limit: usize) -> Option<String> {
    value
        .as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| clean_text(s, secrets, limit))
}

/// A body in none of the cloud's shapes, as the message: its start, cleaned
/// of `secrets`; `None` when it is blank.
pub(crate) fn raw_message(body: &[u8], secrets: &[&str]) -> Option<String> {
    let body = String::from_utf8_lossy(body);
    Some(body.trim())
        .filter(|b| !b.is_empty())
        .map(|b| clean_text(b, secrets, MESSAGE_LIMIT))
}

/// What a cloud said in an error body as a code and a message, cleaned
/// for a log line: the `ErrorDetail` of Azure and OpenStack, whose error
/// bodies carry no more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CodeMessage {
    /// The machine-readable code: Azure's OAuth `error` (`invalid_client`),
    /// ARM's `error.code` (`AuthorizationFailed`) or a registry's
    /// `errors[0].code`; Keystone's `error.title` (`Unauthorized`) or
    /// Cinder's fault name (`itemNotFound`, `badRequest`, `overLimit`).
    pub code: Option<String>,
    /// The message (Entra's starts with its `AADSTS…` number); for a body in
    /// none of the cloud's shapes, the start of the body itself.
    pub message: Option<String>,
}

impl fmt::Display for CodeMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        show_detail(f, self.code.as_deref(), self.message.as_deref())
    }
}

impl CodeMessage {
    /// The strings `code` and `message` of an error body, as [`remote_text`].
    pub(crate) fn read(code: &Value, message: &Value, secrets: &[&str]) -> Self {
        Self {
            code: remote_text(code, secrets, CODE_LIMIT),
            message: remote_text(message, secrets, MESSAGE_LIMIT),
        }
    }

    /// A body in none of the cloud's shapes, as [`raw_message`].
    pub(crate) fn raw(body: &[u8], secrets: &[&str]) -> Self {
        Self {
            code: None,
            message: raw_message(body, secrets),
        }
    }
}

/// Shows a detail as `code: message`, either alone, or a note that the
/// answer had none.
pub(crate) fn show_detail(f: &mut fmt::Formatter<'_>, code: Option<&str>, message: Option<&str>) -> fmt::Result {
    match (code, message) {
        (Some(code), Some(message)) => write!(f, "{code}: {message}"),
        (Some(text), None) | (None, Some(text)) => f.write_str(text),
        (None, None) => f.write_str("no error details in the answer"),
    }
}
