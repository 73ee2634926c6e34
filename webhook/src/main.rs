//! `pv-topology-webhook`: work in progress; this crate holds its command-line surface so
//! far. See the project's issues for what lands next.

use clap::Parser;

/// Mutating admission webhook that gives manually created PersistentVolumes their topology (zone/region labels and nodeAffinity).
#[derive(Debug, Parser)]
#[command(name = "pv-topology-webhook", version, arg_required_else_help = true)]
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
