//! Command line: one subcommand per backend (kubelet runs the binary with
//! the provider's `args`), plus the operator's tools. Every flag has an
//! environment variable, since kubelet's config can also pass `env`. A
//! boolean flag's variable takes the usual spellings ([`suite_program::boolish`]):
//! an EnvironmentFile or a kubelet `env:` says `=1` as often as `=true`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use cloud_access::SecureEndpoint;
use suite_program::duration;
use suite_program::{LogArgs, LogEnv as _};

mod acr;

pub use acr::{AcrArgs, AcrCacheArgs, AcrConfigArgs, AcrEndpointArgs, AcrMirrorArgs, AcrWorkloadIdentityArgs};

/// kubelet image credential provider: reads a CredentialProviderRequest on
/// stdin and writes a CredentialProviderResponse on stdout.
///
/// On failure it exits 1 with nothing on stdout and one line on stderr
/// saying what failed and how to fix it; kubelet logs that line.
#[derive(Debug, Parser)]
#[command(
    name = "cloud-credential-provider",
    version,
    propagate_version = true,
    log_env("CLOUD_CREDENTIAL_PROVIDER_LOG_LEVEL", "CLOUD_CREDENTIAL_PROVIDER_LOG_FORMAT", "error"),
    mut_arg("log_level", |arg| arg.help(LOG_LEVEL_HELP))
)]
pub struct Cli {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// kubelet reads the plugin's stderr only when it fails.
const LOG_LEVEL_HELP: &str = "Most verbose level of diagnostics on stderr (kubelet shows stderr only when the plugin \
fails): off, error, warn, info, debug or trace, or per-target levels such as `debug,hyper=info`. Credentials are never \
logged.";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Credentials from a Docker config.json file, for the entries that serve
    /// the image's registry (cacheKeyType Registry).
    Static(StaticArgs),
    /// The pod's service-account token (KEP-4412) as the registry password,
    /// cached until shortly before the token expires. Needs a v1 provider
    /// with tokenAttributes and cacheType Token.
    Passthrough(PassthroughArgs),
    /// Exchanges the pod's service-account token for a registry token at an
    /// OAuth 2.0 token endpoint (RFC 8693).
    TokenExchange(Box<TokenExchangeArgs>),
    /// Amazon ECR logins (private ECR in every partition, FIPS and dual-stack
    /// hosts, ECR Public), as the node or, with KEP-4412, as the role named
    /// by the pod's service account.
    Ecr(EcrArgs),
    /// Google Artifact Registry and Container Registry logins (username
    /// `_token`): as the node's default service account (metadata server),
    /// or, with KEP-4412 workload identity, as the pod (Google STS) or the
    /// Google service account its service account names (IAM Credentials);
    /// or a Docker config from instance metadata (--auth-flow).
    Gcp(Box<GcpArgs>),
    /// Azure Container Registry logins (username 00000000-0000-0000-0000-000000000000
    /// and an ACR refresh token): as the node's managed identity, as the
    /// service principal of the Azure cloud config (its ID and secret,
    /// without a network call), or, with KEP-4412 workload identity, as the
    /// application the pod's service account names. Takes
    /// acr-credential-provider's arguments (AZURE_JSON, --registry-mirror).
    Acr(Box<AcrArgs>),
    /// Say which providers of a kubelet CredentialProviderConfig kubelet
    /// would run for IMAGE, and for each pattern of each provider why it
    /// matches or not (port, host labels, path). Exit 0 when a provider
    /// runs, 2 when none does, 1 on error.
    Explain(ExplainArgs),
    /// Validate a kubelet CredentialProviderConfig (file or directory) as
    /// kubelet will, and the args and env of every entry that runs this
    /// plugin as the plugin will; print every problem with its field path.
    /// Exit 0 valid, 2 if kubelet or this plugin would refuse it, 1 if it
    /// cannot be checked (not read or parsed: one line on stderr, nothing on
    /// stdout).
    CheckConfig(Box<CheckConfigArgs>),
}

impl Command {
    /// The registry mirrors a backend's command line configures (acr's own
    /// --registry-mirror among them); `None` for the operator tools.
    pub fn mirror_settings(&self) -> Option<crate::mirror::MirrorSettings> {
        Some(match self {
            Command::Static(args) => args.mirror.settings(),
            Command::Passthrough(args) => args.mirror.settings(),
            Command::TokenExchange(args) => args.mirror.settings(),
            Command::Ecr(args) => args.mirror.settings(),
            Command::Gcp(args) => args.mirror.settings(),
            Command::Acr(args) => crate::mirror::MirrorSettings {
                mirrors: args
                    .mirror
                    .mirrors
                    .iter()
                    .map(|m| crate::mirror::RegistryMirror {
                        source: crate::mirror::Location {
                            host: m.source.clone(),
                            path: String::new(),
                        },
                        target: crate::mirror::Location {
                            host: m.target.clone(),
                            path: String::new(),
                        },
                    })
                    .collect(),
                ..args.runtime_mirrors.settings()
            },
            Command::Explain(_) | Command::CheckConfig(_) => return None,
        })
    }
}

