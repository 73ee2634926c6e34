//! AWS EC2 instance metadata (IMDSv2): a session token from
//! `PUT /latest/api/token`, then `GET /latest/meta-data/...` with it. The
//! suite's one IMDS client: the instance's addresses here, and the instance
//! role's credentials for the AWS credential chain.
//!
//! Address order follows the AWS cloud controller manager: every private
//! IPv4 of each network interface by device index (primary first), the
//! public IPv4, the private and public DNS names, then the first IPv6 of
//! each interface.

use super::{AddressKind, Instance, MetadataClient, MetadataError, ProviderIdOptions};

/// The IMDS IPv6 endpoint (Nitro instances), for IPv6-only subnets.
pub const IPV6_ENDPOINT: &str = "http://[fd00:ec2::254]/";

const TOKEN_TTL_SECONDS: &str = "300";

/// An IMDSv2 session: every read carries its token.
struct Session {
    token: String,
}

impl Session {
    async fn open(client: &MetadataClient) -> Result<Self, MetadataError> {
        Ok(Self {
            token: session_token(client).await?,
        })
    }

    fn headers(&self) -> [(&str, &str); 1] {
        [("X-aws-ec2-metadata-token", self.token.as_str())]
    }
}

/// The instance role's credentials document (`iam/security-credentials/<role>`,
/// JSON), or `None` when the instance has no role.
pub(crate) async fn instance_role_credentials(client: &MetadataClient) -> Result<Option<String>, MetadataError> {
    const ROLES: &str = "latest/meta-data/iam/security-credentials/";
    let session = Session::open(client).await?;
    let headers = session.headers();
    let Some(roles) = client.get(ROLES, &headers).await? else {
        return Ok(None);
    };
    let Some(role) = roles.lines().map(str::trim).find(|r| !r.is_empty()) else {
        return Ok(None);
    };
    // The role's name goes into a path: nothing that could leave it.
    if !role
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b))
    {
        return Err(client.garbage(ROLES, format!("{:?} is not an IAM role name", super::shorten(role))));
    }
    client.get(&format!("{ROLES}{role}"), &headers).await
}

pub(super) async fn instance(client: &MetadataClient) -> Result<Instance, MetadataError> {
    let session = Session::open(client).await?;
    let headers = session.headers();
    let get = |path: &'static str| client.get(path, &headers);

    let mut instance = Instance {
        instance_id: Some(
            client
                .get_required("latest/meta-data/instance-id", &headers)
                .await?
                .trim()
                .to_owned(),
        ),
        ..Instance::default()
    };
    let interfaces = match network_interfaces(client, &headers).await {
        Ok(interfaces) if !interfaces.is_empty() => interfaces,
        // Some emulators serve only the top-level keys (moto answers 500);
        // an unreadable or slow answer is still an error.
        Ok(_) | Err(MetadataError::Status { .. }) => {
            tracing::debug!("no per-interface metadata; using local-ipv4 alone");
            let ip = client.get_required("latest/meta-data/local-ipv4", &headers).await?;
            let ip = super::ip(client, "latest/meta-data/local-ipv4", &ip)?;
            vec![NetworkInterface {
                order: (0, 0),
                ipv4: vec![ip.to_string()],
                ipv6: Vec::new(),
            }]
        }
        Err(other) => return Err(other),
    };
    for interface in &interfaces {
        for ip in &interface.ipv4 {
            instance.push(AddressKind::InternalIP, ip.clone());
        }
    }
    if let Some(public) = get("latest/meta-data/public-ipv4").await? {
        let ip = super::ip(client, "latest/meta-data/public-ipv4", &public)?;
        instance.push(AddressKind::ExternalIP, ip.to_string());
    }
    if let Some(private_dns) = get("latest/meta-data/local-hostname").await? {
        let name = private_dns.trim().to_owned();
        instance.push(AddressKind::InternalDNS, name.clone());
        instance.push(AddressKind::Hostname, name.clone());
        instance.private_dns = Some(name);
    }
    if let Some(public_dns) = get("latest/meta-data/public-hostname").await? {
        instance.push(AddressKind::ExternalDNS, public_dns.trim());
    }
    for interface in &interfaces {
        if let Some(first) = interface.ipv6.first() {
            instance.push(AddressKind::InternalIP, first.clone());
        }
    }
    instance.hostname = get("latest/meta-data/hostname").await?.map(|h| h.trim().to_owned());
    instance.region = get("latest/meta-data/placement/region")
        .await?
        .map(|r| r.trim().to_owned());
    instance.zone = get("latest/meta-data/placement/availability-zone")
        .await?
        .map(|z| z.trim().to_owned());
    Ok(instance)
}

