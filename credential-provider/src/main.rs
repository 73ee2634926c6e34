use std::process::ExitCode;

use clap::Parser;
use credential_provider::cli::Cli;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version succeed; a usage error is a failure like any
        // other, on one line for kubelet's log.
        Err(error) if !error.use_stderr() => {
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            fail(&credential_provider::cli::usage_error_line(&error));
            return ExitCode::FAILURE;
        }
    };
    // Only token-exchange makes TLS connections; installing is cheap.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match credential_provider::run(cli, std::io::stdin().lock(), std::io::stdout().lock()) {
        Ok(code) => code,
        Err(error) => {
            fail(&error.to_string());
            ExitCode::FAILURE
        }
    }
}

/// The one line kubelet logs: control characters escaped, length bounded.
fn fail(message: &str) {
    let line = cloud_access::logging::clean_text(message, &[], credential_provider::MAX_ERROR_LINE);
    eprintln!("cloud-credential-provider: {line}");
}
