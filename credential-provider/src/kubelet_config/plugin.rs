//! The provider entries that run this plugin, judged as the plugin will
//! judge them: kubelet runs `<bin dir>/<name> args...` with its own
//! environment followed by the entry's `env`, and a command line the plugin
//! refuses fails every pull with one line in kubelet's log (kubelet then
//! pulls anonymously), while kubelet itself accepts the config.
//!
//! clap reads flags' variables from the process environment, and there is
//! no safe way to give it another: the entry's command line is parsed by a
//! child, this binary run with the entry's args and its `env` alone
//! (kubelet's own environment is not known here), plus
//! [`CHECK_ONLY_VARIABLE`], which makes it stop once its command line is
//! parsed. So the child parses exactly as the plugin's `main` does.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clap::CommandFactory;

use super::Provider;
use crate::cli::{Cli, Command as Subcommand};
use crate::mirror::Mirroring;

/// The name kubelet runs this plugin by, unless linked under another.
pub const PLUGIN_NAME: &str = "cloud-credential-provider";

/// Set (to [`CHECK_ONLY_VALUE`]) in the child's environment: the plugin
/// parses its command line, then stops with [`CHECK_ONLY_EXIT`] and a line
/// saying so, instead of answering (so the variable set by mistake fails
/// every pull loudly).
pub const CHECK_ONLY_VARIABLE: &str = "CLOUD_CREDENTIAL_PROVIDER_CHECK_ONLY";
pub const CHECK_ONLY_VALUE: &str = "check-config";
pub const CHECK_ONLY_EXIT: u8 = 3;

/// Most of a child's output read: its one line is at most 1500
/// characters, its help a few KiB.
const MAX_CHILD_OUTPUT: u64 = 64 * 1024;

/// What kubelet finds at `<bin dir>/<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binary {
    /// This plugin: by its name, a link to it, or a copy of it.
    ThisPlugin,
    Other,
    /// kubelet's `exec.LookPath` fails: kubelet exits at start.
    Missing(String),
}

/// kubelet's lookup of `name` in `bin_dir` (`exec.LookPath`: it exists, is
/// no directory, has an execute bit), and whether it is this plugin:
/// `this_exe` is the binary running now.
pub fn find_binary(bin_dir: &Path, name: &str, this_exe: Option<&Path>) -> Binary {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let path = bin_dir.join(name);
    let shown = path.display();
    let metadata = match std::fs::metadata(&path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Binary::Missing(format!("no executable {shown}: it does not exist"));
        }
        Err(e) => return Binary::Missing(format!("no executable {shown}: {e}")),
    };
    if metadata.is_dir() {
        return Binary::Missing(format!("no executable {shown}: it is a directory"));
    }
    if metadata.permissions().mode() & 0o111 == 0 {
        return Binary::Missing(format!("no executable {shown}: no execute permission"));
    }
    let by_name = std::fs::canonicalize(&path)
        .ok()
        .is_some_and(|real| real.file_name().is_some_and(|n| n == PLUGIN_NAME));
    if name == PLUGIN_NAME || by_name {
        return Binary::ThisPlugin;
    }
    let Some(this) = this_exe.and_then(|exe| std::fs::metadata(exe).ok().map(|m| (exe, m))) else {
        return Binary::Other;
    };
    let same_file = metadata.dev() == this.1.dev() && metadata.ino() == this.1.ino();
    if same_file || (metadata.len() == this.1.len() && same_bytes(&path, this.0)) {
        Binary::ThisPlugin
    } else {
        Binary::Other
    }
}

/// Whether two files of the same length hold the same bytes.
fn same_bytes(a: &Path, b: &Path) -> bool {
    let (Ok(mut a), Ok(mut b)) = (std::fs::File::open(a), std::fs::File::open(b)) else {
        return false;
    };
    let (mut buf_a, mut buf_b) = (vec![0; 64 * 1024], vec![0; 64 * 1024]);
    loop {
        let n = match a.read(&mut buf_a) {
            Ok(n) => n,
            Err(_) => return false,
        };
        if n == 0 {
            return b.read(&mut buf_b[..1]).is_ok_and(|m| m == 0);
        }
        if b.read_exact(&mut buf_b[..n]).is_err() || buf_a[..n] != buf_b[..n] {
            return false;
        }
    }
}

