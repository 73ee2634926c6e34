//! `node-ip-helper`: work in progress; this crate holds its command-line surface so
//! far. See the project's issues for what lands next.

use clap::Parser;

/// Chooses a node's IP addresses the way the cloud controller manager will accept them, and hands them to kubelet.
#[derive(Debug, Parser)]
#[command(name = "node-ip-helper", version, arg_required_else_help = true)]
struct Args {}

fn main() {
    let Args {} = Args::parse();
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn command_line_is_well_formed() {
        super::Args::command().debug_assert();
    }
}