#[derive(Debug, Args)]
pub struct StaticArgs {
    /// Docker config.json whose "auths" entries hold the credentials
    /// (`auth` as base64 of user:password, or `username` and `password`).
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_DOCKER_CONFIG", value_name = "FILE")]
    pub docker_config: PathBuf,
    /// How long kubelet may cache the answer (Go duration such as 5m or
    /// 1h0m0s). Unset: the provider's defaultCacheDuration applies.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_CACHE_DURATION", value_parser = duration::non_negative, value_name = "DURATION")]
    pub cache_duration: Option<Duration>,
    #[command(flatten)]
    pub mirror: MirrorArgs,
}

/// Registry mirrors, for every backend (acr takes its own --registry-mirror,
/// as acr-credential-provider does, and these runtime files).
#[derive(Debug, Args)]
pub struct MirrorArgs {
    /// Mirror SRC:DST, each host[:port][/path] (repeatable, or
    /// comma-separated): an image under SRC is pulled through DST, so it is
    /// answered with the credentials for the image on DST, under SRC.
    #[arg(
        long = "registry-mirror",
        env = "CLOUD_CREDENTIAL_PROVIDER_REGISTRY_MIRRORS",
        value_delimiter = ',',
        value_parser = parse_registry_mirror,
        value_name = "SRC:DST"
    )]
    pub mirrors: Vec<crate::mirror::RegistryMirror>,
    #[command(flatten)]
    pub runtime: RuntimeMirrorArgs,
}

/// The container runtime's own mirror config, read at every request.
#[derive(Debug, Args)]
pub struct RuntimeMirrorArgs {
    /// containerd's registry host directories (its config_path, such as
    /// /etc/containerd/certs.d; ':'-separated): an image whose registry's
    /// hosts.toml names a mirror is answered with the mirror's credentials.
    #[arg(
        long,
        env = "CLOUD_CREDENTIAL_PROVIDER_CONTAINERD_HOSTS_DIR",
        value_delimiter = ':',
        value_name = "DIR[:DIR]"
    )]
    pub containerd_hosts_dir: Vec<PathBuf>,
    /// CRI-O's registries.conf (such as /etc/containers/registries.conf):
    /// an image whose [[registry]] has mirrors is answered with the first
    /// mirror's credentials.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_REGISTRIES_CONF", value_name = "FILE")]
    pub registries_conf: Option<PathBuf>,
}

impl MirrorArgs {
    pub fn settings(&self) -> crate::mirror::MirrorSettings {
        crate::mirror::MirrorSettings {
            mirrors: self.mirrors.clone(),
            ..self.runtime.settings()
        }
    }
}

impl RuntimeMirrorArgs {
    pub fn settings(&self) -> crate::mirror::MirrorSettings {
        crate::mirror::MirrorSettings {
            mirrors: Vec::new(),
            containerd_hosts_dirs: self.containerd_hosts_dir.clone(),
            registries_conf: self.registries_conf.clone(),
        }
    }
}

fn parse_registry_mirror(text: &str) -> Result<crate::mirror::RegistryMirror, String> {
    crate::mirror::parse_mirror(text)
        .map_err(|problem| format!("{text:?} is not SRC:DST (host[:port][/path] each): {problem}"))
}

#[derive(Debug, Args)]
pub struct ExpiryArgs {
    /// Time before a token's expiry at which kubelet should stop using a
    /// cached answer (Go duration).
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_EXPIRY_MARGIN", value_parser = duration::non_negative, default_value = "1m", value_name = "DURATION")]
    pub expiry_margin: Duration,
}

#[derive(Debug, Args)]
pub struct PassthroughArgs {
    /// Username sent with the token (Harbor expects `jwt`).
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_USERNAME", default_value = "jwt")]
    pub username: String,
    #[command(flatten)]
    pub expiry: ExpiryArgs,
    #[command(flatten)]
    pub mirror: MirrorArgs,
}

