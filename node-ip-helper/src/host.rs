//! The host's network state as the choice needs it: interfaces, their
//! addresses with the kernel's flags, and default routes with metrics.
//! Read over rtnetlink (no `ip` subprocess); the selection itself works on
//! this plain data, so tests can also build it by hand.

use std::net::IpAddr;

use futures_util::TryStreamExt;
use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute, RouteMessage, RouteType};
use rtnetlink::{Handle, RouteMessageBuilder};
use serde::Serialize;

use crate::family::Family;

/// Linux's main routing table, the one kubelet's own detection reads.
const MAIN_TABLE: u32 = 254;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Host {
    pub interfaces: Vec<Interface>,
    /// In kernel order: per interface, primary addresses before secondary ones.
    pub addresses: Vec<HostAddress>,
    pub default_routes: Vec<DefaultRoute>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Interface {
    pub index: u32,
    pub name: String,
    pub up: bool,
    pub loopback: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostAddress {
    pub interface_index: u32,
    pub ip: IpAddr,
    pub prefix_len: u8,
    /// IPv4 secondary address, or IPv6 temporary (privacy) address: the
    /// kernel marks both with the same flag.
    pub secondary: bool,
    /// IPv6 duplicate address detection has not finished.
    pub tentative: bool,
    /// IPv6 duplicate address detection found a duplicate.
    pub dad_failed: bool,
    /// IPv6 preferred lifetime is over.
    pub deprecated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DefaultRoute {
    pub family: Family,
    pub interface_index: u32,
    pub metric: u32,
}

impl Host {
    pub fn interface(&self, index: u32) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.index == index)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("cannot open a netlink socket to read interfaces and routes: {0}")]
    Socket(std::io::Error),
    #[error("netlink {what} dump failed: {source}")]
    Dump {
        what: &'static str,
        #[source]
        source: rtnetlink::Error,
    },
}

/// Reads interfaces, addresses and main-table default routes of the
/// current network namespace.
pub async fn read_host() -> Result<Host, HostError> {
    let (connection, handle, _) = rtnetlink::new_connection().map_err(HostError::Socket)?;
    let task = tokio::spawn(connection);
    let host = read_with(&handle).await;
    task.abort();
    host
}

async fn read_with(handle: &Handle) -> Result<Host, HostError> {
    let dump = |what| move |source| HostError::Dump { what, source };
    let links: Vec<LinkMessage> = handle
        .link()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(dump("link"))?;
    let addresses: Vec<AddressMessage> = handle
        .address()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(dump("address"))?;
    let mut routes: Vec<RouteMessage> = handle
        .route()
        .get(RouteMessageBuilder::<std::net::Ipv4Addr>::new().build())
        .execute()
        .try_collect()
        .await
        .map_err(dump("IPv4 route"))?;
    let v6: Vec<RouteMessage> = handle
        .route()
        .get(RouteMessageBuilder::<std::net::Ipv6Addr>::new().build())
        .execute()
        .try_collect()
        .await
        .map_err(dump("IPv6 route"))?;
    routes.extend(v6);
    Ok(Host {
        interfaces: links.iter().filter_map(interface).collect(),
        addresses: addresses.iter().filter_map(host_address).collect(),
        default_routes: routes.iter().flat_map(default_routes).collect(),
    })
}

fn interface(link: &LinkMessage) -> Option<Interface> {
    let name = link.attributes.iter().find_map(|a| match a {
        LinkAttribute::IfName(name) => Some(name.clone()),
        _ => None,
    })?;
    Some(Interface {
        index: link.header.index,
        name,
        up: link.header.flags.contains(LinkFlags::Up),
        loopback: link.header.flags.contains(LinkFlags::Loopback),
    })
}

fn host_address(message: &AddressMessage) -> Option<HostAddress> {
    // IFA_LOCAL is the interface's own address on point-to-point links,
    // where IFA_ADDRESS is the peer's; elsewhere they are equal.
    let mut address = None;
    let mut local = None;
    let mut flags = AddressFlags::from_bits_truncate(u32::from(message.header.flags.bits()));
    for attribute in &message.attributes {
        match attribute {
            AddressAttribute::Address(ip) => address = Some(*ip),
            AddressAttribute::Local(ip) => local = Some(*ip),
            // The 32-bit attribute, when present, supersedes the header's 8 bits.
            AddressAttribute::Flags(all) => flags = *all,
            _ => {}
        }
    }
    Some(HostAddress {
        interface_index: message.header.index,
        ip: local.or(address)?,
        prefix_len: message.header.prefix_len,
        secondary: flags.contains(AddressFlags::Secondary),
        tentative: flags.contains(AddressFlags::Tentative),
        dad_failed: flags.contains(AddressFlags::Dadfailed),
        deprecated: flags.contains(AddressFlags::Deprecated),
    })
}

fn default_routes(route: &RouteMessage) -> Vec<DefaultRoute> {
    let header = &route.header;
    let table = route
        .attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(u32::from(header.table));
    let has_destination = route.attributes.iter().any(|a| match a {
        RouteAttribute::Destination(RouteAddress::Inet(ip)) => !ip.is_unspecified(),
        RouteAttribute::Destination(RouteAddress::Inet6(ip)) => !ip.is_unspecified(),
        RouteAttribute::Destination(_) => true,
        _ => false,
    });
    if header.destination_prefix_length != 0
        || has_destination
        || table != MAIN_TABLE
        || header.kind != RouteType::Unicast
    {
        return Vec::new();
    }
    let Some(family) = Family::from_address_family(header.address_family) else {
        return Vec::new();
    };
    let metric = route
        .attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Priority(p) => Some(*p),
            _ => None,
        })
        .unwrap_or(0);
    // A multipath default route reaches out through each next hop's interface.
    let mut interfaces: Vec<u32> = route
        .attributes
        .iter()
        .flat_map(|a| match a {
            RouteAttribute::Oif(index) => vec![*index],
            RouteAttribute::MultiPath(hops) => hops.iter().map(|h| h.interface_index).collect(),
            _ => Vec::new(),
        })
        .collect();
    interfaces.dedup();
    interfaces
        .into_iter()
        .map(|interface_index| DefaultRoute {
            family,
            interface_index,
            metric,
        })
        .collect()
}
