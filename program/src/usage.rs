//! Command lines that do not parse: one line for stderr (clap's own text spans
//! several lines, with usage and tips, and reads as several entries in kubelet's
//! or journald's log), naming the environment variable when the bad value came
//! from one (a systemd `EnvironmentFile`'s or kubelet `env`'s user fixes the
//! variable, not a flag), the flag otherwise, with the reason and a hint.
//!
//! Values are shown only as the value parsers quote them, so that a parser can
//! keep a password out.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Command, FromArgMatches as _, Parser};

use crate::LogArgs;

/// A command line that did not give a program to run.
#[derive(Debug)]
pub(crate) enum Usage {
    /// `--help`, `--version` or `help`: clap's text, for stdout, and exit status 0.
    Shown(clap::Error),
    /// A mistake, as one line (without the program's prefix), for stderr and exit
    /// status 1.
    Refused(String),
}

/// Parses `args` (the program's name first) as the command line `C`, which
/// flattens [`LogArgs`], and the log flags in it.
pub(crate) fn parse_from<C: Parser>(args: impl IntoIterator<Item = OsString>) -> Result<(C, LogArgs), Usage> {
    let args: Vec<OsString> = args.into_iter().collect();
    let command = C::command();
    try_parse::<C>(command.clone(), &args).map_err(|error| {
        if !error.use_stderr() {
            return Usage::Shown(error);
        }
        let variable = variable_at_fault::<C>(&command, &args, &error);
        Usage::Refused(usage_error_line(&command, &error, variable.as_deref()))
    })
}

fn try_parse<C: Parser>(mut command: Command, args: &[OsString]) -> Result<(C, LogArgs), clap::Error> {
    let mut matches = command.try_get_matches_from_mut(args)?;
    let parsed = LogArgs::from_arg_matches(&matches).and_then(|log| Ok((C::from_arg_matches_mut(&mut matches)?, log)));
    parsed.map_err(|error| error.format(&mut command))
}

/// The environment variable whose value `error` refuses, if it came from one.
///
/// clap's error does not say where a value came from, and a value is read from
/// the variable only when the flag is absent. So: for each argument the error
/// names whose variable is set, parse again with that argument's variable
/// ignored; if the same error does not come back, the variable was its cause.
fn variable_at_fault<C: Parser>(command: &Command, args: &[OsString], error: &clap::Error) -> Option<String> {
    // The argument refused, and for a conflict the others it meets.
    let mut named: Vec<String> = Vec::new();
    if let Some(ContextValue::String(shown)) = error.get(ContextKind::InvalidArg) {
        named.push(shown.clone());
    }
    if error.kind() == ErrorKind::ArgumentConflict {
        match error.get(ContextKind::PriorArg) {
            Some(ContextValue::String(shown)) => named.push(shown.clone()),
            Some(ContextValue::Strings(shown)) => named.extend(shown.iter().cloned()),
            _ => {}
        }
    }
    let same_error = |other: &clap::Error| {
        other.kind() == error.kind() && other.get(ContextKind::InvalidArg) == error.get(ContextKind::InvalidArg)
    };
    arguments(command)
        .into_iter()
        .filter(|arg| {
            named.contains(&arg.shown) && arg.variable.as_ref().is_some_and(|v| std::env::var_os(v).is_some())
        })
        .find(|arg| {
            let ignored = without_variable(command.clone(), &arg.path, &arg.id);
            try_parse::<C>(ignored, args)
                .err()
                .is_none_or(|again| !same_error(&again))
        })
        .and_then(|arg| arg.variable)
}

/// An argument of a command or of one of its subcommands.
struct Argument {
    /// The names of the subcommands leading to it.
    path: Vec<String>,
    id: clap::Id,
    /// As clap's errors show it: `--name <VALUE>`.
    shown: String,
    variable: Option<String>,
}

/// Every argument of `command` and of its subcommands (a global one once).
fn arguments(command: &Command) -> Vec<Argument> {
    // Only a built command can show its arguments; the built one also holds
    // each global argument in every subcommand, so the walk is over the other.
    let mut built = command.clone();
    built.build();
    let mut out = Vec::new();
    collect_arguments(command, &built, &mut Vec::new(), &mut out);
    out
}

