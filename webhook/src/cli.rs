//! The command line: one flattened argument group per concern, each flag also settable
//! through a `PV_TOPOLOGY_WEBHOOK_*` environment variable.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use cloud_access::go_duration;
use cloud_access::logging::LogFormat;

use crate::decision::{DecisionConfig, OnLookupError};

/// Mutating admission webhook that gives manually created PersistentVolumes their
/// topology (zone/region labels and nodeAffinity).
#[derive(Debug, Parser)]
#[command(name = "pv-topology-webhook", version, arg_required_else_help = true)]
pub struct Cli {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// What to run. (`serve`, `certs` and `sleep` are to come.)
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Answer one admission.k8s.io/v1 AdmissionReview read from stdin; the answering
    /// AdmissionReview goes to stdout.
    Review(ReviewArgs),
}

/// Arguments of `review`.
#[derive(Debug, Args)]
pub struct ReviewArgs {
    #[command(flatten)]
    pub topology: TopologyArgs,
    #[command(flatten)]
    pub decision: DecisionArgs,
}

/// Where topology comes from.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Topology sources")]
pub struct TopologyArgs {
    /// Rules file (YAML) giving the topology of volumes the built-in parsers do not know;
    /// repeat for several files, whose rules are tried in order (comma-separated in the
    /// environment variable).
    #[arg(
        long = "rules",
        value_name = "FILE",
        env = "PV_TOPOLOGY_WEBHOOK_RULES",
        value_delimiter = ','
    )]
    pub rules: Vec<PathBuf>,
    /// Deadline of one cloud lookup, e.g. `2s` or `500ms`; keep it below the webhook's
    /// timeoutSeconds.
    #[arg(
        long,
        value_name = "DURATION",
        env = "PV_TOPOLOGY_WEBHOOK_LOOKUP_TIMEOUT",
        default_value = "2s",
        value_parser = parse_duration
    )]
    pub lookup_timeout: Duration,
}

/// How to answer.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Decision")]
pub struct DecisionArgs {
    /// What to do with a PV whose topology lookup failed: refuse it, or admit it without
    /// topology (with a warning).
    #[arg(
        long,
        value_enum,
        value_name = "POLICY",
        env = "PV_TOPOLOGY_WEBHOOK_ON_LOOKUP_ERROR",
        default_value_t = LookupErrorPolicy::Deny
    )]
    pub on_lookup_error: LookupErrorPolicy,
}

impl DecisionArgs {
    /// The decision settings these flags give.
    pub fn config(&self) -> DecisionConfig {
        DecisionConfig {
            on_lookup_error: match self.on_lookup_error {
                LookupErrorPolicy::Deny => OnLookupError::Deny,
                LookupErrorPolicy::Allow => OnLookupError::Allow,
            },
        }
    }
}

/// `--on-lookup-error` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LookupErrorPolicy {
    /// Refuse the PV with a message naming the volume and the cause.
    Deny,
    /// Admit the PV unchanged, with a warning.
    Allow,
}

/// Logging (to stderr).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Logging")]
pub struct LogArgs {
    /// Most verbose level logged: off, error, warn, info, debug or trace, or per-target
    /// levels such as `info,hyper=warn`.
    #[arg(
        long,
        global = true,
        value_name = "LEVEL",
        env = "PV_TOPOLOGY_WEBHOOK_LOG_LEVEL",
        default_value = "warn"
    )]
    pub log_level: String,
    /// Log line format.
    #[arg(
        long,
        global = true,
        value_enum,
        env = "PV_TOPOLOGY_WEBHOOK_LOG_FORMAT",
        default_value_t = LogFormat::Text
    )]
    pub log_format: LogFormat,
}

/// Parses a Go duration (`250ms`, `2s`, `1m30s`), as Kubernetes users write them.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = go_duration::parse_non_negative(text).map_err(|e| e.to_string())?;
    if duration.is_zero() {
        return Err("the duration must be more than zero".to_owned());
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("3").is_err(), "a bare number has no unit");
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn review_flags_parse() {
        let cli = Cli::try_parse_from([
            "pv-topology-webhook",
            "review",
            "--rules",
            "a.yaml",
            "--rules",
            "b.yaml",
            "--on-lookup-error",
            "allow",
        ])
        .unwrap();
        let Command::Review(args) = cli.command;
        assert_eq!(
            args.topology.rules,
            vec![PathBuf::from("a.yaml"), PathBuf::from("b.yaml")]
        );
        assert_eq!(args.decision.config().on_lookup_error, OnLookupError::Allow);
        assert!(Cli::try_parse_from(["pv-topology-webhook", "review", "--on-lookup-error", "maybe"]).is_err());
    }
}
