//! The command line: one flattened argument group per concern, each flag also settable
//! through a `PV_TOPOLOGY_WEBHOOK_*` environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum};
use suite_program::duration;
use suite_program::{LogArgs, LogEnv as _};

use crate::decision::{DecisionConfig, OnLookupError};
use crate::model::OnContradiction;

mod topology;
pub use self::topology::*;

/// Mutating admission webhook that gives manually created PersistentVolumes their
/// topology (zone/region labels and nodeAffinity).
#[derive(Debug, Parser)]
#[command(
    name = "pv-topology-webhook",
    version,
    arg_required_else_help = true,
    log_env("PV_TOPOLOGY_WEBHOOK_LOG_LEVEL", "PV_TOPOLOGY_WEBHOOK_LOG_FORMAT", "warn")
)]
pub struct Cli {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// What to run.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the webhook over HTTPS on /mutate and /validate, with health and metrics on
    /// a second, plain-HTTP address.
    Serve(Box<ServeArgs>),
    /// Review PersistentVolumes as /mutate (or, with --validate, /validate) would: those
    /// of --file (YAML or JSON), each as a CREATE, or one AdmissionReview read from stdin.
    /// Prints the answer, the PV as stored, or what was added (--output).
    Review(Box<ReviewArgs>),
    /// Write a CA and a serving certificate for the webhook's Service (for clusters
    /// without cert-manager) and print the caBundle.
    Certs(CertsArgs),
    /// Sleep, then exit 0: a preStop hook for images without a shell.
    Sleep(SleepArgs),
    /// Read every PersistentVolume of a cluster, resolve each as the webhook would and
    /// report which lack the topology /mutate would give them or contradict their disk.
    /// Exit status 0: all fine; 2: some PV is not; 1: an error.
    Audit(Box<AuditArgs>),
    /// Give bound PVs the nodeAffinity they lack (or that contradicts their disk) by
    /// recreating the PV object, keeping the disk and rebinding the same claim. Without
    /// --apply, prints the plan and changes nothing. Exit status 0: every PV selected is
    /// repaired (or would be, or needs nothing); 2: some PV was left alone (the reason
    /// is printed); 1: an error.
    Repair(Box<RepairArgs>),
}

/// Arguments of `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub topology: TopologyArgs,
    #[command(flatten)]
    pub decision: DecisionArgs,
}

/// The flags naming the TLS files, as messages about the files name them (the `tls`
/// module knows the files only by these names); clap's long names are derived from them.
pub const TLS_CERT_FILE: &str = "--tls-cert-file";
pub const TLS_KEY_FILE: &str = "--tls-key-file";
pub const CLIENT_CA_FILE: &str = "--client-ca-file";

/// The serving certificate and the optional client check.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "TLS")]
pub struct TlsArgs {
    /// PEM certificate chain served on --listen: the serving certificate first, then any
    /// intermediates. Reloaded when it changes.
    #[arg(
        long = TLS_CERT_FILE.trim_start_matches('-'),
        value_name = "FILE",
        env = "PV_TOPOLOGY_WEBHOOK_TLS_CERT_FILE"
    )]
    pub tls_cert_file: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of the serving certificate. Reloaded
    /// when it changes.
    #[arg(
        long = TLS_KEY_FILE.trim_start_matches('-'),
        value_name = "FILE",
        env = "PV_TOPOLOGY_WEBHOOK_TLS_KEY_FILE"
    )]
    pub tls_key_file: PathBuf,
    /// PEM CA certificates: when set, clients must present a certificate signed by one of
    /// them (for an apiserver configured with a client certificate). Reloaded when it
    /// changes.
    #[arg(
        long = CLIENT_CA_FILE.trim_start_matches('-'),
        value_name = "FILE",
        env = "PV_TOPOLOGY_WEBHOOK_CLIENT_CA_FILE"
    )]
    pub client_ca_file: Option<PathBuf>,
    /// How often the certificate, key and client CA files are checked for changes (content, so
    /// that a Secret volume's symlink swap is seen).
    #[arg(
        long,
        value_name = "DURATION",
        env = "PV_TOPOLOGY_WEBHOOK_TLS_RELOAD_INTERVAL",
        default_value = "10s",
        value_parser = duration::positive
    )]
    pub tls_reload_interval: Duration,
}