#[derive(Debug, Args)]
pub struct TokenExchangeArgs {
    /// Token endpoint URL: https, or http on a loopback address only. Taken
    /// from this flag or its variable, never from an annotation.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_TOKEN_ENDPOINT", value_parser = parse_endpoint, value_name = "URL")]
    pub token_endpoint: SecureEndpoint,
    /// Username sent with the exchanged token.
    #[arg(
        long,
        env = "CLOUD_CREDENTIAL_PROVIDER_USERNAME",
        default_value = "oauth2accesstoken"
    )]
    pub username: String,
    /// `audience` parameter of the exchange.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_AUDIENCE")]
    pub audience: Option<String>,
    /// `scope` parameter of the exchange.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_SCOPE")]
    pub scope: Option<String>,
    /// `resource` parameter of the exchange.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_RESOURCE")]
    pub resource: Option<String>,
    /// `client_id` parameter, for endpoints that want to know the client.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_CLIENT_ID")]
    pub client_id: Option<String>,
    /// `requested_token_type` parameter.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_REQUESTED_TOKEN_TYPE")]
    pub requested_token_type: Option<String>,
    /// `subject_token_type` of the service-account token.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_SUBJECT_TOKEN_TYPE", default_value = crate::backend::token_exchange::JWT_TOKEN_TYPE)]
    pub subject_token_type: String,
    /// Deadline of the whole exchange, below kubelet's 1m kill (at most 50s).
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_TIMEOUT", value_parser = parse_timeout, default_value = "20s", value_name = "DURATION")]
    pub timeout: Duration,
    #[command(flatten)]
    pub expiry: ExpiryArgs,
    #[command(flatten)]
    pub mirror: MirrorArgs,
}

#[derive(Debug, Args)]
pub struct EcrArgs {
    /// Service-account annotation key whose value is the IAM role to pull as
    /// (repeatable; the first present wins).
    #[arg(
        long = "role-annotation",
        env = "CLOUD_CREDENTIAL_PROVIDER_ROLE_ANNOTATIONS",
        value_delimiter = ',',
        default_value = crate::backend::ecr::DEFAULT_ROLE_ANNOTATION,
        value_name = "KEY"
    )]
    pub role_annotations: Vec<String>,
    /// Only assume roles in these AWS accounts (repeatable); unset: any.
    #[arg(
        long = "allowed-account-id",
        env = "CLOUD_CREDENTIAL_PROVIDER_ALLOWED_ACCOUNT_IDS",
        value_delimiter = ',',
        value_parser = parse_account_id,
        value_name = "ID"
    )]
    pub allowed_accounts: Vec<String>,
    /// Refuse pulls whose service account names no role, instead of using
    /// the node's own credentials.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_REQUIRE_ROLE_ANNOTATION", value_parser = suite_program::boolish)]
    pub require_role_annotation: bool,
    /// Deadline of the whole login, below kubelet's 1m kill (at most 50s).
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_TIMEOUT", value_parser = parse_timeout, default_value = "20s", value_name = "DURATION")]
    pub timeout: Duration,
    #[command(flatten)]
    pub mirror: MirrorArgs,
}

#[derive(Debug, Args)]
pub struct GcpArgs {
    /// Where the credentials come from: `gcr`, the node's default service
    /// account's token (or the pod's, with workload identity); `dockercfg`,
    /// the Docker config in instance attribute google-dockercfg;
    /// `dockercfg-url`, the one at the URL in instance attribute
    /// google-dockercfg-url.
    #[arg(
        long,
        short = 'a',
        alias = "authFlow",
        value_enum,
        env = "CLOUD_CREDENTIAL_PROVIDER_AUTH_FLOW",
        default_value = "gcr"
    )]
    pub auth_flow: GcpAuthFlow,
    #[command(flatten)]
    pub metadata: GcpMetadataArgs,
    #[command(flatten)]
    pub workload_identity: WorkloadIdentityArgs,
    #[command(flatten)]
    pub cache: GcpCacheArgs,
    /// Deadline of the whole answer, below kubelet's 1m kill (at most 50s).
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_TIMEOUT", value_parser = parse_timeout, default_value = "20s", value_name = "DURATION")]
    pub timeout: Duration,
    #[command(flatten)]
    pub mirror: MirrorArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GcpAuthFlow {
    Gcr,
    Dockercfg,
    DockercfgUrl,
}

#[derive(Debug, Args)]
pub struct GcpMetadataArgs {
    /// The GCE metadata server as `host[:port]`, plain HTTP (the variable
    /// Google's own libraries read). Unset: metadata.google.internal.
    #[arg(long, env = "GCE_METADATA_HOST", value_parser = parse_metadata_host, value_name = "HOST[:PORT]")]
    pub metadata_host: Option<url::Url>,
}

