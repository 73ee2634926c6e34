//! The log flags every program flattens into its command line, and the log
//! set-up: structured `tracing` events on stderr, as text or JSON.

use std::str::FromStr;

use clap::{Args, ValueEnum};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Logging (to stderr). Each program names the environment variables (and
/// may change the default level) with [`LogEnv::log_env`].
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Logging")]
pub struct LogArgs {
    /// Most verbose level logged: off, error, warn, info, debug or trace, or per-target
    /// levels such as `info,hyper=warn`.
    #[arg(long, global = true, value_name = "LEVEL", default_value = "warn")]
    pub log_level: LogLevel,
    /// Log line format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// `--log-format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// A `--log-level` checked when the command line is parsed: a level, or
/// per-target levels such as `info,hyper=warn` (read by `tracing`'s
/// `Targets`, without a regex engine, which keeps the exec plugin small).
#[derive(Debug, Clone)]
pub struct LogLevel(Targets);

#[derive(Debug, PartialEq, Eq)]
pub struct LogLevelError {
    level: String,
}

impl std::fmt::Display for LogLevelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid log level {:?}: use off, error, warn, info, debug or trace, or per-target levels such as \"info,hyper=warn\"",
            self.level
        )
    }
}

impl std::error::Error for LogLevelError {}

impl FromStr for LogLevel {
    type Err = LogLevelError;

    fn from_str(level: &str) -> Result<Self, Self::Err> {
        let error = || LogLevelError {
            level: level.to_owned(),
        };
        // `Targets` would read a misspelt level such as `debg` as a target
        // logged at every level, and so log nothing: a directive without `=`
        // must be a level.
        let misspelt = level
            .split(',')
            .any(|directive| !directive.contains('=') && directive.parse::<LevelFilter>().is_err());
        if misspelt {
            return Err(error());
        }
        level.parse().map(LogLevel).map_err(|_| error())
    }
}

/// Names a program's log environment variables on its command, as a
/// `#[command(log_env(...))]` attribute of its `Cli`.
pub trait LogEnv {
    /// `level_env` and `format_env` set `--log-level` and `--log-format`;
    /// `default_level` replaces `warn`.
    fn log_env(self, level_env: &'static str, format_env: &'static str, default_level: &'static str) -> Self;
}

impl LogEnv for clap::Command {
    fn log_env(self, level_env: &'static str, format_env: &'static str, default_level: &'static str) -> Self {
        self.mut_arg("log_level", |arg| arg.env(level_env).default_value(default_level))
            .mut_arg("log_format", |arg| arg.env(format_env))
    }
}

/// Installs the global subscriber. A second call (as in tests) keeps the
/// first subscriber.
pub fn init_logging(args: &LogArgs) {
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false);
    let registry = tracing_subscriber::registry().with(args.log_level.0.clone());
    let _ = match args.log_format {
        LogFormat::Text => registry.with(layer.with_ansi(false)).try_init(),
        LogFormat::Json => registry.with(layer.json().flatten_event(true)).try_init(),
    };
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    #[derive(Debug, Parser)]
    #[command(name = "demo", log_env("DEMO_LOG_LEVEL", "DEMO_LOG_FORMAT", "error"))]
    struct Cli {
        #[command(flatten)]
        log: LogArgs,
    }

    #[test]
    fn levels_are_checked_when_parsing() {
        Cli::command().debug_assert();
        assert!(Cli::try_parse_from(["demo", "--log-level", "info,hyper=warn"]).is_ok());
        assert!(Cli::try_parse_from(["demo", "--log-level", "off"]).is_ok());
        assert!(Cli::try_parse_from(["demo", "--log-level", "DEBUG"]).is_ok());
        for bad in ["loud", "info,debg", "hyper=loud"] {
            let error = Cli::try_parse_from(["demo", "--log-level", bad])
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("--log-level") && error.contains(&format!("invalid log level {bad:?}")),
                "{error}"
            );
        }
    }

    #[test]
    fn programs_name_their_variables_and_default() {
        let command = Cli::command();
        let level = command.get_arguments().find(|a| a.get_id() == "log_level").unwrap();
        assert_eq!(level.get_env(), Some(std::ffi::OsStr::new("DEMO_LOG_LEVEL")));
        assert_eq!(level.get_default_values(), ["error"]);
        let format = command.get_arguments().find(|a| a.get_id() == "log_format").unwrap();
        assert_eq!(format.get_env(), Some(std::ffi::OsStr::new("DEMO_LOG_FORMAT")));
    }
}
