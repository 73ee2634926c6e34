use std::process::ExitCode;

use clap::Parser;
use credential_provider::cli::Cli;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version succeed; a usage error is a failure like any
        // other, and kubelet logs what clap printed.
        Err(error) => {
            let _ = error.print();
            return if error.use_stderr() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    // Only token-exchange makes TLS connections; installing is cheap.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match credential_provider::run(cli, std::io::stdin().lock(), std::io::stdout().lock()) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("cloud-credential-provider: {error}");
            ExitCode::FAILURE
        }
    }
}