#[derive(Debug, Args)]
pub struct WorkloadIdentityArgs {
    /// The cluster's identity provider in the workload identity pool
    /// PROJECT.svc.id.goog (GKE: https://container.googleapis.com/v1/projects/P/locations/L/clusters/C);
    /// the STS audience is identitynamespace:PROJECT.svc.id.goog:PROVIDER.
    /// Unset (and no --sts-audience): workload identity is off.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_IDENTITY_PROVIDER", requires = "project_id", value_parser = parse_text, value_name = "PROVIDER")]
    pub identity_provider: Option<String>,
    /// The project of the workload identity pool (PROJECT.svc.id.goog);
    /// required with --identity-provider.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_PROJECT_ID", value_parser = parse_project_id, value_name = "PROJECT")]
    pub project_id: Option<String>,
    /// The STS audience as is, for a workload identity federation pool
    /// (//iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER),
    /// instead of --identity-provider and --project-id.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_STS_AUDIENCE", conflicts_with = "identity_provider", value_parser = parse_text, value_name = "AUDIENCE")]
    pub sts_audience: Option<String>,
    /// Service-account annotation key whose value is the Google service
    /// account to impersonate (repeatable; the first present wins). Read
    /// only when the service account opts in with
    /// iam.gke.io/enable-wi-image-pull: "true".
    #[arg(
        long = "service-account-annotation",
        env = "CLOUD_CREDENTIAL_PROVIDER_SERVICE_ACCOUNT_ANNOTATIONS",
        value_delimiter = ',',
        default_value = crate::backend::gcp::DEFAULT_SERVICE_ACCOUNT_ANNOTATION,
        value_name = "KEY"
    )]
    pub service_account_annotations: Vec<String>,
    /// Only impersonate these Google service accounts, by address or as
    /// `*@DOMAIN` for all of a project's (repeatable). Unset: any the pod's
    /// service account is allowed to impersonate by IAM.
    #[arg(
        long = "allowed-service-account",
        env = "CLOUD_CREDENTIAL_PROVIDER_ALLOWED_SERVICE_ACCOUNTS",
        value_delimiter = ',',
        value_parser = parse_allowed_account,
        value_name = "EMAIL"
    )]
    pub allowed_service_accounts: Vec<String>,
    /// Refuse pulls whose service account does not opt in to workload
    /// identity, instead of pulling as the node.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_REQUIRE_WORKLOAD_IDENTITY", value_parser = suite_program::boolish)]
    pub require_workload_identity: bool,
    /// Google STS (token exchange): https, or http on a loopback address.
    /// From this flag or its variable only, never from an annotation.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_STS_ENDPOINT", value_parser = parse_sts_endpoint, default_value = cloud_access::gcp::STS_ENDPOINT, value_name = "URL")]
    pub sts_endpoint: SecureEndpoint,
    /// IAM Service Account Credentials API (impersonation): https, or http
    /// on a loopback address. From this flag or its variable only.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_IAM_CREDENTIALS_ENDPOINT", value_parser = parse_iam_endpoint, default_value = cloud_access::gcp::IAM_CREDENTIALS_ENDPOINT, value_name = "URL")]
    pub iam_credentials_endpoint: SecureEndpoint,
}

#[derive(Debug, Args)]
pub struct GcpCacheArgs {
    /// How long kubelet may cache an answer (Go duration). The dockercfg
    /// flows send it as is (unset: the provider's defaultCacheDuration); the
    /// token flows send the token's remaining validity less --expiry-margin,
    /// at most this.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_CACHE_DURATION", value_parser = duration::non_negative, value_name = "DURATION")]
    pub cache_duration: Option<Duration>,
    #[command(flatten)]
    pub expiry: ExpiryArgs,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// kubelet CredentialProviderConfig: a JSON or YAML file, or a
    /// directory (or give it as the first operand, as check-config takes it).
    #[arg(long, env = CONFIG_VARIABLE, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// The node's KubeletConfiguration (kubelet's --config): its
    /// imagePullCredentialsVerificationPolicy, preloadedImagesVerificationAllowlist
    /// and featureGates say what kubelet verifies again before a pod uses an
    /// image already on the node. Unset: kubelet 1.35+ defaults
    /// (NeverVerifyPreloadedImages, records on).
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_KUBELET_CONFIG", value_name = "FILE")]
    pub kubelet_config: Option<PathBuf>,
    /// kubelet's --image-credential-provider-bin-dir: the entries whose
    /// binary there is this plugin (under any name) say the registry mirror
    /// the image is pulled through. Unset: the entries named
    /// cloud-credential-provider.
    #[arg(
        long,
        visible_alias = "image-credential-provider-bin-dir",
        env = "CLOUD_CREDENTIAL_PROVIDER_BIN_DIR",
        value_name = "DIR"
    )]
    pub bin_dir: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
    /// `[PATH] IMAGE`: the config (unless --config names it), then the image
    /// to pull, with or without tag or digest (nginx:1.27 counts as
    /// docker.io/library/nginx, as in kubelet).
    #[arg(value_name = "[PATH] IMAGE", num_args = 1..=2, required = true)]
    pub operands: Vec<std::ffi::OsString>,
}

