//! Log set-up shared by the programs: structured `tracing` events on
//! stderr, as text or JSON. Each program declares its own flags (with its
//! own environment variable names) and hands the values here.

use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, thiserror::Error)]
#[error(
    "invalid log level {level:?}: use off, error, warn, info, debug or trace, or per-target levels such as \"info,hyper=warn\""
)]
pub struct LogLevelError {
    level: String,
}

/// Installs the global subscriber. Call once, early in `main`.
pub fn init(level: &str, format: LogFormat) -> Result<(), LogLevelError> {
    // `Targets` reads "info" or "info,hyper=warn" without a regex engine,
    // which keeps the exec plugin small.
    let filter: Targets = level.parse().map_err(|_| LogLevelError {
        level: level.to_owned(),
    })?;
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false);
    let registry = tracing_subscriber::registry().with(filter);
    // A second init (as in tests) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => registry.with(layer.with_ansi(false)).try_init(),
        LogFormat::Json => registry.with(layer.json().flatten_event(true)).try_init(),
    };
    Ok(())
}