/// Addresses and the shutdown sequence.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Server")]
pub struct ServerArgs {
    /// Address of the HTTPS listener (`[::]` takes IPv4 and IPv6).
    #[arg(
        long,
        value_name = "ADDR",
        env = "PV_TOPOLOGY_WEBHOOK_LISTEN",
        default_value = "[::]:8443"
    )]
    pub listen: SocketAddr,
    /// Address of the plain-HTTP listener for /healthz, /readyz and /metrics.
    #[arg(
        long,
        value_name = "ADDR",
        env = "PV_TOPOLOGY_WEBHOOK_METRICS_LISTEN",
        default_value = "[::]:8080"
    )]
    pub metrics_listen: SocketAddr,
    /// After SIGTERM or SIGINT: how long to keep serving while reporting not-ready, so
    /// that endpoints stop sending traffic before the listener closes.
    #[arg(
        long,
        value_name = "DURATION",
        env = "PV_TOPOLOGY_WEBHOOK_SHUTDOWN_DELAY",
        default_value = "5s",
        value_parser = duration::non_negative
    )]
    pub shutdown_delay: Duration,
    /// After the listener closes: how long in-flight requests may take to finish before
    /// their connections are cut.
    #[arg(
        long,
        value_name = "DURATION",
        env = "PV_TOPOLOGY_WEBHOOK_DRAIN_TIMEOUT",
        default_value = "10s",
        value_parser = duration::positive
    )]
    pub drain_timeout: Duration,
    /// How long a client may take to send a request head (both listeners), counted
    /// from the connection's start and, HTTP/1.1, again after each answer: a connection
    /// with no request begun by then (TLS handshake, HTTP/2 preface included) is closed.
    #[arg(
        long,
        value_name = "DURATION",
        env = "PV_TOPOLOGY_WEBHOOK_HEADER_READ_TIMEOUT",
        default_value = "10s",
        value_parser = duration::positive
    )]
    pub header_read_timeout: Duration,
    /// A connection with no request open for this long is closed (HTTP/2 with GOAWAY).
    #[arg(
        long,
        value_name = "DURATION",
        env = "PV_TOPOLOGY_WEBHOOK_IDLE_TIMEOUT",
        default_value = "60s",
        value_parser = duration::positive
    )]
    pub idle_timeout: Duration,
    /// How long a client may take to send a whole request body; 408 after that.
    #[arg(
        long,
        value_name = "DURATION",
        env = "PV_TOPOLOGY_WEBHOOK_BODY_READ_TIMEOUT",
        default_value = "10s",
        value_parser = duration::positive
    )]
    pub body_read_timeout: Duration,
    /// Most connections served at once on --listen; one peer address holds at most all
    /// but an eighth of them (56 of 64). A new connection with no place takes that of an
    /// idle one, else waits (at most 4 x COUNT waiting).
    #[arg(
        long,
        value_name = "COUNT",
        env = "PV_TOPOLOGY_WEBHOOK_MAX_CONNECTIONS",
        default_value = "64"
    )]
    pub max_connections: std::num::NonZeroUsize,
}

/// Arguments of `certs`.
#[derive(Debug, Clone, Args)]
pub struct CertsArgs {
    /// Name of the webhook's Service; the certificate is valid for NAME, NAME.NS,
    /// NAME.NS.svc and NAME.NS.svc.cluster.local.
    #[arg(long, value_name = "NAME")]
    pub service: String,
    /// Namespace of the Service.
    #[arg(long, value_name = "NS")]
    pub namespace: String,
    /// Directory to write ca.crt, tls.crt and tls.key to (created if missing; existing
    /// regular files are replaced; anything else in the way is refused).
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,
    /// How long the CA and the serving certificate are valid.
    #[arg(long, value_name = "DURATION", default_value = "8760h", value_parser = duration::positive)]
    pub validity: Duration,
    /// Another DNS name or IP address for the serving certificate; repeatable.
    #[arg(long, value_name = "NAME_OR_IP", value_delimiter = ',')]
    pub extra_san: Vec<String>,
}