impl ExplainArgs {
    /// The config and the image, however the config was given.
    pub fn config_and_image(&self) -> Result<(PathBuf, String), String> {
        let (operand, image) = match self.operands.as_slice() {
            [image] => (None, image),
            [config, image] => (Some(std::path::Path::new(config)), image),
            _ => return Err("explain takes [PATH] IMAGE (see --help)".into()),
        };
        let config = choose_config(self.config.as_deref(), operand)?.ok_or_else(|| {
            "explain needs the config and the image: explain PATH IMAGE, or explain --config PATH IMAGE (or \
             CLOUD_CREDENTIAL_PROVIDER_CONFIG); only IMAGE was given"
                .to_owned()
        })?;
        let image = image
            .to_str()
            .ok_or_else(|| format!("IMAGE {image:?} is not UTF-8 text"))?
            .to_owned();
        Ok((config, image))
    }
}

/// The variable both tools read the config from.
pub const CONFIG_VARIABLE: &str = "CLOUD_CREDENTIAL_PROVIDER_CONFIG";

/// The config from `--config` and from the PATH operand: the command line
/// wins over the environment (PATH over [`CONFIG_VARIABLE`]), but both on
/// the command line is a mistake. clap keeps no value's source in the
/// derived struct: `--config` equal to the variable is taken as the
/// variable's.
fn choose_config(flag: Option<&std::path::Path>, operand: Option<&std::path::Path>) -> Result<Option<PathBuf>, String> {
    match (flag, operand) {
        (Some(flag), Some(operand)) => {
            let from_variable = std::env::var_os(CONFIG_VARIABLE).is_some_and(|v| std::path::Path::new(&v) == flag);
            if from_variable {
                Ok(Some(operand.to_owned()))
            } else {
                Err("the config is given twice, with --config and as PATH: give one".into())
            }
        }
        (flag, operand) => Ok(operand.or(flag).map(ToOwned::to_owned)),
    }
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("config_file").required(true).multiple(true).args(["path", "config"])))]
pub struct CheckConfigArgs {
    /// kubelet CredentialProviderConfig: a JSON or YAML file, or a directory.
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,
    /// The config, as explain takes it (instead of PATH).
    #[arg(long, env = CONFIG_VARIABLE, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// kubelet's --image-credential-provider-bin-dir: entries whose binary
    /// there is this plugin under another name (a link or a copy) are
    /// judged too, and a missing binary is reported, as kubelet refuses it.
    #[arg(
        long,
        visible_alias = "image-credential-provider-bin-dir",
        env = "CLOUD_CREDENTIAL_PROVIDER_BIN_DIR",
        value_name = "DIR"
    )]
    pub bin_dir: Option<PathBuf>,
    /// The kubelet that will read the config (1.33, v1.34.2): the v1beta1
    /// APIs need 1.24, v1 1.26 (v1alpha1 1.20; none removed since); a
    /// directory 1.34; tokenAttributes 1.33 (alpha, off by default) or 1.34
    /// (beta, on by default), tokenAttributes.cacheType 1.34. Unset: 1.34 or
    /// later.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_KUBELET_VERSION", value_parser = crate::kubelet_config::KubeletVersion::parse, value_name = "VERSION")]
    pub kubelet_version: Option<crate::kubelet_config::KubeletVersion>,
    /// kubelet's --feature-gates (NAME=true|false,...); only
    /// KubeletServiceAccountTokenForCredentialProviders is read. Unset: that
    /// gate's default for --kubelet-version.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_KUBELET_FEATURE_GATES", value_parser = crate::kubelet_config::FeatureGates::parse, value_name = "GATES")]
    pub kubelet_feature_gates: Option<crate::kubelet_config::FeatureGates>,
    #[command(flatten)]
    pub rbac: RbacArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `check-config --rbac`: the nodes' grant for the config's audiences (KEP-4412).
