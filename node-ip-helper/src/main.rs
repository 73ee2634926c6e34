use std::process::ExitCode;

use clap::Parser;
use node_ip_helper::cli::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Cloud metadata sources speak TLS through the shared HTTP client.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("node-ip-helper: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(node_ip_helper::run(cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("node-ip-helper: {error}");
            ExitCode::FAILURE
        }
    }
}