/// Arguments of `sleep`.
#[derive(Debug, Clone, Args)]
pub struct SleepArgs {
    /// How long, e.g. `5s`.
    #[arg(value_name = "DURATION", value_parser = duration::non_negative)]
    pub duration: Duration,
}

/// Arguments of `review`.
#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// PersistentVolumes to review, each as a CREATE: a YAML or JSON file (`-` for stdin)
    /// of one or several documents, `v1 List`s of them, or AdmissionReviews (told apart by
    /// `kind`; other objects are not sent to the webhook). Unset: one AdmissionReview
    /// (JSON) from stdin.
    #[arg(short = 'f', long, value_name = "FILE", env = "PV_TOPOLOGY_WEBHOOK_FILE")]
    pub file: Option<PathBuf>,
    /// What to print. Unset: `review` when the input holds AdmissionReviews only, else
    /// `diff`.
    #[arg(
        short = 'o',
        long,
        value_enum,
        value_name = "FORMAT",
        env = "PV_TOPOLOGY_WEBHOOK_OUTPUT"
    )]
    pub output: Option<ReviewOutput>,
    /// Answer as /validate does (does the PV's topology agree with its disk?) instead
    /// of as /mutate.
    #[arg(long, env = "PV_TOPOLOGY_WEBHOOK_VALIDATE", value_parser = suite_program::boolish)]
    pub validate: bool,
    #[command(flatten)]
    pub topology: TopologyArgs,
    #[command(flatten)]
    pub decision: DecisionArgs,
}

/// `review --output` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReviewOutput {
    /// The answering AdmissionReview, one JSON line per PV, as the apiserver gets it; exit
    /// status 0 whether admitted or refused (`allowed` says).
    Review,
    /// Each object as it will be stored (the webhook's patch applied), YAML for YAML input,
    /// else JSON; a refused PV is left out and named on stderr (exit status 2).
    Pv,
    /// Per PV the verdict, the labels and nodeAffinity added and the warnings (exit status
    /// 2 if one is refused).
    Diff,
}

/// Which cluster `audit` and `repair` talk to, and how long one request may take.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Cluster")]
pub struct ClusterArgs {
    /// The kubeconfig to reach the cluster with; unset: $KUBECONFIG, ~/.kube/config, then
    /// the pod's service account (in-cluster).
    #[arg(long, value_name = "FILE", env = "PV_TOPOLOGY_WEBHOOK_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (with --kubeconfig, or the default kubeconfig).
    #[arg(long, value_name = "NAME", env = "PV_TOPOLOGY_WEBHOOK_CONTEXT")]
    pub context: Option<String>,
    /// The most one request to the apiserver (a page of a list, a get, a patch) may
    /// take, from connecting to the last byte of its answer.
    #[arg(
        long,
        value_name = "DURATION",
        env = "PV_TOPOLOGY_WEBHOOK_REQUEST_TIMEOUT",
        default_value = "30s",
        value_parser = duration::positive
    )]
    pub request_timeout: Duration,
}

/// Arguments of `audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// How the report is written: a table (NAME, VOLUME, STATUS, DETAIL) or a JSON array.
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        env = "PV_TOPOLOGY_WEBHOOK_OUTPUT",
        default_value = "table"
    )]
    pub output: ReportFormat,
    /// PersistentVolumes asked for per list request (paging with `continue`).
    #[arg(
        long,
        value_name = "COUNT",
        env = "PV_TOPOLOGY_WEBHOOK_PAGE_SIZE",
        default_value = "500",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub page_size: u32,
    /// The most pages one audit reads; unset: enough for a million PersistentVolumes
    /// (1,000,000 / --page-size, rounded up). More is an error: an apiserver that pages
    /// without end cannot keep the audit running.
    #[arg(
        long,
        value_name = "COUNT",
        env = "PV_TOPOLOGY_WEBHOOK_MAX_PAGES",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub max_pages: Option<u32>,
    /// The most the whole audit may take; past it the audit stops with exit status 1
    /// (the rows judged so far are written). The Job's activeDeadlineSeconds is longer.
    #[arg(
        long,
        value_name = "DURATION",
        env = "PV_TOPOLOGY_WEBHOOK_DEADLINE",
        default_value = "10m",
        value_parser = duration::positive
    )]
    pub deadline: Duration,
    /// Add the missing topology labels through the apiserver (a merge patch of
    /// metadata.labels; needs `patch` on persistentvolumes). nodeAffinity is immutable:
    /// PVs lacking it are reported with the remedy.
    #[arg(long, env = "PV_TOPOLOGY_WEBHOOK_FIX_LABELS", value_parser = suite_program::boolish)]
    pub fix_labels: bool,
    #[command(flatten)]
    pub topology: TopologyArgs,
}

