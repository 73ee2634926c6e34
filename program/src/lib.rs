//! The one skeleton of the suite's programs. Each `main` is one call to
//! [`Program::run`] with the program's runtime and its library's `run`: the
//! command line (which flattens [`LogArgs`]) is parsed, the TLS crypto
//! provider is installed, logging starts, the runtime starts, and an error
//! reaches stderr as one line with exit status 1. So does a command line that
//! does not parse, naming the flag, or the environment variable when the bad
//! value came from one ([`usage_error_line`]); `--help` and `--version` print
//! to stdout with exit status 0.
//!
//! Flags become the library's types here and in each program's `cli.rs`:
//! `cloud-access` knows nothing of clap.

pub mod duration;
mod logging;
pub mod shell;
mod usage;

use std::fmt::Display;
use std::future::Future;
use std::process::ExitCode;

use clap::Parser;

pub use logging::{LogArgs, LogEnv, LogFormat, LogLevel, LogLevelError, init_logging};
use usage::Usage;
pub use usage::usage_error_line;

/// What differs between the programs at their edge.
#[derive(Debug, Clone, Copy)]
pub struct Program {
    /// Start of every error line, e.g. `"node-ip-helper: "`.
    pub error_prefix: &'static str,
    /// Longest error line, in characters (after the prefix).
    pub max_error_line: usize,
}

/// What a program's `run` may return on success.
pub trait Outcome {
    fn exit_code(self) -> ExitCode;
}

impl Outcome for ExitCode {
    fn exit_code(self) -> ExitCode {
        self
    }
}

impl Outcome for () {
    fn exit_code(self) -> ExitCode {
        ExitCode::SUCCESS
    }
}

impl Program {
    /// A bound on error lines long enough for any of the suite's messages.
    pub const MAX_ERROR_LINE: usize = 4096;

    /// A program whose error lines start with `error_prefix`.
    pub const fn new(error_prefix: &'static str) -> Self {
        Program {
            error_prefix,
            max_error_line: Self::MAX_ERROR_LINE,
        }
    }

    /// The whole of a `main`: parses the command line `C` (a mistake in it
    /// is one error line, exit status 1; `--help` and `--version` print to
    /// stdout, exit status 0), then [`Program::main`] with `run(cli)`.
    pub fn run<C: Parser, T: Outcome, E: Display, F: Future<Output = Result<T, E>>>(
        &self,
        runtime: tokio::runtime::Builder,
        run: impl FnOnce(C) -> F,
    ) -> ExitCode {
        match usage::parse_from::<C>(std::env::args_os()) {
            Ok((cli, log)) => self.main(&log, runtime, run(cli)),
            Err(Usage::Shown(text)) => {
                let _ = text.print();
                ExitCode::SUCCESS
            }
            Err(Usage::Refused(line)) => self.fail(&line),
        }
    }

    /// Runs `run` to its end on a runtime made from `runtime` (current-thread
    /// or multi-threaded, as the program chooses), after installing the
    /// crypto provider and starting logging, and turns its result into the
    /// exit status.
    pub fn main<T: Outcome, E: Display>(
        &self,
        log: &LogArgs,
        mut runtime: tokio::runtime::Builder,
        run: impl Future<Output = Result<T, E>>,
    ) -> ExitCode {
        install_crypto_provider();
        init_logging(log);
        let runtime = match runtime.enable_all().build() {
            Ok(runtime) => runtime,
            Err(error) => return self.fail(&format!("cannot start the async runtime: {error}")),
        };
        match runtime.block_on(run) {
            Ok(outcome) => outcome.exit_code(),
            Err(error) => self.fail(&error.to_string()),
        }
    }

    /// Writes `message` to stderr as one line (control characters escaped,
    /// length bounded) after the program's prefix, and returns exit status 1.
    pub fn fail(&self, message: &str) -> ExitCode {
        eprintln!("{}", self.error_line(message));
        ExitCode::FAILURE
    }

