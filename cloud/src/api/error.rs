//! The one shape of a failed cloud call, whatever the cloud: [`CallError`]
//! (which service, the URL as shown, what went wrong), wrapped by each
//! cloud's own error enum beside that cloud's own variants; and
//! [`CallFailure`], what every cloud's error answers about it.

use std::fmt;
use std::time::Duration;

use crate::http::BodyError;

/// What every cloud's error can say about the call that failed, whatever its
/// shape: a caller (the webhook's lookups) treats a timeout as a timeout and
/// names the URL it waited for without knowing the cloud. A cloud's error
/// names its failed call; the answers are read from it.
pub trait CallFailure: std::error::Error {
    /// What the cloud says in an error body.
    type Detail;

    /// The failed call this error is (or, after retries, the last attempt);
    /// `None` when no call failed (a setting refused, a name that cannot be
    /// sent, a cloud's own verdict on an answer).
    fn failed_call(&self) -> Option<&CallError<Self::Detail>>;

    /// The call ran out of time: the caller's deadline or the client's timeout.
    fn is_timeout(&self) -> bool {
        self.failed_call().is_some_and(CallError::is_timeout)
    }

    /// The URL of the failed call, shown without user, password, query or
    /// fragment; `None` when no call failed or the failure names no URL.
    fn url(&self) -> Option<&str> {
        self.failed_call().and_then(CallError::url)
    }

    /// How the call failed.
    fn call_kind(&self) -> Option<&CallErrorKind<Self::Detail>> {
        self.failed_call().map(|call| &call.kind)
    }

    /// True for the cloud's 404: the resource does not exist.
    fn is_not_found(&self) -> bool {
        self.failed_call().is_some_and(CallError::is_not_found)
    }

    /// The HTTP status the cloud answered, for its refusals.
    fn status(&self) -> Option<u16> {
        self.failed_call().and_then(CallError::status)
    }

    /// What the cloud said, for its refusals.
    fn detail(&self) -> Option<&Self::Detail> {
        self.failed_call().and_then(CallError::detail)
    }
}

/// A failed call to a cloud's `service` at `url`: every cloud's calls fail
/// in these [`CallErrorKind`]s, the detail `D` being what the cloud said in
/// an error body (Google's [`ErrorDetail`](crate::gcp::ErrorDetail), a
/// [`CodeMessage`](super::CodeMessage), vSphere's text).
///
/// Shown as Google's, Azure's and OpenStack's errors read; AWS and vSphere
/// show it in their own words, naming the action or vCenter call too.
#[derive(Debug)]
pub struct CallError<D> {
    /// The service as messages name it (`compute`, `ARM`, `Keystone`, `ec2`).
    pub service: &'static str,
    /// Without user, password, query or fragment ([`crate::http::shown_url`]);
    /// empty when the failure is not tied to a URL (an answer read apart from
    /// its call, a stand-in for an answer already had).
    pub url: String,
    pub kind: CallErrorKind<D>,
}

/// How a call failed.
#[derive(Debug)]
pub enum CallErrorKind<D> {
    /// The cloud answered 404: the resource (or the API path) does not exist.
    NotFound { detail: D },
    /// The cloud answered with an error status other than 404.
    Api { status: u16, detail: D },
    /// No answer within the caller's deadline (or the client's timeout),
    /// the wait shown in whole milliseconds as Go writes durations.
    Deadline { after: Duration },
    /// The call did not get through (DNS, refused, TLS, cut off); `timeout`
    /// when it ran out of the client's time on the way.
    Transport { reason: String, timeout: bool },
    /// An answer we cannot use (a success without the fields it needs, a
    /// token answer without its token, …).
    Garbage { problem: String },
    /// The answer was larger than the call's cap and was not read.
    TooLarge { source: BodyError },
}

impl<D> CallError<D> {
    pub fn new(service: &'static str, url: impl Into<String>, kind: CallErrorKind<D>) -> Self {
        Self {
            service,
            url: url.into(),
            kind,
        }
    }

    /// The URL called, as shown; `None` when the failure names none.
    pub fn url(&self) -> Option<&str> {
        Some(self.url.as_str()).filter(|url| !url.is_empty())
    }

    /// True when the call ran out of time.
    pub fn is_timeout(&self) -> bool {
        match self.kind {
            CallErrorKind::Deadline { .. } => true,
            CallErrorKind::Transport { timeout, .. } => timeout,
            _ => false,
        }
    }

    /// True for a 404: the resource does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self.kind, CallErrorKind::NotFound { .. })
    }

    /// The HTTP status the cloud answered, for its refusals.
    pub fn status(&self) -> Option<u16> {
        match self.kind {
            CallErrorKind::NotFound { .. } => Some(404),
            CallErrorKind::Api { status, .. } => Some(status),
            _ => None,
        }
    }

    /// What the cloud said, for its refusals.
    pub fn detail(&self) -> Option<&D> {
        match &self.kind {
            CallErrorKind::NotFound { detail } | CallErrorKind::Api { detail, .. } => Some(detail),
            _ => None,
        }
    }
}

impl<D: fmt::Display> fmt::Display for CallError<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { service, url, kind } = self;
        match kind {
            CallErrorKind::NotFound { detail } => write!(f, "{service}: {url} not found (HTTP 404: {detail})"),
            CallErrorKind::Api { status, detail } => write!(f, "{service} answered HTTP {status} for {url}: {detail}"),
            CallErrorKind::Deadline { after } => {
                write!(f, "{service} did not answer {url} within {}", shown_wait(*after))
            }
            CallErrorKind::Transport { reason, .. } => write!(f, "cannot reach {service} at {url}: {reason}"),
            CallErrorKind::Garbage { problem } => write!(f, "{service} sent an unusable answer for {url}: {problem}"),
            CallErrorKind::TooLarge { source } => write!(f, "{service}: {source}"),
        }
    }
}

impl<D: fmt::Debug + fmt::Display> std::error::Error for CallError<D> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            CallErrorKind::TooLarge { source } => Some(source),
            _ => None,
        }
    }
}

/// A wait as Go writes durations, in whole milliseconds.
pub(crate) fn shown_wait(after: Duration) -> String {
    crate::go_duration::format(Duration::from_millis(after.as_millis() as u64))
}

/// A value that cannot stand where it would be sent (a path segment, a
/// host): nothing was sent. Each cloud's error shows it in its own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidName {
    /// What the value is (`disk`, `registry`, `volume ID`).
    pub what: &'static str,
    /// The value, cleaned for a log line and cut.
    pub value: String,
    pub problem: &'static str,
}

impl InvalidName {
    /// `value` refused as a `what` for `problem`, shown cleaned and cut.
    pub(crate) fn new(what: &'static str, value: &str, problem: &'static str) -> Self {
        Self {
            what,
            value: crate::logging::clean_text(value, &[], 80),
            problem,
        }
    }
}