impl AuditArgs {
    /// `--max-pages`, or its default for `--page-size`.
    pub fn max_pages(&self) -> u32 {
        self.max_pages
            .unwrap_or_else(|| DEFAULT_MAX_AUDIT_PVS.div_ceil(self.page_size).max(1))
    }
}

/// Arguments of `repair`.
#[derive(Debug, Args)]
pub struct RepairArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// A PV to repair (repeat, or separate with commas).
    #[arg(long, value_name = "NAME", env = "PV_TOPOLOGY_WEBHOOK_PV", value_delimiter = ',')]
    pub pv: Vec<String>,
    /// Every PV that audit reports as missing-affinity or as contradicting its disk
    /// through its nodeAffinity (and every unfinished repair).
    #[arg(long, env = "PV_TOPOLOGY_WEBHOOK_ALL", value_parser = suite_program::boolish)]
    pub all: bool,
    /// Make the changes. Without it, the plan is printed and nothing is changed.
    #[arg(long, env = "PV_TOPOLOGY_WEBHOOK_APPLY", value_parser = suite_program::boolish)]
    pub apply: bool,
    /// Repair a PV whose claim is used by running pods (named in the plan). The pods
    /// keep their mount; the PV object is gone for the seconds between delete and
    /// create. Without it such a PV is left alone.
    #[arg(long, env = "PV_TOPOLOGY_WEBHOOK_ALLOW_IN_USE", value_parser = suite_program::boolish)]
    pub allow_in_use: bool,
    /// How long to wait for the controllers at each step: the old PV gone once
    /// unprotected, the new one and its claim Bound.
    #[arg(
        long,
        value_name = "DURATION",
        env = "PV_TOPOLOGY_WEBHOOK_WAIT",
        default_value = "2m",
        value_parser = duration::positive
    )]
    pub wait: Duration,
    /// How the plan and the results are written: a table or a JSON array.
    #[arg(
        short = 'o',
        long,
        value_enum,
        value_name = "FORMAT",
        env = "PV_TOPOLOGY_WEBHOOK_OUTPUT",
        default_value = "table"
    )]
    pub output: ReportFormat,
    #[command(flatten)]
    pub topology: TopologyArgs,
}

/// Which PVs `repair` is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// `--pv`: these.
    Named(Vec<String>),
    /// `--all`.
    All,
}

impl RepairArgs {
    /// `--pv` or `--all`, exactly one of them. Checked here rather than by clap: a
    /// switch set to false by its variable (`PV_TOPOLOGY_WEBHOOK_ALL=0`) counts as
    /// given to clap's groups.
    pub fn selection(&self) -> Result<Selection, &'static str> {
        match (self.all, self.pv.is_empty()) {
            (true, true) => Ok(Selection::All),
            (false, false) => Ok(Selection::Named(self.pv.clone())),
            (true, false) => Err("--pv and --all: give one of them, not both"),
            (false, true) => Err("which PVs? give --pv NAME (repeat, or separate with commas) or --all"),
        }
    }
}

/// The cluster size `--max-pages`' default allows.
pub const DEFAULT_MAX_AUDIT_PVS: u32 = 1_000_000;

