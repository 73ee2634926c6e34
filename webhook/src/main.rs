//! `pv-topology-webhook`: see the library crate for what it does.

use std::process::ExitCode;

use suite_program::Program;

fn main() -> ExitCode {
    // Multi-threaded: `serve` answers on every core, one worker per core.
    let runtime = tokio::runtime::Builder::new_multi_thread();
    Program::new("pv-topology-webhook: ").run(runtime, pv_topology_webhook::run)
}
