//! `pv-topology-webhook`: a mutating admission webhook that gives PersistentVolumes the
//! topology the scheduler needs (the `topology.kubernetes.io/zone` and `/region` labels,
//! and nodeAffinity), for PVs created by hand or by tools that do not set it.
//!
//! Layers, from the outside in:
//! - [`review`]: AdmissionReview bytes in and out, read once ([`review::Reviewer::review`],
//!   the one entry point for the CLI and the server);
//! - [`resolve`]: finds the topology: built in ([`builtin`]), [`rules`], then [`lookup`];
//! - [`decision`]: the pure decision from the request and the resolved topology;
//! - [`model`]: the core's types (subject, resolution, decision, outcome), which import
//!   no lookup, cloud or server code.
//!
//! Around them: [`server`] (HTTPS, health, shutdown), [`tls`] (certificate reload),
//! [`metrics`], [`certs`] (a CA and serving certificate for clusters without
//! cert-manager) and [`audit`] (the PVs of a cluster, judged as the webhook would).

mod answer;
pub mod audit;
pub mod builtin;
pub mod certs;
pub mod cli;
pub mod decision;
pub mod lookup;
pub mod metrics;
pub mod model;
pub mod patch;
pub mod resolve;
pub mod review;
pub mod rules;
pub mod server;
pub mod setup;
pub mod source;
pub mod tls;
pub mod topology;
pub mod validate;

use std::io::Write as _;
use std::process::ExitCode;

use thiserror::Error;

use crate::certs::CertsError;
use crate::cli::{Cli, Command, ServeArgs};
use crate::metrics::Metrics;
use crate::rules::RulesError;
use crate::server::{AppState, ServeConfig, ServeError, Server};
pub use crate::setup::reviewer;
use crate::tls::TlsFiles;

