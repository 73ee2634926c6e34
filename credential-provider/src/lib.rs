//! `cloud-credential-provider`: a kubelet image credential provider (exec
//! plugin). The binary is a thin shell around [`run`]; each step is a
//! function tests call directly.

use std::io::{Read, Write};
use std::process::ExitCode;

pub mod backend;
pub mod cli;
pub mod image;
pub mod jwt;
pub mod kubelet_config;
pub mod matching;
pub mod mirror;
pub mod protocol;

use backend::{
    AcrBackend, BackendError, CredentialBackend, EcrBackend, GcpBackend, Mirrored, PassthroughBackend, StaticBackend,
    TokenExchangeBackend, acr::AcrSettings, ecr::EcrSettings, gcp::GcpSettings, token_exchange::ExchangeSettings,
};
use cli::{AcrArgs, Cli, Command, GcpArgs};
use kubelet_config::ConfigError;
use protocol::RequestError;
use secrecy::ExposeSecret;

/// Longest error line written for kubelet's log, in characters.
pub const MAX_ERROR_LINE: usize = 1500;

/// Why an invocation failed: one line for kubelet's log.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Request(#[from] RequestError),
    #[error("{0}")]
    Backend(#[from] BackendError),
    /// A backend's failure, with every piece of the request's token cut out
    /// (a server may have echoed it into its error).
    #[error("{0}")]
    Failed(String),
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// An image reference kubelet cannot parse (`explain`).
    #[error("{0}")]
    Image(String),
    #[error("cannot read stdin: {0}")]
    Stdin(std::io::Error),
    #[error("cannot write to stdout: {0}")]
    Stdout(std::io::Error),
    /// `check-config` could not check the config (not read, not parsed, an
    /// entry not judged): its line names the file and field.
    #[error("{0}")]
    NoVerdict(String),
    /// `check-config --rbac` could not give the grant or ask the cluster.
    #[error("{0}")]
    Rbac(String),
    /// Operands that do not fit together (`explain`), or an operator tool
    /// in a provider entry (`check-config`'s child).
    #[error("{0}")]
    Usage(String),
}

