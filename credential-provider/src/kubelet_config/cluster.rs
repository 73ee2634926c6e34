//! The apiserver, for `check-config --rbac --node`: one kind of request (a
//! SubjectAccessReview), sent with the HTTP client the plugin already has.
//!
//! Why not the suite's `apiserver-client` (kube's client, as `node-ip-helper
//! check --node` and `pv-topology-webhook audit` use): this binary is
//! kubelet's exec plugin, started at every pull, and linking kube's client
//! for this one operator request doubled it (release build 6.2 → 12.3 MB,
//! 6,396 → 17,919 relocations, 1.08× the exec time and 1.25× the peak RSS
//! of `static`, measured 2026-12-03). So the kubeconfig is read here for
//! what the request needs: the server, its CA (or
//! `insecure-skip-tls-verify`), and a bearer token (`token`, `tokenFile`)
//! or a client certificate and key (inline or in files). A user that
//! authenticates with an `exec` plugin or an `auth-provider` is refused with
//! what to give instead. The bounds are those of the suite's client: the
//! kubeconfig at most 16 MiB and each file it names at most 4 MiB, regular
//! files only; the answer within `--request-timeout` (connect to last byte)
//! and at most 2 MiB; the apiserver's text cleaned of the credentials sent.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use cloud_access::files::read_regular;
use cloud_access::http::{BodyError, Trust};
use secrecy::{ExposeSecret as _, SecretString};
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// Kubeconfigs with embedded certificates take a few kilobytes each.
const KUBECONFIG_LIMIT: u64 = 16 * 1024 * 1024;
/// A certificate bundle, key or token named by a kubeconfig.
const REFERENCED_FILE_LIMIT: u64 = 4 * 1024 * 1024;
/// etcd stores no object past 1.5 MiB.
const MAX_ANSWER_BYTES: usize = 2 << 20;
/// The most characters of the apiserver's text kept in a line.
const MESSAGE_LIMIT: usize = 500;
const IN_CLUSTER: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct Kubeconfig {
    #[serde(default)]
    clusters: Vec<Named<ClusterEntry>>,
    #[serde(default)]
    users: Vec<Named<UserEntry>>,
    #[serde(default)]
    contexts: Vec<Named<ContextEntry>>,
    #[serde(default)]
    current_context: String,
}

#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(flatten)]
    item: T,
}

#[derive(Deserialize, Default)]
struct ClusterEntry {
    #[serde(default)]
    cluster: ClusterFields,
}

#[derive(Deserialize, Default)]
struct UserEntry {
    #[serde(default)]
    user: User,
}

