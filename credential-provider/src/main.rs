//! `cloud-credential-provider`: see the library crate for what it does.

use std::process::ExitCode;

use credential_provider::cli::Cli;
use suite_program::Program;

/// Every failure is one line, escaped and bounded, for kubelet's log.
const PROGRAM: Program = Program {
    error_prefix: "cloud-credential-provider: ",
    max_error_line: credential_provider::MAX_ERROR_LINE,
};

fn main() -> ExitCode {
    let (cli, log) = match suite_program::parse::<Cli>() {
        Ok(parsed) => parsed,
        // --help and --version succeed; a usage error is a failure like any
        // other, on one line for kubelet's log.
        Err(error) if !error.use_stderr() => {
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error) => return PROGRAM.fail(&credential_provider::cli::usage_error_line(&error)),
    };
    // One request at a time: a current-thread runtime starts fastest.
    let run = credential_provider::run(cli, std::io::stdin().lock(), std::io::stdout().lock());
    PROGRAM.main(&log, tokio::runtime::Builder::new_current_thread(), run)
}