/// `audit --output` and `repair --output` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// A table, one PV a row (audit: NAME, VOLUME, STATUS, DETAIL; repair: NAME, CLAIM,
    /// STATUS, DETAIL).
    Table,
    /// An array of objects, one per PV, with the table's columns and what is written.
    Json,
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
        default_value = "deny"
    )]
    pub on_lookup_error: OnLookupError,
    /// What /validate (and `review --validate`) does with a PV whose labels or
    /// nodeAffinity name a zone or region its disk is not in: refuse it, or admit it
    /// with a warning.
    #[arg(
        long,
        value_enum,
        value_name = "POLICY",
        env = "PV_TOPOLOGY_WEBHOOK_ON_CONTRADICTION",
        default_value = "deny"
    )]
    pub on_contradiction: OnContradiction,
}

impl DecisionArgs {
    /// The decision settings these flags give.
    pub fn config(&self) -> DecisionConfig {
        DecisionConfig {
            on_lookup_error: self.on_lookup_error,
            on_contradiction: self.on_contradiction,
        }
    }
}

/// `--on-contradiction` values: the core's own type.
impl ValueEnum for OnContradiction {
    fn value_variants<'a>() -> &'a [Self] {
        &[Self::Deny, Self::Warn]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            Self::Deny => PossibleValue::new("deny").help("Refuse the PV, naming what it says and where the disk is"),
            Self::Warn => PossibleValue::new("warn").help("Admit the PV, with that as a warning"),
        })
    }
}