/// In the child ([`CHECK_ONLY_VARIABLE`] set): the command line parsed,
/// whether kubelet could run it as a backend. Never answers a request.
pub fn check_only(command: &Subcommand) -> Result<std::process::ExitCode, String> {
    let tool = match command {
        Subcommand::Explain(_) => "explain",
        Subcommand::CheckConfig(_) => "check-config",
        _ => {
            eprintln!(
                "{PLUGIN_NAME}: {CHECK_ONLY_VARIABLE} is set, so the command line was only checked (check-config \
                 sets it for its own check): unset it"
            );
            return Ok(std::process::ExitCode::from(CHECK_ONLY_EXIT));
        }
    };
    Err(format!(
        "`{tool}` is an operator tool, not a backend: kubelet would get no CredentialProviderResponse; name a backend \
         first: {}",
        backend_names().join(", ")
    ))
}

/// [`CHECK_ONLY_VARIABLE`]'s value for `explain`'s child: the command line
/// parsed, it prints the mirror (JSON, `null` for none) the image in
/// [`EXPLAIN_IMAGE_VARIABLE`] is pulled through, and stops with
/// [`CHECK_ONLY_EXIT`].
pub const MIRROR_ONLY_VALUE: &str = "explain-mirror";
pub const EXPLAIN_IMAGE_VARIABLE: &str = "CLOUD_CREDENTIAL_PROVIDER_EXPLAIN_IMAGE";

/// What a child run by `check-config` or `explain` is to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildMode {
    /// Stop once the command line is parsed.
    Check,
    /// Say the mirror of `explain`'s image.
    Mirror,
}

/// The child's mode, `None` when kubelet (or anyone else) runs the plugin.
pub fn child_mode() -> Option<ChildMode> {
    let value = std::env::var_os(CHECK_ONLY_VARIABLE)?;
    if value == CHECK_ONLY_VALUE {
        Some(ChildMode::Check)
    } else if value == MIRROR_ONLY_VALUE {
        Some(ChildMode::Mirror)
    } else {
        None
    }
}

/// In `explain`'s child: the mirror the image is pulled through under
/// this command line, as JSON on `stdout`.
pub fn mirror_only(command: &Subcommand, mut stdout: impl std::io::Write) -> Result<std::process::ExitCode, String> {
    let Some(settings) = command.mirror_settings() else {
        return check_only(command);
    };
    let image = std::env::var(EXPLAIN_IMAGE_VARIABLE)
        .map_err(|_| format!("{EXPLAIN_IMAGE_VARIABLE} is not set: explain sets it for its own check"))?;
    let found = settings
        .resolve(&crate::image::repository(&image))
        .map_err(|e| e.to_string())?;
    let json = serde_json::to_string(&found).map_err(|e| e.to_string())?;
    writeln!(stdout, "{json}").map_err(|e| format!("cannot write to stdout: {e}"))?;
    // Set by mistake where kubelet runs the plugin, this fails every pull: say so.
    eprintln!(
        "{PLUGIN_NAME}: {CHECK_ONLY_VARIABLE} is set to {MIRROR_ONLY_VALUE}, so only the image's registry mirror was \
         said (explain sets it for its own check): unset it"
    );
    Ok(std::process::ExitCode::from(CHECK_ONLY_EXIT))
}

