//! Where the addresses come from: the `--source` asked for ([`Source`]) and
//! who answered ([`Origin`], what `auto` turned out to be).
//!
//! Which rules the choice follows comes from the origin alone: a cloud's
//! origin means its metadata service's list in its controller manager's
//! order, so the `provided-node-ip` annotation matches what that CCM sees;
//! a local origin knows no cloud's list, so only kubelet's rules apply.

use clap::ValueEnum;
use clap::builder::PossibleValue;
use cloud_access::metadata::{MetadataError, Provider};
use serde::{Serialize, Serializer};

/// `--source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The host's interfaces and routes: no cloud's rules.
    Local,
    /// One cloud's metadata service: its CCM's rules.
    Cloud(Provider),
    /// Every metadata service at once: the rules of the cloud that answers
    /// (the first in [`Provider::ALL`]'s order); local if none does.
    Auto,
}

const VARIANTS: [Source; 8] = [
    Source::Local,
    Source::Cloud(Provider::Aws),
    Source::Cloud(Provider::Gce),
    Source::Cloud(Provider::Azure),
    Source::Cloud(Provider::OpenStack),
    Source::Cloud(Provider::DigitalOcean),
    Source::Cloud(Provider::Hetzner),
    Source::Auto,
];

impl ValueEnum for Source {
    fn value_variants<'a>() -> &'a [Self] {
        &VARIANTS
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let (name, help) = match self {
            Source::Local => ("local", "The host's interfaces and routes (netlink)"),
            Source::Auto => (
                "auto",
                "Ask every metadata service at once; the host's own state if none answers",
            ),
            Source::Cloud(provider) => (
                provider.name(),
                match provider {
                    Provider::Aws => "AWS EC2 instance metadata (IMDSv2; the IPv6 endpoint with --ip-family ipv6)",
                    Provider::Gce => "Google Compute Engine metadata server",
                    Provider::Azure => "Azure Instance Metadata Service",
                    Provider::OpenStack => "OpenStack metadata service, or a config drive with --config-drive",
                    Provider::DigitalOcean => "DigitalOcean droplet metadata",
                    Provider::Hetzner => "Hetzner Cloud server metadata",
                },
            ),
        };
        Some(PossibleValue::new(name).help(help))
    }
}

/// Who gave the addresses: `local`, or the cloud whose metadata answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Local,
    Cloud(Provider),
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Local => "local",
            Origin::Cloud(provider) => provider.name(),
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Origin {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// What one metadata service said when `auto` asked it: the reason `auto`
/// fell back to the host's own state, or did not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetadataAnswer {
    /// The provider's name, as `--source` takes it.
    pub source: &'static str,
    /// The service's root asked.
    pub url: String,
    pub answer: Answer,
    /// The error, as one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the short form adds to the answer: `after 2s`, `HTTP 404`.
    #[serde(skip)]
    detail: Option<String>,
}

/// How a metadata service answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answer {
    /// With the instance's addresses.
    Answered,
    /// Nothing within `--metadata-timeout` (a gateway dropping what is sent
    /// to the link-local address, off a cloud).
    TimedOut,
    /// Nothing listens there, or a firewall rejects.
    Refused,
    /// A service answered, but not as this provider's does (404, 403, …):
    /// another cloud's, or another server.
    NotThisCloud,
    /// HTTP 5xx: this cloud's service, failing.
    ServerError,
    /// An answer that is not the provider's documents.
    Unreadable,
    /// Any other failure to connect (no route, say).
    Unreachable,
}

impl MetadataAnswer {
    /// What `provider`'s service at `url` answered.
    pub fn of<T>(provider: Provider, url: &str, result: &Result<T, MetadataError>) -> Self {
        let (answer, detail) = match result {
            Ok(_) => (Answer::Answered, None),
            Err(MetadataError::Timeout { timeout, .. }) => (
                Answer::TimedOut,
                Some(format!("after {}", cloud_access::go_duration::format(*timeout))),
            ),
            Err(MetadataError::Refused { .. }) => (Answer::Refused, None),
            Err(MetadataError::Status { status, .. }) if *status >= 500 => {
                (Answer::ServerError, Some(format!("HTTP {status}")))
            }
            Err(MetadataError::Status { status, .. }) => (Answer::NotThisCloud, Some(format!("HTTP {status}"))),
            Err(MetadataError::Garbage { .. } | MetadataError::TooLarge { .. }) => (Answer::Unreadable, None),
            Err(_) => (Answer::Unreachable, None),
        };
        MetadataAnswer {
            source: provider.name(),
            url: url.to_owned(),
            answer,
            error: result
                .as_ref()
                .err()
                .map(|e| cloud_access::logging::clean_text(&e.to_string(), &[], 500)),
            detail,
        }
    }

