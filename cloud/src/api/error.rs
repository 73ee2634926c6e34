//! The error enum every cloud's calls fail with, declared once:
//! [`cloud_error!`] writes a cloud's enum with the variants every cloud
//! shares, its own variants after them, its accessors and its
//! [`CloudError`](super::CloudError); and the pieces each cloud's
//! `ErrorDetail` reads and shows an error body with.

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

/// Declares a cloud's error enum: `NotFound`, `Api`, `Deadline`,
/// `Transport`, `Garbage`, `TooLarge`, `Client` and `InvalidName` (shown with
/// the `invalid` message), the cloud's `transparent` wrappers of another
/// error (written here: `#[error(transparent)]` must come from the same
/// macro as the derive), then the cloud's own variants; with
/// `is_not_found()`, `status()`, `detail()`, `invalid()` and its
/// [`CloudError`](crate::api::CloudError), an error body read into a
/// `detail` by `read(body, secrets)`.
macro_rules! cloud_error {
    (
        $(#[$meta:meta])*
        pub enum $error:ident {
            cloud: $cloud:literal,
            detail: $detail:ty,
            read: $read:path,
            invalid: $invalid:tt,
            transparent: [$($(#[$tmeta:meta])* $tname:ident($tty:ty)),* $(,)?],
            $($own:tt)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, thiserror::Error)]
        pub enum $error {
            #[doc = concat!($cloud, " answered 404: the resource (or the API path) does not exist.")]
            #[error("{service}: {url} not found (HTTP 404: {detail})")]
            NotFound {
                service: &'static str,
                url: String,
                detail: $detail,
            },
            #[doc = concat!($cloud, " answered with an error status other than 404.")]
            #[error("{service} answered HTTP {status} for {url}: {detail}")]
            Api {
                service: &'static str,
                url: String,
                status: u16,
                detail: $detail,
            },
            /// No answer within the caller's deadline (or the client's timeout),
            /// the wait shown in whole milliseconds as Go writes durations.
            #[error(
                "{service} did not answer {url} within {}",
                $crate::go_duration::format(std::time::Duration::from_millis(after.as_millis() as u64))
            )]
            Deadline {
                service: &'static str,
                url: String,
                after: std::time::Duration,
            },
            #[error("cannot reach {service} at {url}: {reason}")]
            Transport {
                service: &'static str,
                url: String,
                reason: String,
            },
            /// An answer we cannot use (a success without the fields it
            /// needs, a token answer without its token, …).
            #[error("{service} sent an unusable answer for {url}: {problem}")]
            Garbage {
                service: &'static str,
                url: String,
                problem: String,
            },
            #[error("{service}: {source}")]
            TooLarge {
                service: &'static str,
                #[source]
                source: $crate::http::BodyError,
            },
            #[error(transparent)]
            Client(#[from] $crate::http::HttpClientError),
            /// A value that cannot stand where it would be sent (a path
            /// segment, a host); nothing was sent.
            #[error($invalid)]
            InvalidName {
                what: &'static str,
                value: String,
                problem: &'static str,
            },
            $(
                $(#[$tmeta])*
                #[error(transparent)]
                $tname(#[from] $tty),
            )*
            $($own)*
        }

        impl $error {
            #[doc = concat!("True for ", $cloud, "'s 404: the resource does not exist.")]
            pub fn is_not_found(&self) -> bool {
                matches!(self, $error::NotFound { .. })
            }

            #[doc = concat!("The HTTP status ", $cloud, " answered, for API errors.")]
            pub fn status(&self) -> Option<u16> {
                match self {
                    $error::NotFound { .. } => Some(404),
                    $error::Api { status, .. } => Some(*status),
                    _ => None,
                }
            }

            #[doc = concat!($cloud, "'s error details, for API errors.")]
            pub fn detail(&self) -> Option<&$detail> {
                match self {
                    $error::NotFound { detail, .. } | $error::Api { detail, .. } => Some(detail),
                    _ => None,
                }
            }

            /// `value` refused as a `what` for `problem`, shown cleaned and cut.
            pub(crate) fn invalid(what: &'static str, value: &str, problem: &'static str) -> Self {
                $error::InvalidName {
                    what,
                    value: $crate::logging::clean_text(value, &[], 80),
                    problem,
                }
            }
        }

        impl $crate::api::CloudError for $error {
            type Detail = $detail;
            fn detail(body: &[u8], secrets: &[&str]) -> $detail {
                $read(body, secrets)
            }
            fn not_found(service: &'static str, url: String, detail: $detail) -> Self {
                $error::NotFound { service, url, detail }
            }
            fn api(service: &'static str, url: String, status: u16, detail: $detail) -> Self {
                $error::Api {
                    service,
                    url,
                    status,
                    detail,
                }
            }
            fn deadline(service: &'static str, url: String, after: std::time::Duration) -> Self {
                $error::Deadline { service, url, after }
            }
            fn transport(service: &'static str, url: String, reason: String) -> Self {
                $error::Transport { service, url, reason }
            }
            fn garbage(service: &'static str, url: String, problem: String) -> Self {
                $error::Garbage {
                    service,
                    url,
                    problem,
                }
            }
            fn too_large(service: &'static str, source: $crate::http::BodyError) -> Self {
                $error::TooLarge { service, source }
            }
        }
    };
}

pub(crate) use cloud_error;