/// The mirror `repository` is pulled through under the entry's command
/// line: `exe ARGS` run with the entry's env alone, as [`judge`] runs it.
pub fn mirror_of(provider: &Provider, exe: &Path, repository: &str) -> Result<Option<Mirroring>, String> {
    let (status, stdout, stderr) = run_child(
        provider,
        exe,
        &[
            (CHECK_ONLY_VARIABLE, MIRROR_ONLY_VALUE),
            (EXPLAIN_IMAGE_VARIABLE, repository),
        ],
    )
    .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    match status.code() {
        Some(code) if code == i32::from(CHECK_ONLY_EXIT) => serde_json::from_slice(&stdout)
            .map_err(|e| format!("{} answered no mirror this explain reads: {e}", exe.display())),
        _ => Err(first_line(&stderr)),
    }
}

/// Runs `exe ARGS` with the entry's env alone and `mode`'s variables; its
/// exit status and the first [`MAX_CHILD_OUTPUT`] bytes of its output.
fn run_child(
    provider: &Provider,
    exe: &Path,
    mode: &[(&str, &str)],
) -> std::io::Result<(std::process::ExitStatus, Vec<u8>, Vec<u8>)> {
    let mut child = Command::new(exe)
        .args(&provider.args)
        .env_clear()
        .envs(provider.env.iter().map(|e| (&e.name, &e.value)))
        .envs(mode.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    if let Some(pipe) = child.stdout.take() {
        pipe.take(MAX_CHILD_OUTPUT).read_to_end(&mut stdout)?;
    }
    if let Some(pipe) = child.stderr.take() {
        pipe.take(MAX_CHILD_OUTPUT).read_to_end(&mut stderr)?;
    }
    Ok((child.wait()?, stdout, stderr))
}

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// The subcommands kubelet can run: every visible one but the tools.
fn backend_names() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && !matches!(c.get_name(), "explain" | "check-config"))
        .map(|c| c.get_name().to_owned())
        .collect()
}

/// The plugin's refusal of one provider entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// `providers[i].args`, or `providers[i].env[j]` when that variable's
    /// value is what the plugin refuses.
    pub field: String,
    /// The plugin's own line, as kubelet logs it.
    pub says: String,
    /// What to write instead, for upstream plugins' spellings.
    pub hint: Option<String>,
    /// The variable refused, when it is one.
    pub variable: Option<String>,
}

/// Runs `exe ARGS` with the entry's env alone and [`CHECK_ONLY_VARIABLE`]:
/// `None` when the plugin takes its command line. `Err` when the check
/// itself could not run.
pub fn judge(index: usize, provider: &Provider, exe: &Path) -> Result<Option<Refusal>, String> {
    let refusal = |field: String, says: String| Refusal {
        field,
        says,
        hint: None,
        variable: None,
    };
    if let Some(j) = provider.env.iter().position(|e| e.name == CHECK_ONLY_VARIABLE) {
        return Ok(Some(refusal(
            format!("providers[{index}].env[{j}]"),
            format!("{CHECK_ONLY_VARIABLE} is check-config's own: the plugin would only check its command line"),
        )));
    }
    let output = run_child(provider, exe, &[(CHECK_ONLY_VARIABLE, CHECK_ONLY_VALUE)]);
    let (status, stdout, stderr) = match output {
        Ok(output) => output,
        // A NUL byte in an argument or a variable: Go's exec refuses it too.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
            return Ok(Some(refusal(
                format!("providers[{index}]"),
                format!("kubelet cannot start the plugin: {e} (an argument or variable holds a NUL byte)"),
            )));
        }
        Err(e) => return Err(format!("cannot run {} to check providers[{index}]: {e}", exe.display())),
    };
    let says = match status.code() {
        Some(code) if code == i32::from(CHECK_ONLY_EXIT) => return Ok(None),
        // --help or --version: text on stdout and exit 0, no answer.
        Some(0) => format!(
            "it prints its help or version on stdout and exits 0 ({:?}...), which kubelet cannot decode as a \
             CredentialProviderResponse: remove --help/--version",
            first_line(&stdout)
        ),
        Some(1) if !stderr.is_empty() => first_line(&stderr),
        _ => {
            return Err(format!(
                "{} exited with {status} when checking providers[{index}]: {}",
                exe.display(),
                first_line(&stderr)
            ));
        }
    };
    let variable = refused_variable(&says, provider);
    let field = match &variable {
        Some((j, _)) => format!("providers[{index}].env[{j}]"),
        None => format!("providers[{index}].args"),
    };
    let hints = upstream_hints(&provider.args);
    Ok(Some(Refusal {
        field,
        says,
        hint: (!hints.is_empty()).then(|| hints.join("; ")),
        variable: variable.map(|(_, name)| name),
    }))
}