#[derive(Debug, Args)]
pub struct RbacArgs {
    /// Print, instead of the report, the ClusterRole and ClusterRoleBinding
    /// that let the nodes request their pods' service-account tokens for
    /// every audience of the config (tokenAttributes.serviceAccountTokenAudience),
    /// as YAML for `kubectl apply -f -` (a v1 List with --output json). With
    /// --node, ask the cluster instead whether the node has them. Exit 0;
    /// with --node 2 when an audience is missing; 1 when the config is
    /// refused or the cluster cannot be asked.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_RBAC", value_parser = suite_program::boolish)]
    pub rbac: bool,
    /// The group the ClusterRoleBinding names: system:nodes (every kubelet),
    /// or a group only some nodes' credentials carry.
    #[arg(long, requires = "rbac", env = "CLOUD_CREDENTIAL_PROVIDER_RBAC_GROUP", default_value = crate::kubelet_config::rbac::NODES_GROUP, value_parser = parse_group, value_name = "GROUP")]
    pub node_group: String,
    /// The name of the ClusterRole and of its ClusterRoleBinding.
    #[arg(long, requires = "rbac", env = "CLOUD_CREDENTIAL_PROVIDER_RBAC_NAME", default_value = crate::kubelet_config::rbac::DEFAULT_NAME, value_parser = parse_rbac_name, value_name = "NAME")]
    pub rbac_name: String,
    /// Ask the cluster (a SubjectAccessReview per audience, as kube-apiserver's
    /// NodeRestriction asks) whether the node NODE (user system:node:NODE, in
    /// system:nodes and --node-group) may request tokens for each audience.
    #[arg(long, requires = "rbac", env = "CLOUD_CREDENTIAL_PROVIDER_RBAC_NODE", value_parser = parse_node_name, value_name = "NODE")]
    pub node: Option<String>,
    /// The kubeconfig to ask with (creating SubjectAccessReviews needs
    /// `create` on subjectaccessreviews.authorization.k8s.io). Unset:
    /// $KUBECONFIG, ~/.kube/config, then the pod's service account.
    #[arg(
        long,
        requires = "node",
        env = "CLOUD_CREDENTIAL_PROVIDER_KUBECONFIG",
        value_name = "FILE"
    )]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (unset: its current context).
    #[arg(
        long,
        requires = "node",
        env = "CLOUD_CREDENTIAL_PROVIDER_CONTEXT",
        value_name = "NAME"
    )]
    pub context: Option<String>,
    /// Ask for the service accounts of this namespace only (unset: every
    /// namespace, which only a ClusterRoleBinding grants).
    #[arg(
        long,
        requires = "node",
        env = "CLOUD_CREDENTIAL_PROVIDER_RBAC_NAMESPACE",
        value_name = "NAMESPACE"
    )]
    pub namespace: Option<String>,
    /// Ask for this service account of --namespace only.
    #[arg(
        long,
        requires = "namespace",
        env = "CLOUD_CREDENTIAL_PROVIDER_RBAC_SERVICE_ACCOUNT",
        value_name = "NAME"
    )]
    pub service_account: Option<String>,
    /// The most one review may take, from connecting to its answer's last byte.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_REQUEST_TIMEOUT", value_parser = duration::positive, default_value = "10s", value_name = "DURATION")]
    pub request_timeout: Duration,
}

fn parse_rbac_name(text: &str) -> Result<String, String> {
    match crate::kubelet_config::rbac::rbac_name_problem(text) {
        Some(problem) => Err(format!("an RBAC object's name {problem}")),
        None => Ok(text.to_owned()),
    }
}

fn parse_group(text: &str) -> Result<String, String> {
    if text.trim().is_empty() || text.chars().any(char::is_control) {
        return Err("a group name: not empty, no control characters (system:nodes)".to_owned());
    }
    Ok(text.to_owned())
}

/// A Node's name is a DNS subdomain (lowercase letters, digits, `-`, `.`).
fn parse_node_name(text: &str) -> Result<String, String> {
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if text.len() <= 253 && text.split('.').all(label_ok) {
        Ok(text.to_owned())
    } else {
        Err("a Node's name: a DNS subdomain of lowercase letters, digits, '-' and '.' (kubectl get nodes)".to_owned())
    }
}

impl CheckConfigArgs {
    /// The config, however it was given (clap's group makes one present).
    pub fn config_path(&self) -> Result<PathBuf, String> {
        Ok(choose_config(self.config.as_deref(), self.path.as_deref())?.unwrap_or_default())
    }
}

#[derive(Debug, Args)]
pub struct OutputArgs {
    /// `text` for people, `json` for programs (one JSON object).
    #[arg(
        short = 'o',
        long = "output",
        env = "CLOUD_CREDENTIAL_PROVIDER_OUTPUT",
        value_enum,
        default_value = "text"
    )]
    pub format: OutputFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

/// kubelet kills the plugin after one minute; leave room to report.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(50);

fn parse_timeout(text: &str) -> Result<Duration, String> {
    let timeout = duration::non_negative(text)?;
    if timeout.is_zero() || timeout > MAX_TIMEOUT {
        return Err(format!(
            "{text:?} is out of range: use more than 0s and at most 50s, so the answer arrives before kubelet kills the plugin at 1m"
        ));
    }
    Ok(timeout)
}

fn parse_endpoint(text: &str) -> Result<SecureEndpoint, String> {
    SecureEndpoint::parse("--token-endpoint", text).map_err(|e| e.to_string())
}

fn parse_sts_endpoint(text: &str) -> Result<SecureEndpoint, String> {
    cloud_access::gcp::endpoint("--sts-endpoint", Some(text), cloud_access::gcp::STS_ENDPOINT)
        .map_err(|e| e.to_string())
}

