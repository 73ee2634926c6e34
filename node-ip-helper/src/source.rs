//! Where the addresses come from: the `--source` asked for ([`Source`]) and
//! who answered ([`Origin`], what `auto` turned out to be).
//!
//! Which rules the choice follows comes from the origin alone: a cloud's
//! origin means its metadata service's list in its controller manager's
//! order, so the `provided-node-ip` annotation matches what that CCM sees;
//! a local origin knows no cloud's list, so only kubelet's rules apply.

use clap::ValueEnum;
use clap::builder::PossibleValue;
use cloud_access::metadata::Provider;
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

#[cfg(test)]
mod tests {
    use super::*;

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