#[derive(Deserialize, Default)]
struct ContextEntry {
    #[serde(default)]
    context: Context,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct ClusterFields {
    #[serde(default)]
    server: String,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    proxy_url: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct User {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    exec: Option<serde_json::Value>,
    auth_provider: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
struct Context {
    #[serde(default)]
    cluster: String,
    #[serde(default)]
    user: String,
}

/// Why a request failed: the apiserver's status when it answered, and one
/// line for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestError {
    pub status: Option<u16>,
    pub message: String,
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for RequestError {
    /// No answer from the apiserver (or none it meant: the transport's).
    fn from(message: String) -> Self {
        RequestError { status: None, message }
    }
}

/// The cluster a request goes to, and how it authenticates.
pub struct Cluster {
    server: url::Url,
    client: reqwest::Client,
    bearer: Option<SecretString>,
    request_timeout: Duration,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("server", &self.server())
            .finish_non_exhaustive()
    }
}

/// The kubeconfig file: `--kubeconfig`, else the first of `$KUBECONFIG`'s
/// list, else `~/.kube/config` if it exists; none: in-cluster.
fn kubeconfig_file(flag: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = flag {
        return Some(path.to_owned());
    }
    if let Some(list) = std::env::var_os("KUBECONFIG")
        && let Some(first) = std::env::split_paths(&list).find(|p| !p.as_os_str().is_empty())
    {
        return Some(first);
    }
    std::env::home_dir()
        .map(|home| home.join(".kube").join("config"))
        .filter(|path| path.exists())
}

impl Cluster {
    /// The cluster of `kubeconfig` (or the defaults) and `context` (or the
    /// current one); errors are one line naming the file and the field.
    pub fn connect(
        kubeconfig: Option<&Path>,
        context: Option<&str>,
        request_timeout: Duration,
    ) -> Result<Cluster, String> {
        let Some(path) = kubeconfig_file(kubeconfig) else {
            if context.is_some() {
                return Err("--context needs a kubeconfig (none found)".to_owned());
            }
            return Self::in_cluster(request_timeout);
        };
        let shown = path.display().to_string();
        let text = cloud_access::files::read_regular_to_string(&path, KUBECONFIG_LIMIT).map_err(|e| {
            format!("cannot read the kubeconfig (--kubeconfig, else $KUBECONFIG or ~/.kube/config): {e}")
        })?;
        let config: Kubeconfig = cloud_access::yaml::from_str(&text).map_err(|e| format!("kubeconfig {shown}: {e}"))?;
        let wanted = context.unwrap_or(&config.current_context);
        let find = |what: &str, name: &str| format!("kubeconfig {shown}: no {what} {name:?}");
        let context = config
            .contexts
            .iter()
            .find(|c| c.name == wanted)
            .map(|c| &c.item.context)
            .ok_or_else(|| {
                find(
                    if wanted.is_empty() {
                        "current-context"
                    } else {
                        "context"
                    },
                    wanted,
                )
            })?;
        let cluster = config
            .clusters
            .iter()
            .find(|c| c.name == context.cluster)
            .map(|c| &c.item.cluster)
            .ok_or_else(|| find("cluster", &context.cluster))?;
        let user = config
            .users
            .iter()
            .find(|u| u.name == context.user)
            .map(|u| &u.item.user)
            .ok_or_else(|| find("user", &context.user))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let field =
            |name: &'static str, value: &Option<String>, data: &Option<String>| -> Result<Option<Vec<u8>>, String> {
                if let Some(data) = data {
                    return base64::engine::general_purpose::STANDARD
                        .decode(data.trim())
                        .map(Some)
                        .map_err(|e| format!("kubeconfig {shown}: {name}-data is not base64: {e}"));
                }
                match value {
                    Some(file) => read_regular(&dir.join(file), REFERENCED_FILE_LIMIT)
                        .map(Some)
                        .map_err(|e| format!("kubeconfig {shown}: {name} {e}")),
                    None => Ok(None),
                }
            };
        if cluster.proxy_url.is_some() {
            return Err(format!(
                "kubeconfig {shown}: the cluster names a proxy-url: this check reaches the apiserver directly"
            ));
        }
        if user.exec.is_some() || user.auth_provider.is_some() {
            return Err(format!(
                "kubeconfig {shown}: user {:?} authenticates with an exec plugin or auth-provider, which this check does not run: give --kubeconfig with a token (kubectl create token) or a client certificate",
                context.user
            ));
        }
        let trust = if cluster.insecure_skip_tls_verify {
            Trust::Insecure
        } else {
            match field(
                "certificate-authority",
                &cluster.certificate_authority,
                &cluster.certificate_authority_data,
            )? {
                Some(pem) => Trust::Roots(
                    reqwest::Certificate::from_pem_bundle(&pem)
                        .map_err(|e| format!("kubeconfig {shown}: certificate-authority: {e}"))?,
                ),
                None => Trust::System,
            }
        };
        let identity = match (
            field(
                "client-certificate",
                &user.client_certificate,
                &user.client_certificate_data,
            )?,
            field("client-key", &user.client_key, &user.client_key_data)?,
        ) {
            (Some(mut cert), Some(key)) => {
                cert.push(b'\n');
                cert.extend_from_slice(&key);
                Some(
                    reqwest::Identity::from_pem(&cert)
                        .map_err(|e| format!("kubeconfig {shown}: client certificate and key: {e}"))?,
                )
            }
            (None, None) => None,
            _ => {
                return Err(format!(
                    "kubeconfig {shown}: a client certificate needs its key, and a key its certificate"
                ));
            }
        };
        let bearer = match (&user.token, &user.token_file) {
            (Some(token), _) => Some(token.clone()),
            (None, Some(file)) => Some(
                String::from_utf8_lossy(
                    &read_regular(&dir.join(file), REFERENCED_FILE_LIMIT)
                        .map_err(|e| format!("kubeconfig {shown}: tokenFile {e}"))?,
                )
                .trim()
                .to_owned(),
            ),
            (None, None) => None,
        };
        let server = url::Url::parse(&cluster.server).map_err(|e| {
            format!(
                "kubeconfig {shown}: cluster {:?}: server {:?}: {e}",
                context.cluster, cluster.server
            )
        })?;
        Self::build(server, trust, identity, bearer, request_timeout)
    }

    /// The pod's own service account, as a pod's client finds the apiserver.
    fn in_cluster(request_timeout: Duration) -> Result<Cluster, String> {
        let (Ok(host), Ok(port)) = (
            std::env::var("KUBERNETES_SERVICE_HOST"),
            std::env::var("KUBERNETES_SERVICE_PORT"),
        ) else {
            return Err(
                "cannot find the cluster: no --kubeconfig, $KUBECONFIG or ~/.kube/config, and not in a pod".to_owned(),
            );
        };
        let dir = Path::new(IN_CLUSTER);
        let read = |name: &str| {
            read_regular(&dir.join(name), REFERENCED_FILE_LIMIT).map_err(|e| format!("in-cluster {name}: {e}"))
        };
        let roots =
            reqwest::Certificate::from_pem_bundle(&read("ca.crt")?).map_err(|e| format!("in-cluster ca.crt: {e}"))?;
        let token = String::from_utf8_lossy(&read("token")?).trim().to_owned();
        let host = if host.contains(':') { format!("[{host}]") } else { host };
        let server =
            url::Url::parse(&format!("https://{host}:{port}")).map_err(|e| format!("in-cluster address: {e}"))?;
        Self::build(server, Trust::Roots(roots), None, Some(token), request_timeout)
    }

    fn build(
        server: url::Url,
        trust: Trust,
        identity: Option<reqwest::Identity>,
        bearer: Option<String>,
        request_timeout: Duration,
    ) -> Result<Cluster, String> {
        // The client the plugin's backends use, with the kubeconfig's trust;
        // a client certificate needs a builder of its own.
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("cloud-credential-provider/", env!("CARGO_PKG_VERSION")))
            .timeout(request_timeout)
            .connect_timeout(request_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy();
        builder = match trust {
            Trust::System => builder,
            Trust::Roots(roots) => builder.tls_certs_only(roots),
            Trust::Insecure => builder.tls_danger_accept_invalid_certs(true),
        };
        if let Some(identity) = identity {
            builder = builder.identity(identity);
        }
        let client = builder
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Cluster {
            server,
            client,
            bearer: bearer.filter(|t| !t.is_empty()).map(SecretString::from),
            request_timeout,
        })
    }

