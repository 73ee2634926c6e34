//! docs/webhook.md stays true to the command line: every subcommand and flag is there.

use clap::CommandFactory as _;
use pv_topology_webhook::cli::Cli;

#[test]
fn every_flag_is_documented() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/webhook.md");
    let docs = std::fs::read_to_string(&path).unwrap();
    let cli = Cli::command();
    let mut missing = Vec::new();
    for command in std::iter::once(&cli).chain(cli.get_subcommands()) {
        if command.get_name() != cli.get_name() && !docs.contains(&format!("### `{}", command.get_name())) {
            missing.push(format!("section for `{}`", command.get_name()));
        }
        for arg in command.get_arguments() {
            if let Some(long) = arg.get_long()
                && long != "help"
                && long != "version"
                && !docs.contains(&format!("`--{long}"))
            {
                missing.push(format!("{} --{long}", command.get_name()));
            }
            if let Some(default) = arg.get_default_values().first()
                && let Some(long) = arg.get_long()
            {
                let row = docs.lines().find(|l| l.starts_with(&format!("| `--{long}")));
                if let Some(row) = row
                    && !row.contains(&format!("`{}`", default.to_string_lossy()))
                {
                    missing.push(format!("--{long} default {:?}", default.to_string_lossy()));
                }
            }
        }
    }
    assert!(missing.is_empty(), "not in {}: {missing:?}", path.display());
}
