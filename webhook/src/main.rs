//! `pv-topology-webhook`: see the library crate for what it does.

use std::process::ExitCode;

use clap::Parser;
use pv_topology_webhook::cli::Cli;

// Multi-threaded: `serve` answers on every core. One worker per core by default.
#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // Installed once, before anything can open a TLS connection; a second install is the
    // only failure and is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    if let Err(error) = cloud_access::logging::init(&cli.log.log_level, cli.log.log_format) {
        eprintln!("pv-topology-webhook: error: --log-level: {error}");
        return ExitCode::FAILURE;
    }
    match pv_topology_webhook::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // The library's messages already carry their causes: one line, no chain.
            eprintln!("pv-topology-webhook: error: {error}");
            ExitCode::FAILURE
        }
    }
}