/// The entry's variable whose value the plugin refuses: the plugin's line
/// names a variable when it was the value's source (the later of two
/// entries of one name, which wins in kubelet).
fn refused_variable(says: &str, provider: &Provider) -> Option<(usize, String)> {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let named = |name: &str| {
        says.match_indices(name)
            .any(|(at, _)| !word(says[..at].chars().next_back()) && !word(says[at + name.len()..].chars().next()))
    };
    let j = provider
        .env
        .iter()
        .rposition(|e| !e.name.is_empty() && named(&e.name))?;
    Some((j, provider.env[j].name.clone()))
}

/// klog's flags, which upstream plugins (built on klog) take.
const KLOG_FLAGS: [&str; 11] = [
    "v",
    "vmodule",
    "logtostderr",
    "alsologtostderr",
    "stderrthreshold",
    "log_dir",
    "log_file",
    "log-file",
    "skip_headers",
    "add_dir_header",
    "one_output",
];

/// Hints for upstream plugins' arguments, which this plugin does not take.
pub fn upstream_hints(args: &[String]) -> Vec<String> {
    let mut hints = Vec::new();
    if args.iter().any(|a| a == "get-credentials") {
        hints.push(
            "get-credentials is the first argument of upstream ecr-credential-provider and auth-provider-gcp; \
             this plugin's first argument is its backend: args: [ecr] for ECR, args: [gcp] for Google"
                .to_owned(),
        );
    }
    let klog = args.iter().find(|a| {
        let name = a.trim_start_matches('-');
        let name = name.split_once('=').map_or(name, |(n, _)| n);
        a.starts_with('-') && KLOG_FLAGS.contains(&name)
    });
    if let Some(flag) = klog {
        let name = flag.split_once('=').map_or(flag.as_str(), |(n, _)| n);
        hints.push(format!(
            "{name} is klog's flag, which upstream plugins take; this plugin logs to stderr at --log-level \
             (error by default; warn, info, debug) or CLOUD_CREDENTIAL_PROVIDER_LOG_LEVEL"
        ));
    }
    if args.first().is_some_and(|a| a.ends_with(".json") || a.starts_with('/')) {
        hints.push(
            "upstream acr-credential-provider takes the azure.json path first; this plugin takes its backend first: \
             args: [acr, /etc/kubernetes/azure.json]"
                .to_owned(),
        );
    }
    hints
}

/// Every variable this plugin's flags read starts with this (but the
/// variables of Google's and Azure's own libraries, such as
/// `GCE_METADATA_HOST`).
const VARIABLE_PREFIX: &str = "CLOUD_CREDENTIAL_PROVIDER_";

/// Upstream plugins' variables, which this plugin does not read.
const UPSTREAM_VARIABLES: [(&str, &str); 3] = [
    (
        "KUBE_SIDECAR_CACHE_DURATION",
        "auth-provider-gcp's cache duration: use --cache-duration (CLOUD_CREDENTIAL_PROVIDER_CACHE_DURATION)",
    ),
    (
        "KUBE_SIDECAR_CACHE_TYPE",
        "auth-provider-gcp's cache key type: this plugin's backend answers with its own",
    ),
    (
        "AWS_ECR_ROLE_ARN",
        "ecr-credential-provider's role: this plugin takes the role from the pod's service account annotation \
         (--role-annotation)",
    ),
];