/// Runs one invocation (on the current thread: the skeleton's `main` starts
/// logging and the runtime). Provider subcommands read the request from
/// `stdin`; only a complete answer is written to `stdout`.
pub async fn run(cli: Cli, stdin: impl Read, stdout: impl Write) -> Result<ExitCode, Error> {
    // check-config's child: the command line parsed, nothing more.
    // explain's child: the mirror of its image under this command line.
    match kubelet_config::plugin::child_mode() {
        Some(kubelet_config::plugin::ChildMode::Check) => {
            return kubelet_config::plugin::check_only(&cli.command).map_err(Error::Usage);
        }
        Some(kubelet_config::plugin::ChildMode::Mirror) => {
            return kubelet_config::plugin::mirror_only(&cli.command, stdout).map_err(Error::Usage);
        }
        None => {}
    }
    match cli.command {
        Command::Static(args) => {
            let mirrors = args.mirror.settings();
            let backend = StaticBackend::new(args.docker_config, args.cache_duration);
            serve_request(&Mirrored::new(backend, mirrors), stdin, stdout).await
        }
        Command::Passthrough(args) => {
            let mirrors = args.mirror.settings();
            let backend = PassthroughBackend::new(args.username, args.expiry.expiry_margin);
            serve_request(&Mirrored::new(backend, mirrors), stdin, stdout).await
        }
        Command::TokenExchange(args) => {
            let args = *args;
            let mirrors = args.mirror.settings();
            let backend = TokenExchangeBackend::new(ExchangeSettings {
                endpoint: args.token_endpoint,
                username: args.username,
                subject_token_type: args.subject_token_type,
                requested_token_type: args.requested_token_type,
                audience: args.audience,
                scope: args.scope,
                resource: args.resource,
                client_id: args.client_id,
                timeout: args.timeout,
                expiry_margin: args.expiry.expiry_margin,
            })
            .map_err(BackendError::from)?;
            serve_request(&Mirrored::new(backend, mirrors), stdin, stdout).await
        }
        Command::Ecr(args) => {
            let mirrors = args.mirror.settings();
            let backend = EcrBackend::new(EcrSettings {
                role_annotations: args.role_annotations,
                allowed_accounts: args.allowed_accounts,
                require_role_annotation: args.require_role_annotation,
                timeout: args.timeout,
                aws: cloud_access::aws::AwsConfig::from_env(),
            })
            .map_err(BackendError::from)?;
            serve_request(&Mirrored::new(backend, mirrors), stdin, stdout).await
        }
        Command::Gcp(args) => {
            let mirrors = args.mirror.settings();
            let backend = GcpBackend::new(gcp_settings(*args).map_err(BackendError::from)?);
            serve_request(&Mirrored::new(backend, mirrors), stdin, stdout).await
        }
        Command::Acr(args) => {
            let mirrors = args.runtime_mirrors.settings();
            let backend = AcrBackend::new(acr_settings(*args));
            serve_request(&Mirrored::new(backend, mirrors), stdin, stdout).await
        }
        Command::Explain(args) => {
            let (config, image) = args.config_and_image().map_err(Error::Usage)?;
            let config = kubelet_config::load(&config)?;
            // kubelet does not pull a reference it cannot parse: no provider runs.
            image::parse(&image).map_err(|e| {
                Error::Image(format!(
                    "kubelet cannot parse image {image:?} ({e}): it would not pull it, so no provider runs"
                ))
            })?;
            let verification = match &args.kubelet_config {
                Some(path) => {
                    kubelet_config::pull_records::read_kubelet_config(path).map_err(|e| Error::Usage(e.to_string()))?
                }
                None => kubelet_config::pull_records::Verification::default(),
            };
            let exe = kubelet_config::plugin::this_exe();
            let explanation = kubelet_config::explain(&config, &image, &verification).with_mirrors(
                &config,
                |provider, repository| {
                    use kubelet_config::plugin::{Binary, PLUGIN_NAME, find_binary, mirror_of};
                    let this_plugin = match &args.bin_dir {
                        Some(dir) => find_binary(dir, &provider.name, exe.as_deref()) == Binary::ThisPlugin,
                        None => provider.name == PLUGIN_NAME,
                    };
                    if !this_plugin {
                        return None;
                    }
                    Some(match &exe {
                        Some(exe) => mirror_of(provider, exe, repository),
                        None => Err("cannot find this binary (/proc/self/exe) to read the entry's mirrors with".into()),
                    })
                },
            );
            write_all(stdout, explanation.render(args.output.format).as_bytes())?;
            Ok(explanation.exit_code())
        }
        Command::CheckConfig(args) => {
            let options = kubelet_config::CheckOptions {
                bin_dir: args.bin_dir.clone(),
                target: kubelet_config::KubeletTarget {
                    version: args.kubelet_version,
                    gates: args.kubelet_feature_gates.unwrap_or_default(),
                },
                plugin_exe: kubelet_config::plugin::this_exe(),
            };
            let path = args.config_path().map_err(Error::Usage)?;
            let report = kubelet_config::check(&path, &options);
            // No verdict: an error on stderr as any other, nothing on stdout.
            if let Some(line) = report.no_verdict_line() {
                return Err(Error::NoVerdict(line));
            }
            if args.rbac.rbac {
                return rbac(&args, &path, &report, stdout).await;
            }
            write_all(stdout, report.render(args.output.format).as_bytes())?;
            Ok(report.exit_code())
        }
    }
}