fn collect_arguments(command: &Command, built: &Command, path: &mut Vec<String>, out: &mut Vec<Argument>) {
    for arg in command.get_arguments() {
        let shown = built
            .get_arguments()
            .find(|b| b.get_id() == arg.get_id())
            .unwrap_or(arg);
        out.push(Argument {
            path: path.clone(),
            id: arg.get_id().clone(),
            shown: shown.to_string(),
            variable: arg.get_env().map(|v| v.to_string_lossy().into_owned()),
        });
    }
    for sub in command.get_subcommands() {
        if let Some(built_sub) = built.find_subcommand(sub.get_name()) {
            path.push(sub.get_name().to_owned());
            collect_arguments(sub, built_sub, path, out);
            path.pop();
        }
    }
}

/// `command` with the argument `id` of the subcommand at `path` reading no
/// environment variable.
fn without_variable(command: Command, path: &[String], id: &clap::Id) -> Command {
    match path.split_first() {
        None => command.mut_arg(id, |arg| arg.env(None::<&'static str>)),
        Some((first, rest)) => command.mut_subcommand(first, |sub| without_variable(sub, rest, id)),
    }
}

/// A command-line `error` of `command` as one line: what is wrong, naming the
/// flag, or `variable` when the bad value came from that environment variable,
/// then the reason and a hint (the valid values, `see --help`).
pub fn usage_error_line(command: &Command, error: &clap::Error, variable: Option<&str>) -> String {
    let context = |kind| error.get(kind);
    let text = |kind| match context(kind) {
        Some(ContextValue::String(text)) => Some(text.as_str()),
        _ => None,
    };
    let list = |kind| match context(kind) {
        Some(ContextValue::Strings(list)) => list.clone(),
        Some(ContextValue::String(text)) => vec![text.clone()],
        _ => Vec::new(),
    };
    let arg = text(ContextKind::InvalidArg).unwrap_or("an argument");
    let subject = match variable {
        Some(variable) => format!("in environment variable {variable} ({arg})"),
        None => format!("for {arg}"),
    };
    let hint = match variable {
        Some(_) => " (fix or unset the variable; see --help)",
        None => " (see --help)",
    };
    let message = match error.kind() {
        ErrorKind::ValueValidation => match std::error::Error::source(error) {
            Some(reason) => format!("invalid value {subject}: {reason}"),
            None => format!("invalid value {subject}"),
        },
        ErrorKind::InvalidValue => {
            // clap's "a value is required" is this kind with an empty value.
            let problem = match (text(ContextKind::InvalidValue), variable) {
                (Some("") | None, Some(variable)) => format!("environment variable {variable} ({arg}) is empty"),
                (Some("") | None, None) => format!("a value is required for {arg}"),
                (Some(_), _) => format!("invalid value {subject}"),
            };
            match list(ContextKind::ValidValue) {
                valid if valid.is_empty() => problem,
                valid => format!("{problem}: use one of: {}", valid.join(", ")),
            }
        }
        ErrorKind::MissingRequiredArgument => {
            let missing: Vec<String> = list(ContextKind::InvalidArg)
                .into_iter()
                .map(|shown| match variable_of(command, &shown) {
                    Some(variable) => format!("{shown} (or set {variable})"),
                    None => shown,
                })
                .collect();
            format!("required but not given: {}", missing.join(", "))
        }
        ErrorKind::MissingSubcommand | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            format!("a subcommand is required, one of: {}", subcommands(command).join(", "))
        }
        ErrorKind::InvalidSubcommand => {
            let name = text(ContextKind::InvalidSubcommand).unwrap_or_default();
            let suggested = list(ContextKind::SuggestedSubcommand);
            let guess = match suggested.first() {
                Some(guess) => format!(" (did you mean {guess}?)"),
                None => String::new(),
            };
            format!(
                "unknown subcommand {name:?}{guess}: use one of: {}",
                subcommands(command).join(", ")
            )
        }
        ErrorKind::ArgumentConflict => {
            let mark = |shown: String| match variable {
                Some(variable) if variable_of(command, &shown).as_deref() == Some(variable) => {
                    format!("{shown} (set by environment variable {variable})")
                }
                _ => shown,
            };
            match list(ContextKind::PriorArg) {
                others if others.is_empty() => {
                    format!("{} cannot be used with the other arguments given", mark(arg.to_owned()))
                }
                others => {
                    let others: Vec<String> = others.into_iter().map(mark).collect();
                    format!("{} cannot be used with {}", mark(arg.to_owned()), others.join(", "))
                }
            }
        }
        ErrorKind::UnknownArgument => match text(ContextKind::SuggestedArg) {
            Some(guess) => format!("unknown argument {arg} (did you mean {guess}?)"),
            None => format!("unknown argument {arg}"),
        },
        _ => rendered_as_one_line(error, variable),
    };
    format!("{message}{hint}")
}

/// clap's text of `error` without its usage and "For more information" lines,
/// joined into one, with `variable` named if the value came from it.
fn rendered_as_one_line(error: &clap::Error, variable: Option<&str>) -> String {
    let rendered = error.render().to_string();
    let mut line = String::new();
    for part in rendered.lines().map(str::trim) {
        if part.is_empty() || part.starts_with("Usage:") || part.starts_with("For more information") {
            continue;
        }
        if !line.is_empty() {
            line.push_str(if line.ends_with(':') { " " } else { "; " });
        }
        line.push_str(part.strip_prefix("error: ").unwrap_or(part));
    }
    match variable {
        Some(variable) => format!("{line} (from environment variable {variable})"),
        None => line,
    }
}

/// The environment variable of the argument clap shows as `shown`, if it has one.
fn variable_of(command: &Command, shown: &str) -> Option<String> {
    arguments(command)
        .into_iter()
        .filter(|arg| arg.shown == shown)
        .find_map(|arg| arg.variable)
}

/// The names of `command`'s subcommands, as `--help` lists them.
fn subcommands(command: &Command) -> Vec<&str> {
    command
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set())
        .map(Command::get_name)
        .collect()
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, Subcommand};

    use super::*;

    /// A variable every test process has, so that a test can read a value from the
    /// environment without changing it (which would race the other tests).
    const SET: &str = "PATH";

    fn refuse_slashes(text: &str) -> Result<String, String> {
        match text.contains('/') {
            true => Err("contains '/': use a plain name".to_owned()),
            false => Ok(text.to_owned()),
        }
    }

    #[derive(Debug, Parser)]
    #[command(name = "demo")]
    struct Cli {
        #[command(flatten)]
        log: LogArgs,
        #[command(subcommand)]
        command: Sub,
    }

    #[derive(Debug, Subcommand)]
    enum Sub {
        /// Reads a name from a flag or from `PATH`, which always has a '/'.
        Named {
            #[arg(long, short, env = SET, value_parser = refuse_slashes)]
            name: Option<String>,
            #[arg(long, env = "DEMO_COLOUR_NOT_SET", value_enum, default_value = "red")]
            colour: Colour,
        },
        /// Needs a file.
        Filed {
            #[arg(long, env = "DEMO_FILE_NOT_SET")]
            file: String,
            #[arg(long)]
            count: Option<u32>,
            /// Any text, from `PATH` when not given.
            #[arg(long, env = SET)]
            search: Option<String>,
            #[arg(long, conflicts_with = "search")]
            no_search: bool,
        },
    }

    #[derive(Debug, Clone, Copy, clap::ValueEnum)]
    enum Colour {
        Red,
        Green,
    }

    fn refused(args: &[&str]) -> String {
        let argv = std::iter::once("demo").chain(args.iter().copied()).map(OsString::from);
        match parse_from::<Cli>(argv) {
            Err(Usage::Refused(line)) => line,
            Err(Usage::Shown(text)) => panic!("{args:?} shown: {text}"),
            Ok(_) => panic!("{args:?} parsed"),
        }
    }

    #[test]
    fn command_line_is_well_formed() {
        Cli::command().debug_assert();
        assert!(std::env::var_os(SET).is_some_and(|path| path.to_string_lossy().contains('/')));
        assert!(std::env::var_os("DEMO_COLOUR_NOT_SET").is_none());
    }

    #[test]
    fn a_bad_value_from_the_environment_names_the_variable() {
        assert_eq!(
            refused(&["named"]),
            format!(
                "invalid value in environment variable {SET} (--name <NAME>): contains '/': use a plain name \
                 (fix or unset the variable; see --help)"
            )
        );
    }

    #[test]
    fn a_bad_flag_is_the_flags_fault_even_with_its_variable_set() {
        // --name outranks PATH, in each of clap's spellings.
        for args in [
            &["named", "--name", "a/b"][..],
            &["named", "--name=a/b"],
            &["named", "-n", "a/b"],
            &["named", "-na/b"],
        ] {
            assert_eq!(
                refused(args),
                "invalid value for --name <NAME>: contains '/': use a plain name (see --help)",
                "{args:?}"
            );
        }
        // A good flag hides the bad variable: no error at all.
        let args = ["demo", "named", "--name", "plain"].map(OsString::from);
        assert!(parse_from::<Cli>(args).is_ok());
        // An error on another flag is that flag's, not the variable's.
        assert_eq!(
            refused(&["named", "--name", "plain", "--colour", "blue"]),
            "invalid value for --colour <COLOUR>: use one of: red, green (see --help)"
        );
        assert_eq!(
            refused(&["filed", "--file", "f", "--count", "many"]),
            "invalid value for --count <COUNT>: invalid digit found in string (see --help)"
        );
    }

    #[test]
    fn a_global_flag_is_named_under_any_subcommand() {
        assert!(refused(&["filed", "--file", "f", "--log-level", "loud"]).starts_with(
            "invalid value for --log-level <LEVEL>: invalid log level \"loud\": use off, error, warn, info, debug or trace"
        ));
    }

    #[test]
    fn a_conflict_names_the_variable_that_set_one_side() {
        assert_eq!(
            refused(&["filed", "--file", "f", "--no-search"]),
            format!(
                "--no-search cannot be used with --search <SEARCH> (set by environment variable {SET}) \
                 (fix or unset the variable; see --help)"
            )
        );
        assert_eq!(
            refused(&["filed", "--file", "f", "--no-search", "--search", "x"]),
            "--no-search cannot be used with --search <SEARCH> (see --help)"
        );
    }

    #[test]
    fn other_mistakes_are_one_line_with_the_hint() {
        assert_eq!(
            refused(&[]),
            "a subcommand is required, one of: named, filed (see --help)"
        );
        assert_eq!(
            refused(&["filed"]),
            "required but not given: --file <FILE> (or set DEMO_FILE_NOT_SET) (see --help)"
        );
        assert_eq!(
            refused(&["nmaed"]),
            "unknown subcommand \"nmaed\" (did you mean named?): use one of: named, filed (see --help)"
        );
        assert_eq!(
            refused(&["filed", "--fil", "f"]),
            "unknown argument --fil (did you mean --file?) (see --help)"
        );
        assert_eq!(refused(&["filed", "--bogus"]), "unknown argument --bogus (see --help)");
        assert_eq!(
            refused(&["filed", "--file"]),
            "a value is required for --file <FILE> (see --help)"
        );
        assert_eq!(
            refused(&["named", "--colour"]),
            "a value is required for --colour <COLOUR>: use one of: red, green (see --help)"
        );
        // What has no line of its own keeps clap's text, on one line.
        let line = refused(&["filed", "--file", "a", "--file", "b"]);
        assert!(
            line.contains("--file <FILE>") && line.ends_with(" (see --help)"),
            "{line}"
        );
        assert!(!line.contains('\n') && !line.contains("Usage:"), "{line}");
    }

    #[test]
    fn help_and_version_are_shown_not_refused() {
        for args in [&["--help"][..], &["named", "--help"], &["help"]] {
            let args = std::iter::once("demo").chain(args.iter().copied()).map(OsString::from);
            assert!(matches!(parse_from::<Cli>(args), Err(Usage::Shown(_))));
        }
    }
}
