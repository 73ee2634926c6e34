//! Which zone and region each host is in: the tag of the zone (region) category on the
//! host, else on its nearest ancestor that carries one (cluster, folders, datacenter),
//! as vSphere's cloud provider and CSI driver read them. Pure.

use std::collections::BTreeMap;

use super::soap::{Entity, MoRef};

/// Deeper than any real inventory; a longer chain is a loop.
const MAX_DEPTH: usize = 64;

/// A host, by name, and the zone and region its tags give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLabels {
    pub host: String,
    pub zone: Option<String>,
    pub region: Option<String>,
}

/// Each of `hosts` with its zone and region: `entities` are the hosts and all their
/// ancestors (name and parent), `tags` the (category, tag) pairs attached to each
/// object. An object with two tags of one category is an error naming them.
pub fn labels_of(
    hosts: &[MoRef],
    entities: &[Entity],
    tags: &BTreeMap<MoRef, Vec<(String, String)>>,
    zone_category: &str,
    region_category: &str,
) -> Result<Vec<HostLabels>, String> {
    let by_ref: BTreeMap<&MoRef, &Entity> = entities.iter().map(|e| (&e.object, e)).collect();
    let name = |object: &MoRef| {
        by_ref
            .get(object)
            .map_or_else(|| object.to_string(), |e| e.name.clone())
    };
    let mut out = Vec::with_capacity(hosts.len());
    for host in hosts {
        let mut chain = vec![host];
        while let Some(parent) = by_ref.get(chain[chain.len() - 1]).and_then(|e| e.parent.as_ref()) {
            if chain.len() >= MAX_DEPTH || chain.contains(&parent) {
                return Err(format!("the ancestors of host {} loop", name(host)));
            }
            chain.push(parent);
        }
        let nearest = |category: &str| -> Result<Option<String>, String> {
            for object in &chain {
                let found: Vec<&str> = tags
                    .get(*object)
                    .into_iter()
                    .flatten()
                    .filter(|(c, _)| c == category)
                    .map(|(_, tag)| tag.as_str())
                    .collect();
                match found.as_slice() {
                    [] => continue,
                    [one] => return Ok(Some((*one).to_owned())),
                    several => {
                        return Err(format!(
                            "{} {} carries several tags of category {category:?} ({}): one is needed",
                            object.kind,
                            name(object),
                            several.join(", ")
                        ));
                    }
                }
            }
            Ok(None)
        };
        out.push(HostLabels {
            host: name(host),
            zone: nearest(zone_category)?,
            region: nearest(region_category)?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(kind: &str, value: &str, name: &str, parent: Option<(&str, &str)>) -> Entity {
        Entity {
            object: MoRef::new(kind, value),
            name: name.to_owned(),
            parent: parent.map(|(k, v)| MoRef::new(k, v)),
        }
    }

    fn inventory() -> Vec<Entity> {
        vec![
            entity("HostSystem", "host-1", "h1", Some(("ClusterComputeResource", "c1"))),
            entity("HostSystem", "host-2", "h2", Some(("ClusterComputeResource", "c1"))),
            entity("HostSystem", "host-3", "h3", Some(("ComputeResource", "s1"))),
            entity("ClusterComputeResource", "c1", "cluster", Some(("Folder", "f1"))),
            entity("ComputeResource", "s1", "standalone", Some(("Folder", "f1"))),
            entity("Folder", "f1", "host", Some(("Datacenter", "dc"))),
            entity("Datacenter", "dc", "DC0", Some(("Folder", "root"))),
            entity("Folder", "root", "Datacenters", None),
        ]
    }

    fn tag(kind: &str, value: &str, category: &str, name: &str) -> (MoRef, (String, String)) {
        (MoRef::new(kind, value), (category.to_owned(), name.to_owned()))
    }

    fn tags(list: &[(MoRef, (String, String))]) -> BTreeMap<MoRef, Vec<(String, String)>> {
        let mut map: BTreeMap<MoRef, Vec<(String, String)>> = BTreeMap::new();
        for (object, pair) in list {
            map.entry(object.clone()).or_default().push(pair.clone());
        }
        map
    }

    #[test]
    fn the_nearest_tag_wins() {
        let hosts = [
            MoRef::new("HostSystem", "host-1"),
            MoRef::new("HostSystem", "host-2"),
            MoRef::new("HostSystem", "host-3"),
        ];
        let tags = tags(&[
            tag("ClusterComputeResource", "c1", "k8s-zone", "zone-a"),
            tag("HostSystem", "host-2", "k8s-zone", "zone-b"),
            tag("HostSystem", "host-2", "other", "x"),
            tag("Datacenter", "dc", "k8s-region", "region-1"),
        ]);
        let labels = labels_of(&hosts, &inventory(), &tags, "k8s-zone", "k8s-region").expect("labels");
        let shown: Vec<_> = labels
            .iter()
            .map(|l| (l.host.as_str(), l.zone.as_deref(), l.region.as_deref()))
            .collect();
        assert_eq!(
            shown,
            [
                ("h1", Some("zone-a"), Some("region-1")),
                ("h2", Some("zone-b"), Some("region-1")),
                ("h3", None, Some("region-1")),
            ]
        );
    }

    #[test]
    fn the_categories_named_are_read_and_the_default_ones_ignored() {
        let hosts = [
            MoRef::new("HostSystem", "host-1"),
            MoRef::new("HostSystem", "host-2"),
            MoRef::new("HostSystem", "host-3"),
        ];
        let tags = tags(&[
            // The default categories' tags, nearer than the named ones: ignored.
            tag("HostSystem", "host-1", "k8s-zone", "default-zone"),
            tag("HostSystem", "host-1", "k8s-region", "default-region"),
            tag("ClusterComputeResource", "c1", "k8s-zone", "default-zone-c"),
            tag("ClusterComputeResource", "c1", "zone-cat", "zone-a"),
            tag("HostSystem", "host-2", "zone-cat", "zone-b"),
            // A host with the default category only: no zone.
            tag("HostSystem", "host-3", "k8s-zone", "default-zone-3"),
            tag("Datacenter", "dc", "region-cat", "region-1"),
            // Two default-category tags on one object are not an error when not asked for.
            tag("Datacenter", "dc", "k8s-region", "r-x"),
            tag("Datacenter", "dc", "k8s-region", "r-y"),
        ]);
        let labels = labels_of(&hosts, &inventory(), &tags, "zone-cat", "region-cat").expect("labels");
        let shown: Vec<_> = labels
            .iter()
            .map(|l| (l.host.as_str(), l.zone.as_deref(), l.region.as_deref()))
            .collect();
        assert_eq!(
            shown,
            [
                ("h1", Some("zone-a"), Some("region-1")),
                ("h2", Some("zone-b"), Some("region-1")),
                ("h3", None, Some("region-1")),
            ]
        );
        // The same tags read with the default categories: the other answer, and the
        // datacenter's two k8s-region tags an error.
        let err = labels_of(&hosts, &inventory(), &tags, "k8s-zone", "k8s-region").expect_err("two regions");
        assert!(err.contains("\"k8s-region\" (r-x, r-y)"), "{err}");
    }

    #[test]
    fn two_zone_tags_on_one_object_and_loops_are_errors() {
        let hosts = [MoRef::new("HostSystem", "host-1")];
        let two = tags(&[
            tag("ClusterComputeResource", "c1", "k8s-zone", "zone-a"),
            tag("ClusterComputeResource", "c1", "k8s-zone", "zone-b"),
        ]);
        let err = labels_of(&hosts, &inventory(), &two, "k8s-zone", "k8s-region").expect_err("ambiguous");
        assert_eq!(
            err,
            "ClusterComputeResource cluster carries several tags of category \"k8s-zone\" (zone-a, zone-b): one is needed"
        );
        let mut looped = inventory();
        looped[7].parent = Some(MoRef::new("Datacenter", "dc"));
        let err = labels_of(&hosts, &looped, &BTreeMap::new(), "z", "r").expect_err("loop");
        assert!(err.contains("loop"), "{err}");
    }
}
