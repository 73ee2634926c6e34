//! `pv-topology-webhook`: see the library crate for what it does.

use std::process::ExitCode;

use clap::Parser;
use pv_topology_webhook::cli::Cli;
use suite_program::Program;

const PROGRAM: Program = Program {
    error_prefix: "pv-topology-webhook: error: ",
    max_error_line: Program::MAX_ERROR_LINE,
};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let log = cli.log.clone();
    // Multi-threaded: `serve` answers on every core, one worker per core.
    PROGRAM.main(
        &log,
        tokio::runtime::Builder::new_multi_thread(),
        pv_topology_webhook::run(cli),
    )
}