    /// The server as error lines name it: scheme, host and port.
    pub fn server(&self) -> String {
        cloud_access::http::shown_url(&self.server)
            .trim_end_matches('/')
            .to_owned()
    }

    /// POSTs `object` to the collection `path`; the answer as `T`.
    pub async fn create<T: DeserializeOwned>(&self, path: &str, object: &serde_json::Value) -> Result<T, RequestError> {
        let url = self.server.join(path).map_err(|e| e.to_string())?;
        let mut request = self.client.post(url).json(object);
        if let Some(token) = &self.bearer {
            request = request.bearer_auth(token.expose_secret());
        }
        let secrets: Vec<&str> = self.bearer.iter().map(|t| t.expose_secret()).collect();
        let clean = |text: &str| cloud_access::logging::clean_text(text, &secrets, MESSAGE_LIMIT);
        let transport = |error: &reqwest::Error| {
            match cloud_access::http::io_error_kind(error) {
            Some(std::io::ErrorKind::ConnectionRefused) => {
                "connection refused (is the apiserver up, and is the `server` of the kubeconfig's cluster right? --kubeconfig)".to_owned()
            }
            _ if error.is_timeout() => self.timed_out(),
            _ => clean(&cloud_access::logging::error_chain(error)),
        }
        };
        let response = request.send().await.map_err(|e| transport(&e))?;
        let status = response.status();
        let body = cloud_access::http::read_body(response, MAX_ANSWER_BYTES)
            .await
            .map_err(|e| match e {
                BodyError::TooLarge { .. } => format!("the answer is larger than {} MiB", MAX_ANSWER_BYTES >> 20),
                BodyError::Transport(e) => transport(&e),
            })?;
        if !status.is_success() {
            let (reason, message) = cloud_access::json::kubernetes_status(&body)
                .unwrap_or_else(|| (String::new(), String::from_utf8_lossy(&body).trim().to_owned()));
            let reason = if reason.is_empty() {
                status.canonical_reason().unwrap_or("")
            } else {
                &reason
            };
            return Err(RequestError {
                status: Some(status.as_u16()),
                message: format!("{} ({} {})", clean(&message), status.as_u16(), clean(reason)),
            });
        }
        serde_json::from_slice(&body)
            .map_err(|e| format!("the answer is not the object asked for: {}", clean(&e.to_string())).into())
    }

    fn timed_out(&self) -> String {
        format!(
            "timed out: no complete answer within --request-timeout {} (is the `server` of the kubeconfig's cluster reachable from here? --kubeconfig)",
            cloud_access::go_duration::format(self.request_timeout)
        )
    }
}