/// For an entry the plugin takes: its variables that have no effect, as
/// `(field, message)`. A variable of this plugin's prefix that no flag of
/// the entry's backend reads is ignored, as a typo in a variable's name
/// is: said, with the nearest name, but no refusal (the plugin runs).
pub fn env_warnings(index: usize, provider: &Provider) -> Vec<(String, String)> {
    let command = Cli::command();
    let Some(backend) = provider
        .args
        .iter()
        .find_map(|arg| command.get_subcommands().find(|c| c.get_name() == arg))
    else {
        return Vec::new();
    };
    let variables = |command: &clap::Command| -> Vec<String> {
        command
            .get_arguments()
            .filter_map(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()))
            .collect()
    };
    let mut read = variables(&command);
    read.extend(variables(backend));
    let mut warnings = Vec::new();
    for (j, entry) in provider.env.iter().enumerate() {
        let name = entry.name.as_str();
        let field = format!("providers[{index}].env[{j}]");
        if let Some((_, why)) = UPSTREAM_VARIABLES.iter().find(|(upstream, _)| *upstream == name) {
            warnings.push((field, format!("{name} has no effect here: {why}")));
        } else if name.starts_with(VARIABLE_PREFIX) && name != CHECK_ONLY_VARIABLE && !read.iter().any(|r| r == name) {
            let nearest = read
                .iter()
                .map(|r| (edit_distance(r, name), r))
                .filter(|(distance, _)| *distance <= 3)
                .min();
            let suggestion = nearest.map_or_else(String::new, |(_, r)| format!(" (did you mean {r}?)"));
            warnings.push((
                field,
                format!(
                    "{name} has no effect: no flag of `{}` reads it{suggestion}",
                    backend.get_name()
                ),
            ));
        }
    }
    warnings
}

/// Levenshtein distance, for the nearest variable name.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