/// `check-config --rbac`: the grant for the audiences of a config kubelet
/// takes, printed, or with `--node` looked up in the cluster.
async fn rbac(
    args: &cli::CheckConfigArgs,
    path: &std::path::Path,
    report: &kubelet_config::CheckReport,
    stdout: impl Write,
) -> Result<ExitCode, Error> {
    use kubelet_config::rbac;
    if let Some(problem) = report.first_refusal_line() {
        return Err(Error::Rbac(format!(
            "--rbac: kubelet or this plugin refuses the config, so no grant is printed ({problem}); `check-config {}` lists every problem",
            suite_program::shell::shell_word(&path.to_string_lossy())
        )));
    }
    let audiences = report.audiences.clone();
    if audiences.is_empty() {
        // Nothing to apply or to ask: said as YAML's comment, or an empty List.
        let text = match args.output.format {
            cli::OutputFormat::Text => format!(
                "# {}: no provider has tokenAttributes: kubelet requests no service-account tokens, so the nodes need no grant\n",
                cloud_access::logging::clean_text(&path.display().to_string(), &[], 500)
            ),
            cli::OutputFormat::Json => "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": []}\n".to_owned(),
        };
        write_all(stdout, text.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let grant = rbac::Grant {
        name: args.rbac.rbac_name.clone(),
        group: args.rbac.node_group.clone(),
        audiences,
    };
    let Some(node) = &args.rbac.node else {
        let text = match args.output.format {
            cli::OutputFormat::Text => grant.yaml(),
            cli::OutputFormat::Json => grant.json(),
        };
        write_all(stdout, text.as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    };
    let identity = rbac::NodeIdentity::new(node, &grant.group);
    let access = node_access(&args.rbac, &identity, &grant).await?;
    let mut fix = format!(
        "cloud-credential-provider check-config --rbac {}",
        suite_program::shell::shell_word(&path.to_string_lossy())
    );
    if grant.group != rbac::NODES_GROUP {
        fix.push_str(&format!(
            " --node-group {}",
            suite_program::shell::shell_word(&grant.group)
        ));
    }
    if grant.name != rbac::DEFAULT_NAME {
        fix.push_str(&format!(
            " --rbac-name {}",
            suite_program::shell::shell_word(&grant.name)
        ));
    }
    fix.push_str(" | kubectl apply -f -");
    let report = rbac::AccessReport {
        config: path.display().to_string(),
        user: identity.user(),
        groups: identity.groups,
        namespace: args.rbac.namespace.clone(),
        service_account: args.rbac.service_account.clone(),
        audiences: access,
        fix,
    };
    write_all(stdout, report.render(args.output.format).as_bytes())?;
    Ok(report.exit_code())
}

/// One SubjectAccessReview per audience, as NodeRestriction would ask.
async fn node_access(
    args: &cli::RbacArgs,
    identity: &kubelet_config::rbac::NodeIdentity,
    grant: &kubelet_config::rbac::Grant,
) -> Result<Vec<kubelet_config::rbac::AudienceAccess>, Error> {
    use kubelet_config::rbac;
    let cluster = kubelet_config::cluster::Cluster::connect(
        args.kubeconfig.as_deref(),
        args.context.as_deref(),
        args.request_timeout,
    )
    .map_err(|e| Error::Rbac(format!("--rbac --node: {e}")))?;
    let scope = rbac::ServiceAccountScope {
        namespace: args.namespace.clone(),
        name: args.service_account.clone(),
    };
    let mut access = Vec::with_capacity(grant.audiences.len());
    for audience in &grant.audiences {
        let review = rbac::access_review(identity, audience, &scope);
        let answer: rbac::ReviewAnswer = cluster.create(SUBJECT_ACCESS_REVIEWS, &review).await.map_err(|e| {
            let hint = if e.status == Some(403) {
                " (the kubeconfig's user needs `create` on subjectaccessreviews.authorization.k8s.io)"
            } else {
                ""
            };
            Error::Rbac(format!(
                "--rbac --node: SubjectAccessReview at {}: {e}{hint}",
                cluster.server()
            ))
        })?;
        access.push(rbac::AudienceAccess::from_review(audience, &answer));
    }
    Ok(access)
}

const SUBJECT_ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

/// The `gcp` backend's settings from its flags.
fn gcp_settings(args: GcpArgs) -> Result<GcpSettings, backend::GcpBackendError> {
    use backend::gcp::AuthFlow;
    let wi = args.workload_identity;
    let audience = match (wi.sts_audience, wi.identity_provider, wi.project_id) {
        (Some(audience), _, _) => Some(audience),
        (None, Some(provider), Some(project)) => {
            Some(cloud_access::gcp::workload_identity_audience(&project, &provider))
        }
        _ => None,
    };
    let metadata_base = match args.metadata.metadata_host {
        Some(base) => base,
        None => cloud_access::gcp::metadata_base(None).map_err(Box::new)?,
    };
    Ok(GcpSettings {
        flow: match args.auth_flow {
            cli::GcpAuthFlow::Gcr => AuthFlow::Gcr,
            cli::GcpAuthFlow::Dockercfg => AuthFlow::Dockercfg,
            cli::GcpAuthFlow::DockercfgUrl => AuthFlow::DockercfgUrl,
        },
        metadata_base,
        audience,
        service_account_annotations: wi.service_account_annotations,
        allowed_service_accounts: wi.allowed_service_accounts,
        require_workload_identity: wi.require_workload_identity,
        sts_endpoint: wi.sts_endpoint,
        iam_credentials_endpoint: wi.iam_credentials_endpoint,
        cache_duration: args.cache.cache_duration,
        expiry_margin: args.cache.expiry.expiry_margin,
        timeout: args.timeout,
    })
}

/// The `acr` backend's settings from its flags.
fn acr_settings(args: AcrArgs) -> AcrSettings {
    AcrSettings {
        config_path: args.config.path(),
        mirrors: args.mirror.mirrors,
        allowed_tenants: args.workload_identity.allowed_tenants,
        allowed_clients: args.workload_identity.allowed_clients,
        cache_duration: args.cache.cache_duration,
        expiry_margin: args.cache.expiry.expiry_margin,
        imds: args.endpoints.imds_endpoint,
        authority_host: args.endpoints.authority_host,
        arm_endpoint: args.endpoints.arm_endpoint,
        registry_endpoint: args.endpoints.registry_endpoint,
        timeout: args.timeout,
    }
}

/// Reads one request, asks `backend`, writes the answer in the request's
/// version. Nothing reaches stdout unless the whole answer is ready.
pub async fn serve_request(
    backend: &impl CredentialBackend,
    mut stdin: impl Read,
    stdout: impl Write,
) -> Result<ExitCode, Error> {
    // A blocking read is right here: kubelet writes the whole request and
    // closes stdin, and nothing else runs until it is read.
    let mut input = Vec::new();
    stdin.read_to_end(&mut input).map_err(Error::Stdin)?;
    let answer = answer_request(backend, &input).await?;
    write_all(stdout, &answer)?;
    Ok(ExitCode::SUCCESS)
}

/// The decision itself: request bytes in, response bytes out.
pub async fn answer_request(backend: &impl CredentialBackend, input: &[u8]) -> Result<Vec<u8>, Error> {
    let request = protocol::decode_request(input)?;
    tracing::debug!(
        image = %request.image,
        api_version = request.api_version.as_str(),
        has_service_account_token = request.service_account_token.is_some(),
        "credential request"
    );
    let credentials = backend.credentials(&request).await.map_err(|error| {
        let secrets: Vec<&str> = request
            .service_account_token
            .iter()
            .map(|t| t.expose_secret())
            .collect();
        Error::Failed(cloud_access::logging::clean_text(
            &error.to_string(),
            &secrets,
            MAX_ERROR_LINE,
        ))
    })?;
    tracing::debug!(
        keys = ?credentials.auth.keys().collect::<Vec<_>>(),
        cache_key_type = ?credentials.cache_key_type,
        cache_duration = ?credentials.cache_duration,
        "credential response"
    );
    Ok(protocol::encode_response(request.api_version, &credentials))
}

fn write_all(mut stdout: impl Write, bytes: &[u8]) -> Result<(), Error> {
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(Error::Stdout)
}