    /// The line [`Program::fail`] writes.
    pub fn error_line(&self, message: &str) -> String {
        let line = cloud_access::logging::clean_text(message, &[], self.max_error_line);
        format!("{}{line}", self.error_prefix)
    }
}

/// Installs rustls's crypto provider for the process, before anything can
/// open a TLS connection. A second install is the only failure and is
/// harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A clap value parser for a switch (`--flag` alone is true) set by its environment
/// variable: clap's `BoolishValueParser` spellings (y/yes/t/true/on/1, n/no/f/false/off/0,
/// any case), as a systemd `EnvironmentFile` or a pod's `env:` writes them, and
/// empty as false (`VAR=` there means "not set"), with a message that lists them
/// (clap's says only "value was not a boolean"). All three programs' switches use it.
pub fn boolish(text: &str) -> Result<bool, String> {
    use clap::builder::TypedValueParser as _;
    if text.is_empty() {
        return Ok(false);
    }
    let command = clap::Command::new("switch");
    clap::builder::BoolishValueParser::new()
        .parse_ref(&command, None, std::ffi::OsStr::new(text))
        .map_err(|_| format!("{text:?} is not a boolean: use true or false (or 1/0, yes/no, on/off, y/n, t/f)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEMO: Program = Program {
        error_prefix: "demo: error: ",
        max_error_line: 20,
    };

    fn log() -> LogArgs {
        LogArgs {
            log_level: "off".parse().unwrap(),
            log_format: LogFormat::Text,
        }
    }

    fn runtime() -> tokio::runtime::Builder {
        tokio::runtime::Builder::new_current_thread()
    }

    #[test]
    fn outcomes_become_exit_codes() {
        assert_eq!(().exit_code(), ExitCode::SUCCESS);
        assert_eq!(ExitCode::from(3).exit_code(), ExitCode::from(3));
        assert_eq!(
            DEMO.main(&log(), runtime(), async { Ok::<_, String>(()) }),
            ExitCode::SUCCESS
        );
        let code = DEMO.main(&log(), runtime(), async { Ok::<_, String>(ExitCode::from(4)) });
        assert_eq!(code, ExitCode::from(4));
        let code = DEMO.main(&log(), runtime(), async { Err::<(), _>("broken") });
        assert_eq!(code, ExitCode::FAILURE);
    }

    #[derive(Debug, Parser)]
    #[command(name = "demo")]
    struct Cli {
        #[command(flatten)]
        log: LogArgs,
        #[arg(long)]
        name: Option<String>,
    }

    #[test]
    fn the_log_flags_come_with_the_command_line() {
        let args = ["demo", "--name", "x", "--log-level", "info", "--log-format", "json"].map(Into::into);
        let (cli, log) = usage::parse_from::<Cli>(args).expect("the command line parses");
        assert_eq!(cli.name.as_deref(), Some("x"));
        assert_eq!(log.log_format, LogFormat::Json);
        assert_eq!(cli.log.log_format, LogFormat::Json);
        let args = ["demo", "--log-level", "loud"].map(Into::into);
        assert!(usage::parse_from::<Cli>(args).is_err());
    }

    #[test]
    fn switches_take_the_boolish_spellings() {
        for on in ["1", "y", "yes", "t", "true", "on", "YES", "On"] {
            assert_eq!(boolish(on), Ok(true), "{on}");
        }
        for off in ["0", "n", "no", "f", "false", "off", "NO", "Off"] {
            assert_eq!(boolish(off), Ok(false), "{off}");
        }
        let refused = boolish("maybe").unwrap_err();
        assert!(
            refused.starts_with("\"maybe\" is not a boolean") && refused.contains("1/0"),
            "{refused}"
        );
        assert_eq!(boolish(""), Ok(false));
        assert!(boolish("2").is_err() && boolish(" 1").is_err());
    }

    #[test]
    fn errors_are_one_bounded_line() {
        assert_eq!(DEMO.error_line("bad\nforged line"), "demo: error: bad\\nforged line");
        assert_eq!(
            DEMO.error_line(&"x".repeat(50)),
            format!("demo: error: {}…", "x".repeat(19))
        );
    }
}
