//! `node-ip-helper`: see the library crate for what it does.

use std::process::ExitCode;

use suite_program::Program;

fn main() -> ExitCode {
    // Started at boot and done in a moment: one thread is enough.
    let runtime = tokio::runtime::Builder::new_current_thread();
    Program::new("node-ip-helper: ").run(runtime, node_ip_helper::run)
}