/// The binary that judges entries: this one.
pub fn this_exe() -> Option<PathBuf> {
    std::env::current_exe().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn hints_for_upstream_spellings() {
        let hints = upstream_hints(&strings(&["get-credentials", "--v=3"]));
        assert_eq!(hints.len(), 2, "{hints:?}");
        assert!(
            hints[0].contains("args: [ecr]") && hints[1].starts_with("--v is klog's"),
            "{hints:?}"
        );
        assert!(upstream_hints(&strings(&["gcp", "-v", "3"]))[0].starts_with("-v is klog's"));
        assert!(upstream_hints(&strings(&["/etc/kubernetes/azure.json"]))[0].contains("args: [acr,"));
        assert!(upstream_hints(&strings(&["ecr", "--verbose", "--allowed-account-id=1"])).is_empty());
    }

    #[test]
    fn a_refused_value_from_env_is_traced_to_its_entry() {
        let provider = |args: &[&str], env: &[(&str, &str)]| Provider {
            name: PLUGIN_NAME.into(),
            match_images: vec![],
            default_cache_duration: None,
            api_version: String::new(),
            args: strings(args),
            env: env
                .iter()
                .map(|(name, value)| super::super::ExecEnvVar {
                    name: name.to_string(),
                    value: value.to_string(),
                })
                .collect(),
            token_attributes: None,
        };
        let says = "cloud-credential-provider: invalid value in environment variable CLOUD_CREDENTIAL_PROVIDER_TIMEOUT \
                    (--timeout <DURATION>): bad";
        let env = [
            ("CLOUD_CREDENTIAL_PROVIDER_TIMEOUT", "1"),
            ("A", "b"),
            ("CLOUD_CREDENTIAL_PROVIDER_TIMEOUT", "2"),
        ];
        assert_eq!(
            refused_variable(says, &provider(&["ecr"], &env)),
            Some((2, "CLOUD_CREDENTIAL_PROVIDER_TIMEOUT".into()))
        );
        // A whole name only: A is not the A in ABC or in TIMEOUT_A.
        assert_eq!(
            refused_variable("cloud-credential-provider: ABC: bad", &provider(&["ecr"], &env)),
            None
        );
        assert_eq!(
            refused_variable("invalid value for --timeout: bad", &provider(&["ecr"], &env)),
            None
        );
        assert_eq!(
            refused_variable("in A: bad", &provider(&["ecr"], &env)),
            Some((1, "A".into()))
        );
    }

    #[test]
    fn variables_without_effect_are_named() {
        let provider = |args: &[&str], env: &[&str]| Provider {
            name: PLUGIN_NAME.into(),
            match_images: vec![],
            default_cache_duration: None,
            api_version: String::new(),
            args: strings(args),
            env: env
                .iter()
                .map(|name| super::super::ExecEnvVar {
                    name: name.to_string(),
                    value: "x".into(),
                })
                .collect(),
            token_attributes: None,
        };
        let env = [
            "CLOUD_CREDENTIAL_PROVIDER_TIMOUT",
            "CLOUD_CREDENTIAL_PROVIDER_TIMEOUT",
            "CLOUD_CREDENTIAL_PROVIDER_LOG_LEVEL",
            "CLOUD_CREDENTIAL_PROVIDER_DOCKER_CONFIG",
            "AWS_REGION",
            "AWS_ECR_ROLE_ARN",
        ];
        let warnings = env_warnings(0, &provider(&["--log-level=info", "ecr"], &env));
        let fields: Vec<&str> = warnings.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            ["providers[0].env[0]", "providers[0].env[3]", "providers[0].env[5]"]
        );
        assert!(
            warnings[0]
                .1
                .ends_with("no flag of `ecr` reads it (did you mean CLOUD_CREDENTIAL_PROVIDER_TIMEOUT?)"),
            "{warnings:?}"
        );
        // static reads the Docker config's variable; no backend, no verdict.
        assert_eq!(env_warnings(0, &provider(&["static"], &env[1..5])).len(), 1);
        assert!(env_warnings(0, &provider(&[], &env)).is_empty());
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "ab"), 2);
    }

    #[test]
    fn binaries_are_found_as_kubelet_finds_them() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("a scratch directory");
        let file = |name: &str, mode: u32| {
            let path = dir.path().join(name);
            std::fs::write(&path, b"#!/bin/sh\n").expect("write a test file");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("set its mode");
            path
        };
        let other = file("other", 0o755);
        file("plain", 0o644);
        std::fs::create_dir(dir.path().join("dir")).expect("make a directory");
        std::os::unix::fs::symlink(&other, dir.path().join("link")).expect("make a link");
        let this = file("this", 0o755);
        std::fs::write(&this, b"this plugin").expect("write a test file");
        std::fs::write(dir.path().join("copy"), b"this plugin").expect("write a test file");
        std::fs::set_permissions(dir.path().join("copy"), std::fs::Permissions::from_mode(0o755))
            .expect("set its mode");
        let find = |name: &str| find_binary(dir.path(), name, Some(&this));
        assert_eq!(find("other"), Binary::Other);
        assert_eq!(find("link"), Binary::Other);
        assert_eq!(find("copy"), Binary::ThisPlugin);
        for (name, says) in [
            ("missing", "does not exist"),
            ("plain", "no execute"),
            ("dir", "directory"),
        ] {
            match find(name) {
                Binary::Missing(why) => assert!(why.contains(says), "{name}: {why}"),
                other => panic!("{name}: {other:?}"),
            }
        }
        // By name: kubelet runs `cloud-credential-provider`, or a link to it.
        let named = dir.path().join(PLUGIN_NAME);
        std::fs::write(&named, b"x").expect("write a test file");
        std::fs::set_permissions(&named, std::fs::Permissions::from_mode(0o755)).expect("set its mode");
        std::os::unix::fs::symlink(&named, dir.path().join("alias")).expect("make a link");
        assert_eq!(find(PLUGIN_NAME), Binary::ThisPlugin);
        assert_eq!(find("alias"), Binary::ThisPlugin);
    }
}