fn parse_iam_endpoint(text: &str) -> Result<SecureEndpoint, String> {
    cloud_access::gcp::endpoint(
        "--iam-credentials-endpoint",
        Some(text),
        cloud_access::gcp::IAM_CREDENTIALS_ENDPOINT,
    )
    .map_err(|e| e.to_string())
}

fn parse_metadata_host(text: &str) -> Result<url::Url, String> {
    cloud_access::gcp::metadata_base(Some(text)).map_err(|e| e.to_string())
}

/// Text that goes into a request: not blank, no whitespace or control
/// characters (a value is quoted only through `{:?}`).
fn parse_text(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("is empty".into());
    }
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{text:?} contains whitespace or control characters"));
    }
    Ok(text.to_owned())
}

/// An AWS account ID: "The regex pattern for an account ID string requires
/// exactly 12 digits" (AWS Organizations API, DescribeAccount's AccountId;
/// https://docs.aws.amazon.com/accounts/latest/reference/manage-acct-identifiers.html).
/// Any other never matches a role ARN's account.
fn parse_account_id(text: &str) -> Result<String, String> {
    if text.len() != 12 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{text:?} is not an AWS account ID: use its 12 digits, such as 012345678901"
        ));
    }
    Ok(text.to_owned())
}

/// A project ID: "The ID must be 6 to 30 lowercase letters, digits, or
/// hyphens. It must start with a letter. Trailing hyphens are prohibited."
/// (Resource Manager's Project.setProjectId; the rules of
/// https://cloud.google.com/resource-manager/docs/creating-managing-projects),
/// with `DOMAIN:` before it for a legacy domain-scoped project.
fn parse_project_id(text: &str) -> Result<String, String> {
    let (domain, project) = text.rsplit_once(':').unwrap_or(("", text));
    let domain_ok = !text.contains(':')
        || (!domain.is_empty()
            && domain.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            }));
    let project_ok = (6..=30).contains(&project.len())
        && project.starts_with(|c: char| c.is_ascii_lowercase())
        && !project.ends_with('-')
        && project
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !domain_ok || !project_ok {
        return Err(format!(
            "{text:?} is not a project ID: 6 to 30 lower-case letters, digits and '-', starting with a letter, not ending with '-' (with example.com: before it for a domain-scoped project)"
        ));
    }
    Ok(text.to_owned())
}

