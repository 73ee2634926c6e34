//! IP families and the family policy of `--ip-family`.

use std::net::IpAddr;

use rtnetlink::packet_route::AddressFamily;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Family {
    #[serde(rename = "IPv4")]
    V4,
    #[serde(rename = "IPv6")]
    V6,
}

impl Family {
    pub fn of(ip: &IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    pub fn from_address_family(family: AddressFamily) -> Option<Self> {
        match family {
            AddressFamily::Inet => Some(Family::V4),
            AddressFamily::Inet6 => Some(Family::V6),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }
}

/// `--ip-family`: which families the node gets, primary first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IpFamilyPolicy {
    /// One IPv4 address.
    #[default]
    Ipv4,
    /// One IPv6 address.
    Ipv6,
    /// An IPv4 and an IPv6 address, IPv4 primary; both are required.
    Dual,
    /// An IPv6 and an IPv4 address, IPv6 primary; both are required.
    DualIpv6Primary,
}

impl IpFamilyPolicy {
    /// The families to choose, primary first.
    pub fn families(self) -> &'static [Family] {
        match self {
            IpFamilyPolicy::Ipv4 => &[Family::V4],
            IpFamilyPolicy::Ipv6 => &[Family::V6],
            IpFamilyPolicy::Dual => &[Family::V4, Family::V6],
            IpFamilyPolicy::DualIpv6Primary => &[Family::V6, Family::V4],
        }
    }
}