/// Why a command failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    #[error("--rules: {0}")]
    Rules(#[from] RulesError),
    #[error(transparent)]
    Review(#[from] review::command::CommandError),
    #[error("cannot write stdout: {0}")]
    Stdout(#[source] std::io::Error),
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error(transparent)]
    Certs(#[from] CertsError),
    #[error("{0} received during shutdown: stopped without draining")]
    Interrupted(&'static str),
    #[error("--aws-ebs-lookup: {0}")]
    Ebs(#[from] lookup::ebs::EbsSetupError),
    #[error("--aws-ebs-lookup needs a region: set --aws-region (or AWS_REGION)")]
    NoRegion,
    #[error("--aws-region \"{0}\" is not an AWS region: use a name such as us-east-1")]
    BadRegion(String),
    #[error("--aws-ebs-lookup: {0}")]
    AwsConfig(#[from] cloud_access::aws::AwsConfigError),
    #[error("--gce-lookup: {0}")]
    Gce(#[from] lookup::gce::GceSetupError),
    /// A bad `GCE_METADATA_HOST` (the message names it).
    #[error("--gce-lookup: {0}")]
    GceMetadata(#[source] cloud_access::gcp::GcpError),
    /// A bad `--gce-compute-endpoint` (the message names it).
    #[error(transparent)]
    GceEndpoint(cloud_access::EndpointError),
    #[error("{flag}: {source}")]
    GceScope {
        flag: &'static str,
        #[source]
        source: lookup::gce::ScopeError,
    },
    /// The cloud config (the message names its path).
    #[error("--azure-config: {0}")]
    AzureConfig(#[source] cloud_access::azure::AzureConfigError),
    #[error("--azure-disk-lookup: {0}")]
    Azure(#[from] lookup::azure::AzureSetupError),
    /// A bad `--azure-*-endpoint` (the message names it).
    #[error(transparent)]
    AzureEndpoint(cloud_access::EndpointError),
    /// The OpenStack config (the message names its path and field).
    #[error("{flag}: {source}")]
    OpenStackConfig {
        flag: &'static str,
        #[source]
        source: cloud_access::openstack::OpenStackConfigError,
    },
    /// The OpenStack config turns certificate checks off and the operator did not allow it.
    #[error("{flag}: {source}; or pass --openstack-allow-insecure-tls to allow it")]
    OpenStackInsecure {
        flag: &'static str,
        #[source]
        source: cloud_access::openstack::OpenStackConfigError,
    },
    #[error("--openstack-cinder-lookup: {0}")]
    Cinder(#[from] lookup::cinder::CinderSetupError),
    /// The vSphere config (the message names its path and field).
    #[error("--vsphere-config: {0}")]
    VsphereConfig(#[source] cloud_access::vsphere::ConfigError),
    /// The vSphere config turns certificate checks off and the operator did not allow it.
    #[error("--vsphere-config: {0}; or pass --vsphere-allow-insecure-tls to allow it")]
    VsphereInsecure(#[source] cloud_access::vsphere::VsphereError),
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
    #[error("--vsphere-lookup: {0}")]
    Vsphere(#[source] lookup::vsphere::VsphereSetupError),
    /// A bad `--vsphere-endpoint` (the message names it).
    #[error(transparent)]
    VsphereEndpoint(cloud_access::EndpointError),
}

/// The server configuration the `serve` flags describe. Each file is named by its flag
/// (the names clap parses, [`cli::TLS_CERT_FILE`] and the others), which the `tls`
/// module's errors and warnings begin with.
pub fn serve_config(args: &ServeArgs) -> ServeConfig {
    ServeConfig {
        listen: args.server.listen,
        metrics_listen: args.server.metrics_listen,
        tls: TlsFiles {
            cert: tls::NamedFile::new(cli::TLS_CERT_FILE, &args.tls.tls_cert_file),
            key: tls::NamedFile::new(cli::TLS_KEY_FILE, &args.tls.tls_key_file),
        },
        client_ca: args
            .tls
            .client_ca_file
            .as_ref()
            .map(|path| tls::NamedFile::new(cli::CLIENT_CA_FILE, path)),
        reload_interval: args.tls.tls_reload_interval,
        shutdown_delay: args.server.shutdown_delay,
        drain_timeout: args.server.drain_timeout,
        limits: server::Limits {
            header_read_timeout: args.server.header_read_timeout,
            idle_timeout: args.server.idle_timeout,
            body_read_timeout: args.server.body_read_timeout,
            max_connections: args.server.max_connections.get(),
            ..server::Limits::default()
        },
    }
}

/// Runs the command.
pub async fn run(cli: Cli) -> Result<ExitCode, Error> {
    match cli.command {
        Command::Serve(args) => {
            let metrics = std::sync::Arc::new(Metrics::new());
            let state = AppState::with_metrics(reviewer(&args.topology, &args.decision, Some(&metrics))?, metrics);
            // Signal handlers first: a SIGTERM during start-up must not kill the process.
            let mut signals = server::Signals::install()?;
            let server = Server::bind(serve_config(&args), state).await?;
            let (first_tx, first_rx) = tokio::sync::oneshot::channel::<()>();
            let run = server.run(async {
                let _ = first_rx.await;
            });
            // The first signal starts the graceful sequence; a second one (an impatient
            // operator) ends the process at once.
            let signalled = async {
                let name = signals.recv().await;
                tracing::info!("{name} received");
                let _ = first_tx.send(());
                signals.recv().await
            };
            tokio::select! {
                result = run => Ok(result.map(|()| ExitCode::SUCCESS)?),
                name = signalled => Err(Error::Interrupted(name)),
            }
        }
        Command::Certs(args) => {
            let written = certs::generate(&args)?;
            eprint!("{}", certs::summary(&args, &written));
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{}", written.ca_bundle()).map_err(Error::Stdout)?;
            stdout.flush().map_err(Error::Stdout)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Sleep(args) => {
            tokio::time::sleep(args.duration).await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit(args) => {
            let resolver = setup::resolver(&args.topology, None)?;
            let code = audit::run(&args, &resolver, std::io::stdout()).await?;
            Ok(ExitCode::from(code))
        }
        Command::Review(args) => {
            let reviewer = reviewer(&args.topology, &args.decision, None)?;
            // stderr unlocked: lookups log from other threads while the review waits.
            let (mut stdin, mut stdout, mut stderr) = (std::io::stdin(), std::io::stdout().lock(), std::io::stderr());
            Ok(review::command::run(&args, &reviewer, &mut stdin, &mut stdout, &mut stderr).await?)
        }
    }
}
