//! `cloud-credential-provider`: see the library crate for what it does.

use std::process::ExitCode;

use credential_provider::cli::Cli;
use suite_program::Program;

/// Every failure, a mistake in the command line or its environment included,
/// is one line, escaped and bounded, for kubelet's log.
const PROGRAM: Program = Program {
    error_prefix: "cloud-credential-provider: ",
    max_error_line: credential_provider::MAX_ERROR_LINE,
};

fn main() -> ExitCode {
    // One request at a time: a current-thread runtime starts fastest.
    let runtime = tokio::runtime::Builder::new_current_thread();
    PROGRAM.run(runtime, |cli: Cli| {
        credential_provider::run(cli, std::io::stdin().lock(), std::io::stdout().lock())
    })
}
