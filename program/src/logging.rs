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
    /// levels such as `info,hyper=warn`. Below info, kube's client library is quiet
    /// (its errors are in the program's own error line) unless named: `warn,kube_client=warn`.
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
        let targets: Targets = level.parse().map_err(|_| error())?;
        Ok(LogLevel(quiet_kube_client(targets)))
    }
}

/// The target of kube's client, which logs every failed request at `ERROR`
/// (`failed with error client error (Connect)`) and an unreadable answer's
/// whole body at `WARN`, beside the program's own error line that names the
/// server and the cause.
const KUBE_CLIENT: &str = "kube_client";

/// `targets` with [`KUBE_CLIENT`] off where they would log it below `info`
/// and no directive names it (`warn,kube_client=warn` shows it).
fn quiet_kube_client(targets: Targets) -> Targets {
    let named = targets
        .iter()
        .any(|(target, _)| target.starts_with(KUBE_CLIENT) || KUBE_CLIENT.starts_with(target));
    let at_info = LevelFilter::INFO
        .into_level()
        .is_some_and(|info| targets.would_enable(KUBE_CLIENT, &info));
    if named || at_info {
        return targets;
    }
    targets.with_target(KUBE_CLIENT, LevelFilter::OFF)
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

    /// kube's client logs every failed request at ERROR beside the program's
    /// own line: off below `info` unless a directive names it.
    #[test]
    fn kube_clients_own_lines_are_off_below_info_unless_named() {
        let enabled = |level: &str, target: &str, at: LevelFilter| {
            let at = at.into_level().expect("a level, not off");
            level.parse::<LogLevel>().expect("a level").0.would_enable(target, &at)
        };
        let builder = "kube_client::client::builder";
        for level in ["warn", "error", "off", "warn,hyper=error"] {
            assert!(!enabled(level, builder, LevelFilter::ERROR), "{level}");
        }
        assert!(enabled("warn", "node_ip_helper", LevelFilter::WARN));
        assert!(enabled("error", "pv_topology_webhook::audit", LevelFilter::ERROR));
        for level in [
            "info",
            "debug",
            "warn,kube_client=error",
            "warn,kube=warn",
            "warn,kube_client::client=warn",
        ] {
            assert!(enabled(level, builder, LevelFilter::ERROR), "{level}");
        }
        assert!(!enabled("warn,kube_client=error", builder, LevelFilter::WARN));
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