    /// `connection refused`, `timed out after 2s`, `not this cloud (HTTP 404)`.
    fn short(&self) -> String {
        let answer = match self.answer {
            Answer::Answered => "answered",
            Answer::TimedOut => "timed out",
            Answer::Refused => "connection refused",
            Answer::NotThisCloud => "not this cloud",
            Answer::ServerError => "a server error",
            Answer::Unreadable => "an unreadable answer",
            Answer::Unreachable => "unreachable",
        };
        match (&self.detail, self.answer) {
            (Some(detail), Answer::TimedOut) => format!("{answer} {detail}"),
            (Some(detail), _) => format!("{answer} ({detail})"),
            (None, _) => answer.to_owned(),
        }
    }
}

/// Who was asked and what each said, for one line: `at URL (aws: timed out
/// after 2s, gce: connection refused, …)`, each URL by its name when they
/// differ (AWS's IPv6 endpoint).
pub fn asked_summary(asked: &[MetadataAnswer]) -> String {
    let same_url = asked.windows(2).all(|pair| pair[0].url == pair[1].url);
    let each: Vec<String> = asked
        .iter()
        .map(|a| match same_url {
            true => format!("{}: {}", a.source, a.short()),
            false => format!("{} at {}: {}", a.source, a.url, a.short()),
        })
        .collect();
    match (same_url, asked.first()) {
        (true, Some(first)) => format!("at {} ({})", first.url, each.join(", ")),
        _ => format!("({})", each.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_metadata_answer_is_named() {
        let url = "http://169.254.169.254/";
        let timeout = MetadataError::Timeout {
            provider: "aws",
            url: url.into(),
            timeout: std::time::Duration::from_secs(2),
        };
        let refused = MetadataError::Refused {
            provider: "gce",
            url: url.into(),
        };
        let status = |status| MetadataError::Status {
            provider: "azure",
            url: url.into(),
            status,
            hint: "",
        };
        let asked = [
            MetadataAnswer::of::<()>(Provider::Aws, url, &Err(timeout)),
            MetadataAnswer::of::<()>(Provider::Gce, url, &Err(refused)),
            MetadataAnswer::of::<()>(Provider::Azure, url, &Err(status(404))),
            MetadataAnswer::of::<()>(Provider::OpenStack, url, &Err(status(503))),
            MetadataAnswer::of(Provider::Hetzner, url, &Ok(())),
        ];
        assert_eq!(
            asked_summary(&asked),
            "at http://169.254.169.254/ (aws: timed out after 2s, gce: connection refused, azure: not this cloud (HTTP 404), openstack: a server error (HTTP 503), hetzner: answered)"
        );
        let json = serde_json::to_value(&asked[0]).expect("JSON");
        assert_eq!(json["answer"], "timed-out");
        assert_eq!(json["source"], "aws");
        assert!(
            json["error"]
                .as_str()
                .expect("a string")
                .contains("did not answer within 2s"),
            "{json}"
        );
        assert!(serde_json::to_value(&asked[4]).expect("JSON").get("error").is_none());
        let mut ipv6 = asked[..2].to_vec();
        ipv6[0].url = "http://[fd00:ec2::254]/".into();
        assert_eq!(
            asked_summary(&ipv6),
            "(aws at http://[fd00:ec2::254]/: timed out after 2s, gce at http://169.254.169.254/: connection refused)"
        );
    }

    #[test]
    fn every_provider_is_a_source_and_names_round_trip() {
        for provider in Provider::ALL {
            assert!(VARIANTS.contains(&Source::Cloud(provider)), "{provider:?}");
            assert_eq!(Source::from_str(provider.name(), false), Ok(Source::Cloud(provider)));
            assert_eq!(Origin::Cloud(provider).name(), provider.name());
        }
        assert_eq!(Source::from_str("local", false), Ok(Source::Local));
        assert_eq!(Source::from_str("auto", false), Ok(Source::Auto));
        assert_eq!(serde_json::to_value(Origin::Local).unwrap(), "local");
    }
}