/// The AWS cloud controller manager (kubernetes/cloud-provider-aws,
/// `pkg/providers/v1`): it writes `aws:///ZONE/INSTANCE-ID` (as EKS's
/// nodeadm does), parses a provider ID with `MapToAWSInstanceID`
/// (`aws://HOST/ZONE/i-…`, `aws:////i-…` or a bare `i-…`; the host and
/// zone are ignored, the ID must start with `i-`), and finds a Node
/// without one by its name: an instance ID, or else the `private-dns-name`.
pub(super) struct Ccm;

impl super::CcmRules for Ccm {
    fn provider_id(&self, instance: &Instance, _: &ProviderIdOptions) -> Result<String, String> {
        let zone = super::provider_id_part("availability zone", instance.zone.as_deref())?;
        let id = super::provider_id_part("instance ID", instance.instance_id.as_deref())?;
        if !id.starts_with("i-") {
            return Err(format!("the instance ID {id:?} does not start with i-"));
        }
        Ok(format!("aws:///{zone}/{id}"))
    }

    fn key(&self, provider_id: &str) -> Result<String, String> {
        let path = match provider_id.strip_prefix("aws://") {
            // The URL's host (an empty one in the usual form) is not read.
            Some(rest) => rest.find('/').map_or("", |slash| &rest[slash..]),
            None if provider_id.contains("://") => return Err("its scheme is not aws".into()),
            None => provider_id,
        };
        let tokens: Vec<&str> = path.trim_matches('/').split('/').collect();
        let id = match tokens.as_slice() {
            [id] | [_, id] => *id,
            _ => "",
        };
        if id.starts_with("i-") {
            Ok(id.to_owned())
        } else {
            Err("not aws:///ZONE/i-… (the CCM's MapToAWSInstanceID refuses it)".into())
        }
    }

    fn finds_by_name(&self, node: &str, instance: &Instance) -> bool {
        self.names(instance).iter().any(|name| name == node)
    }

    fn names(&self, instance: &Instance) -> Vec<String> {
        let private_dns = instance.private_dns.iter().map(|n| n.to_lowercase());
        let id = instance.instance_id.iter().filter(|id| id.starts_with("i-")).cloned();
        private_dns.chain(id).collect()
    }
}

async fn session_token(client: &MetadataClient) -> Result<String, MetadataError> {
    if client.documents.is_some() {
        return Ok("in-memory-session-token".to_owned());
    }
    let url = client.url("latest/api/token")?;
    let response = client
        .client
        .put(url.clone())
        .header("X-aws-ec2-metadata-token-ttl-seconds", TOKEN_TTL_SECONDS)
        .send()
        .await
        .map_err(|e| client.transport_error(&url, e))?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(MetadataError::Status {
            provider: "aws",
            url: url.to_string(),
            status,
            hint: ": the IMDSv2 session token was refused; check the instance's metadata options (http-endpoint enabled, http-put-response-hop-limit of 2 or more inside containers)",
        });
    }
    let token = client.body(&url, response).await?;
    let token = token.trim().to_owned();
    if token.is_empty() {
        return Err(client.garbage("latest/api/token", "empty IMDSv2 session token"));
    }
    Ok(token)
}

struct NetworkInterface {
    /// (network card, device number): the CCM's order.
    order: (u32, u32),
    ipv4: Vec<String>,
    ipv6: Vec<String>,
}

async fn network_interfaces(
    client: &MetadataClient,
    headers: &[(&str, &str)],
) -> Result<Vec<NetworkInterface>, MetadataError> {
    const MACS: &str = "latest/meta-data/network/interfaces/macs/";
    let Some(listing) = client.get(MACS, headers).await? else {
        return Ok(Vec::new());
    };
    let mut interfaces = Vec::new();
    for mac in listing
        .lines()
        .map(|l| l.trim().trim_end_matches('/'))
        .filter(|l| !l.is_empty())
    {
        let path = |leaf: &str| format!("{MACS}{mac}/{leaf}");
        let number = |text: Option<String>| text.and_then(|t| t.trim().parse::<u32>().ok()).unwrap_or(0);
        let device = number(client.get(&path("device-number"), headers).await?);
        let card = number(client.get(&path("network-card"), headers).await?);
        let mut ipv4 = Vec::new();
        for line in client
            .get(&path("local-ipv4s"), headers)
            .await?
            .unwrap_or_default()
            .lines()
        {
            if !line.trim().is_empty() {
                ipv4.push(super::ip(client, &path("local-ipv4s"), line)?.to_string());
            }
        }
        let mut ipv6 = Vec::new();
        for line in client.get(&path("ipv6s"), headers).await?.unwrap_or_default().lines() {
            if !line.trim().is_empty() {
                ipv6.push(super::ip(client, &path("ipv6s"), line)?.to_string());
            }
        }
        interfaces.push(NetworkInterface {
            order: (card, device),
            ipv4,
            ipv6,
        });
    }
    interfaces.sort_by_key(|i| i.order);
    Ok(interfaces)
}
