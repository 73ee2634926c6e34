//! `pv-topology-webhook`: a mutating admission webhook that gives PersistentVolumes the
//! topology the scheduler needs (the `topology.kubernetes.io/zone` and `/region` labels,
//! and nodeAffinity), for PVs created by hand or by tools that do not set it.
//!
//! Layers, from the outside in:
//! - [`review`]: AdmissionReview bytes in and out (one path for the CLI and the server);
//! - [`resolve`]: finds the topology: built in ([`builtin`]), [`rules`], then [`lookup`];
//! - [`decision`]: the pure decision from the request and the resolved topology.

pub mod builtin;
pub mod cli;
pub mod decision;
pub mod lookup;
pub mod resolve;
pub mod review;
pub mod rules;
pub mod source;
pub mod topology;

use std::io::{Read as _, Write as _};

use thiserror::Error;

use crate::cli::{Cli, Command, ReviewArgs};
use crate::resolve::Resolver;
use crate::review::{MAX_REVIEW_BYTES, ReviewError, Reviewer};
use crate::rules::{Rules, RulesError};

/// Why a command failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    #[error("--rules: {0}")]
    Rules(#[from] RulesError),
    #[error("cannot read stdin: {0}")]
    Stdin(#[source] std::io::Error),
    #[error("stdin: {0}")]
    Review(#[from] ReviewError),
    #[error("cannot write stdout: {0}")]
    Stdout(#[source] std::io::Error),
}

/// Builds the reviewer the topology and decision flags describe; a bad rules file is
/// refused here, at start-up.
pub fn reviewer(args: &ReviewArgs) -> Result<Reviewer, Error> {
    let rules = Rules::load(&args.topology.rules)?;
    let resolver = Resolver::new(rules).with_deadline(args.topology.lookup_timeout);
    Ok(Reviewer::new(resolver, args.decision.config()))
}

/// Runs the command.
pub async fn run(cli: Cli) -> Result<(), Error> {
    match cli.command {
        Command::Review(args) => {
            let reviewer = reviewer(&args)?;
            let mut body = Vec::new();
            // One byte more than allowed tells "too large" from "exactly the limit".
            std::io::stdin()
                .take(MAX_REVIEW_BYTES as u64 + 1)
                .read_to_end(&mut body)
                .map_err(Error::Stdin)?;
            let answer = reviewer.review(&body).await?;
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(&answer).map_err(Error::Stdout)?;
            stdout.flush().map_err(Error::Stdout)?;
            Ok(())
        }
    }
}
