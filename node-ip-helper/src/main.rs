use std::process::ExitCode;

use clap::Parser;
use node_ip_helper::cli::Cli;
use suite_program::Program;

const PROGRAM: Program = Program {
    error_prefix: "node-ip-helper: ",
    max_error_line: Program::MAX_ERROR_LINE,
};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let log = cli.log.clone();
    // Started at boot and done in a moment: one thread is enough.
    PROGRAM.main(
        &log,
        tokio::runtime::Builder::new_current_thread(),
        node_ip_helper::run(cli),
    )
}