/// A Google service account's address, or `*@DOMAIN`.
fn parse_allowed_account(text: &str) -> Result<String, String> {
    let checked = match text.strip_prefix("*@") {
        Some(domain) => crate::backend::gcp::check_service_account(&format!("x@{domain}")),
        None => crate::backend::gcp::check_service_account(text),
    };
    checked
        .map(|()| text.to_owned())
        .map_err(|problem| format!("{text:?} is not a Google service account or *@DOMAIN: {problem}"))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn boolean_flags_are_flags_and_take_the_usual_spellings() {
        let ecr = |args: &[&str]| {
            let mut all = vec!["cloud-credential-provider", "ecr"];
            all.extend(args);
            match Cli::try_parse_from(all).map(|cli| cli.command) {
                Ok(Command::Ecr(args)) => Ok(args.require_role_annotation),
                Ok(_) => panic!("not ecr"),
                Err(e) => Err(e),
            }
        };
        assert!(ecr(&["--require-role-annotation"]).expect("the ecr command line parses"));
        assert!(!ecr(&[]).expect("the ecr command line parses"));
    }

    /// IDs whose shape the cloud documents are refused at parse time when
    /// malformed: one could never match, and every pull would be refused.
    #[test]
    fn ids_of_a_documented_shape_are_checked() {
        let parse = |args: &[&str]| {
            let mut all = vec!["cloud-credential-provider"];
            all.extend(args);
            Cli::try_parse_from(all).map(|_| ()).map_err(|e| e.to_string())
        };
        assert!(parse(&["ecr", "--allowed-account-id=123456789012"]).is_ok());
        assert!(parse(&["ecr", "--allowed-account-id=123456789012,000000000001"]).is_ok());
        for bad in [
            "abc",
            "1234567890123",
            "12345678901",
            "12345678901a",
            "arn:aws:iam::123456789012:root",
        ] {
            let error = parse(&["ecr", &format!("--allowed-account-id={bad}")]).unwrap_err();
            assert!(
                error.contains("--allowed-account-id") && error.contains("12 digits"),
                "{bad}: {error}"
            );
        }
        let guid = "72f988bf-86f1-41af-91ab-2d7cd011db47";
        assert!(parse(&["acr", "a.json", &format!("--allowed-client-id={guid}")]).is_ok());
        assert!(parse(&["acr", "a.json", &format!("--allowed-client-id={}", guid.to_uppercase())]).is_ok());
        for bad in [
            "my-app",
            "72f988bf86f141af91ab2d7cd011db47",
            "72f988bf-86f1-41af-91ab-2d7cd011db4g",
        ] {
            let error = parse(&["acr", "a.json", &format!("--allowed-client-id={bad}")]).unwrap_err();
            assert!(
                error.contains("--allowed-client-id") && error.contains("GUID"),
                "{bad}: {error}"
            );
        }
        // A tenant is a GUID or one of its domain names.
        for good in [guid, "contoso.onmicrosoft.com"] {
            assert!(
                parse(&["acr", "a.json", &format!("--allowed-tenant-id={good}")]).is_ok(),
                "{good}"
            );
        }
        let error = parse(&["acr", "a.json", "--allowed-tenant-id=a/b"]).unwrap_err();
        assert!(error.contains("--allowed-tenant-id"), "{error}");
        for good in [
            "my-project",
            "example.com:my-project",
            "abcdef",
            "a23456789012345678901234567890",
        ] {
            assert!(parse_project_id(good).is_ok(), "{good}");
        }
        for bad in [
            "p",
            "abcde",
            "1project",
            "my-project-",
            "My-Project",
            "my_project",
            ":my-project",
            "a234567890123456789012345678901",
        ] {
            assert!(parse_project_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn timeouts_stay_below_kubelets_kill() {
        assert!(parse_timeout("20s").is_ok());
        assert!(parse_timeout("59s").unwrap_err().contains("at most 50s"));
        assert!(parse_timeout("0s").is_err());
    }

    #[test]
    fn gcp_flags() {
        let parse = |args: &[&str]| {
            let mut all = vec!["cloud-credential-provider", "gcp"];
            all.extend(args);
            Cli::try_parse_from(all)
        };
        let Command::Gcp(args) = parse(&["--authFlow", "dockercfg-url"]).unwrap().command else {
            panic!("not gcp");
        };
        assert_eq!(args.auth_flow, GcpAuthFlow::DockercfgUrl);
        assert_eq!(
            args.workload_identity.sts_endpoint.as_str(),
            "https://sts.googleapis.com/"
        );
        assert!(parse(&["-a", "nope"]).is_err());
        // --identity-provider needs --project-id; --sts-audience replaces both.
        assert!(parse(&["--identity-provider", "https://idp"]).is_err());
        assert!(parse(&["--identity-provider", "https://idp", "--project-id", "my-project"]).is_ok());
        assert!(
            parse(&[
                "--identity-provider",
                "https://idp",
                "--project-id",
                "my-project",
                "--sts-audience",
                "a"
            ])
            .is_err()
        );
        assert!(parse(&["--project-id", "Bad Project"]).is_err());
        assert!(parse(&["--allowed-service-account", "*@p.iam.gserviceaccount.com"]).is_ok());
        assert!(parse(&["--allowed-service-account", "*@example.com"]).is_err());
        assert!(parse(&["--sts-endpoint", "http://sts.example.com/"]).is_err());
        assert!(parse(&["--metadata-host", "http://169.254.169.254"]).is_err());
    }

    #[test]
    fn acr_flags_take_upstreams_shape() {
        let parse = |args: &[&str]| {
            let mut all = vec!["cloud-credential-provider", "acr"];
            all.extend(args);
            Cli::try_parse_from(all)
        };
        let Command::Acr(args) = parse(&[
            "/etc/kubernetes/azure.json",
            "--registry-mirror=mcr.microsoft.com:r.azurecr.io,h:5000:r.azurecr.io",
        ])
        .unwrap()
        .command
        else {
            panic!("not acr");
        };
        assert_eq!(args.config.path(), std::path::Path::new("/etc/kubernetes/azure.json"));
        assert_eq!(args.mirror.mirrors.len(), 2);
        assert_eq!(args.mirror.mirrors[1].source, "h:5000");
        assert_eq!(args.endpoints.imds_endpoint.as_str(), "http://169.254.169.254/");
        assert!(parse(&["--config", "a.json", "-r", "a:b.azurecr.io"]).is_ok());
        assert!(parse(&[]).is_err());
        assert!(parse(&["a.json", "--config", "b.json"]).is_err());
        assert!(parse(&["a.json", "--imds-endpoint", "http://imds.example.com/"]).is_err());
    }

    #[test]
    fn insecure_endpoints_are_refused_at_parse_time() {
        let err = Cli::try_parse_from([
            "cloud-credential-provider",
            "token-exchange",
            "--token-endpoint",
            "http://sts.example.com/token",
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("--token-endpoint") && err.contains("https://"), "{err}");
    }
}
