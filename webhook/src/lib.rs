//! `pv-topology-webhook`: admission webhooks that give PersistentVolumes the topology
//! the scheduler needs (the `topology.kubernetes.io/zone` and `/region` labels, and
//! nodeAffinity), for PVs created by hand or by tools that do not set it (`/mutate`),
//! and refuse a PV whose topology contradicts its disk (`/validate`).
//!
//! Layers, from the outside in:
//! - [`review`]: AdmissionReview bytes in and out ([`review::Reviewer::answer`], the one
//!   entry point for the `review` subcommand and the server's two routes);
//! - [`resolve`]: finds the topology: built in ([`builtin`]), [`rules`], then [`lookup`];
//! - [`decision`] (`/mutate`) and [`validate`] (`/validate`): the pure answers from the
//!   request and the resolved topology, sharing what they answer alike (`answer`);
//! - [`model`]: the core's types (subject, resolution, decision, outcome), which import
//!   no lookup, cloud or server code.
//!
//! Around them: [`setup`] (the flags turned into a reviewer and the server's settings,
//! at start-up), [`server`] (HTTPS, health, shutdown), [`tls`] (certificate reload),
//! [`metrics`], [`certs`] (a CA and serving certificate for clusters without
//! cert-manager) and [`audit`] (the PVs of a cluster, judged as the webhook would).

mod answer;
pub mod apiserver;
pub mod audit;
pub mod builtin;
pub mod certs;
pub mod cli;
pub mod decision;
pub mod lookup;
pub mod metrics;
pub mod model;
pub mod patch;
pub mod repair;
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
use crate::cli::{Cli, Command};
use crate::metrics::Metrics;
use crate::rules::RulesError;
use crate::server::{AppState, ServeError, Server};
// Kept at the crate root for their callers (`cli`'s tests use `crate::serve_config`).
use crate::setup::SetupError;
pub use crate::setup::{reviewer, serve_config};

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
    /// A lookup's setting (the message names its flag).
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
    #[error(transparent)]
    Repair(#[from] repair::RepairError),
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
        Command::Repair(args) => {
            let resolver = setup::resolver(&args.topology, None)?;
            let code = repair::run(&args, &resolver, std::io::stdout()).await?;
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