/// `--on-lookup-error` values: the core's own type, named here so that the
/// core knows nothing of the command line.
impl ValueEnum for OnLookupError {
    fn value_variants<'a>() -> &'a [Self] {
        &[Self::Deny, Self::Allow]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            Self::Deny => {
                PossibleValue::new("deny").help("Refuse the PV with a message naming the volume and the cause")
            }
            Self::Allow => PossibleValue::new("allow").help("Admit the PV unchanged, with a warning"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::NamedFile;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_well_formed() {
        Cli::command().debug_assert();
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
        let Command::Review(args) = cli.command else {
            panic!("not parsed as review: {:?}", cli.command);
        };
        assert_eq!(
            args.topology.rules,
            vec![PathBuf::from("a.yaml"), PathBuf::from("b.yaml")]
        );
        assert_eq!(args.decision.config().on_lookup_error, OnLookupError::Allow);
        assert!(Cli::try_parse_from(["pv-topology-webhook", "review", "--on-lookup-error", "maybe"]).is_err());
    }

    #[test]
    fn serve_flags_parse_with_defaults() {
        let cli = Cli::try_parse_from([
            "pv-topology-webhook",
            "serve",
            "--tls-cert-file",
            "c.pem",
            "--tls-key-file",
            "k.pem",
            "--shutdown-delay",
            "0s",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("not parsed as serve: {:?}", cli.command);
        };
        assert_eq!(args.server.listen, "[::]:8443".parse().unwrap());
        assert_eq!(args.server.metrics_listen, "[::]:8080".parse().unwrap());
        assert_eq!(args.server.shutdown_delay, Duration::ZERO);
        assert_eq!(args.server.drain_timeout, Duration::from_secs(10));
        assert_eq!(args.tls.client_ca_file, None);
        let config = crate::serve_config(&args);
        // Messages about the files name them as the operator did.
        assert_eq!(config.tls.cert, NamedFile::new("--tls-cert-file", "c.pem"));
        assert_eq!(config.tls.key, NamedFile::new("--tls-key-file", "k.pem"));
        assert_eq!(config.client_ca, None);
        let with_ca = Cli::try_parse_from([
            "pv-topology-webhook",
            "serve",
            "--tls-cert-file",
            "c.pem",
            "--tls-key-file",
            "k.pem",
            "--client-ca-file",
            "ca.pem",
        ])
        .unwrap();
        let Command::Serve(with_ca) = with_ca.command else {
            panic!("not parsed as serve: {:?}", with_ca.command);
        };
        assert_eq!(
            crate::serve_config(&with_ca).client_ca,
            Some(NamedFile::new("--client-ca-file", "ca.pem"))
        );
        assert_eq!(
            crate::serve_config(&args).limits,
            crate::server::Limits::default(),
            "flag defaults and Limits::default agree"
        );
        assert!(
            Cli::try_parse_from(["pv-topology-webhook", "serve", "--tls-cert-file", "c.pem"]).is_err(),
            "the key file is required"
        );
    }

    #[test]
    fn repair_needs_a_selection_and_changes_nothing_without_apply() {
        let parse = |args: &[&str]| {
            let mut argv = vec!["pv-topology-webhook", "repair"];
            argv.extend_from_slice(args);
            Cli::try_parse_from(argv)
        };
        let selection = |args: &[&str]| match parse(args).expect("parses").command {
            Command::Repair(args) => args.selection(),
            other => panic!("not repair: {other:?}"),
        };
        assert!(selection(&[]).unwrap_err().contains("give --pv NAME"));
        assert!(selection(&["--all", "--pv", "a"]).unwrap_err().contains("not both"));
        assert_eq!(
            selection(&["--pv", "a,b", "--pv", "c"]),
            Ok(Selection::Named(vec!["a".into(), "b".into(), "c".into()]))
        );
        assert_eq!(selection(&["--all"]), Ok(Selection::All));
        let Command::Repair(args) = parse(&["--pv", "a,b", "--pv", "c", "-o", "json"])
            .expect("parses")
            .command
        else {
            panic!("not repair");
        };
        assert_eq!(args.pv, ["a", "b", "c"]);
        assert!(
            !args.apply && !args.all && !args.allow_in_use,
            "nothing changes by default"
        );
        assert_eq!(args.output, ReportFormat::Json);
        assert_eq!(args.wait, Duration::from_secs(120));
        assert_eq!(args.cluster.request_timeout, Duration::from_secs(30));
        let Command::Repair(args) = parse(&["--all", "--apply"]).expect("parses").command else {
            panic!("not repair");
        };
        assert!(args.all && args.apply && args.pv.is_empty());
    }

    #[test]
    fn audit_flags_parse_with_defaults() {
        let cli = Cli::try_parse_from(["pv-topology-webhook", "audit"]).expect("the flags parse");
        let Command::Audit(args) = cli.command else {
            panic!("not parsed as audit: {:?}", cli.command);
        };
        assert_eq!(args.output, ReportFormat::Table);
        assert_eq!(args.page_size, 500);
        assert_eq!(args.max_pages(), 2000, "a million PVs");
        assert_eq!(args.cluster.request_timeout, Duration::from_secs(30));
        assert_eq!(args.deadline, Duration::from_secs(600));
        assert!(!args.fix_labels);
        assert_eq!(args.cluster.kubeconfig, None);
        let cli = Cli::try_parse_from([
            "pv-topology-webhook",
            "audit",
            "--kubeconfig",
            "k.yaml",
            "--context",
            "prod",
            "--output",
            "json",
            "--page-size",
            "2",
            "--fix-labels",
            "--rules",
            "r.yaml",
            "--gce-lookup",
        ])
        .expect("the audit flags parse");
        let Command::Audit(args) = cli.command else {
            panic!("not parsed as audit: {:?}", cli.command);
        };
        assert_eq!(args.output, ReportFormat::Json);
        assert_eq!(args.page_size, 2);
        assert_eq!(args.max_pages(), 500_000);
        assert!(args.fix_labels);
        assert_eq!(args.cluster.kubeconfig, Some(PathBuf::from("k.yaml")));
        assert_eq!(args.cluster.context.as_deref(), Some("prod"));
        assert_eq!(args.topology.rules, vec![PathBuf::from("r.yaml")]);
        assert!(args.topology.gce.gce_lookup);
        let cli = Cli::try_parse_from([
            "pv-topology-webhook",
            "audit",
            "--page-size",
            "3",
            "--max-pages",
            "7",
            "--request-timeout",
            "2s",
            "--deadline",
            "1h",
        ])
        .expect("the audit limit flags parse");
        let Command::Audit(args) = cli.command else {
            panic!("not parsed as audit: {:?}", cli.command);
        };
        assert_eq!(args.max_pages(), 7);
        assert_eq!(args.cluster.request_timeout, Duration::from_secs(2));
        assert_eq!(args.deadline, Duration::from_secs(3600));
        for bad in [
            ["--output", "yaml"],
            ["--page-size", "0"],
            ["--max-pages", "0"],
            ["--request-timeout", "0s"],
            ["--deadline", "10"],
        ] {
            let mut argv = vec!["pv-topology-webhook", "audit"];
            argv.extend_from_slice(&bad);
            let error = Cli::try_parse_from(argv).unwrap_err().to_string();
            assert!(error.contains(bad[0]), "{error}");
        }
        assert!(
            Cli::try_parse_from(["pv-topology-webhook", "audit", "--on-contradiction", "warn"]).is_err(),
            "audit reports; it has no admission policy"
        );
    }

    #[test]
    fn serve_limit_flags_parse() {
        let serve = |extra: &[&str]| {
            let mut args = vec![
                "pv-topology-webhook",
                "serve",
                "--tls-cert-file",
                "c",
                "--tls-key-file",
                "k",
            ];
            args.extend_from_slice(extra);
            Cli::try_parse_from(args)
        };
        let cli = serve(&[
            "--header-read-timeout",
            "2s",
            "--idle-timeout",
            "1m",
            "--body-read-timeout",
            "500ms",
            "--max-connections",
            "64",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("not parsed as serve: {:?}", cli.command);
        };
        let limits = crate::serve_config(&args).limits;
        assert_eq!(limits.header_read_timeout, Duration::from_secs(2));
        assert_eq!(limits.idle_timeout, Duration::from_secs(60));
        assert_eq!(limits.body_read_timeout, Duration::from_millis(500));
        assert_eq!(limits.max_connections, 64);
        for bad in [
            ["--max-connections", "0"],
            ["--idle-timeout", "0s"],
            ["--body-read-timeout", "10"],
        ] {
            let error = serve(&bad).unwrap_err().to_string();
            assert!(error.contains(bad[0]), "{error}");
        }
    }

    #[test]
    fn azure_flags_parse_with_defaults() {
        let cli = Cli::try_parse_from(["pv-topology-webhook", "review", "--azure-disk-lookup"]).unwrap();
        let Command::Review(args) = cli.command else {
            panic!("not parsed as review: {:?}", cli.command);
        };
        assert!(args.topology.azure.azure_disk_lookup);
        assert_eq!(
            args.topology.azure.azure_config,
            PathBuf::from("/etc/kubernetes/azure.json")
        );
        assert_eq!(args.topology.azure.azure_arm_endpoint, None);
        let cli = Cli::try_parse_from([
            "pv-topology-webhook",
            "review",
            "--azure-config",
            "/etc/azure/cloud.yaml",
            "--azure-imds-endpoint",
            "http://127.0.0.1:9/",
        ])
        .unwrap();
        let Command::Review(args) = cli.command else {
            panic!("not parsed as review: {:?}", cli.command);
        };
        assert!(!args.topology.azure.azure_disk_lookup);
        assert_eq!(args.topology.azure.azure_config, PathBuf::from("/etc/azure/cloud.yaml"));
        assert_eq!(
            args.topology.azure.azure_imds_endpoint.as_deref(),
            Some("http://127.0.0.1:9/")
        );
    }

    #[test]
    fn certs_and_sleep_flags_parse() {
        let cli = Cli::try_parse_from([
            "pv-topology-webhook",
            "certs",
            "--service",
            "wh",
            "--namespace",
            "ns",
            "--out-dir",
            "/tmp/x",
            "--extra-san",
            "10.0.0.1,wh.example.com",
            "--extra-san",
            "::1",
        ])
        .unwrap();
        let Command::Certs(args) = cli.command else {
            panic!("not parsed as certs: {:?}", cli.command);
        };
        assert_eq!(args.extra_san, ["10.0.0.1", "wh.example.com", "::1"]);
        assert_eq!(args.validity, Duration::from_secs(8760 * 3600));
        let cli = Cli::try_parse_from(["pv-topology-webhook", "sleep", "1m5s"]).unwrap();
        let Command::Sleep(args) = cli.command else {
            panic!("not parsed as sleep: {:?}", cli.command);
        };
        assert_eq!(args.duration, Duration::from_secs(65));
        assert!(Cli::try_parse_from(["pv-topology-webhook", "sleep", "5"]).is_err());
    }
}
