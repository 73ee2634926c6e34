//! EC2 `DescribeVolumes` (the zone of an EBS volume) and
//! `DescribeInstances` (an instance's private DNS name).

use std::time::Instant;

use super::client::AwsClient;
use super::credentials::AwsCredentials;
use super::endpoints::EC2;
use super::error::AwsError;

const VERSION: &str = "2016-11-15";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub id: String,
    pub availability_zone: String,
}

/// The zones of `volume_ids`. An unknown volume is an
/// `InvalidVolume.NotFound` API error.
pub async fn describe_volumes(
    client: &AwsClient,
    volume_ids: &[&str],
    credentials: &AwsCredentials,
    deadline: Instant,
) -> Result<Vec<Volume>, AwsError> {
    const ACTION: &str = "DescribeVolumes";
    let names: Vec<String> = (1..=volume_ids.len()).map(|i| format!("VolumeId.{i}")).collect();
    let params: Vec<(&str, &str)> = names
        .iter()
        .map(String::as_str)
        .zip(volume_ids.iter().copied())
        .collect();
    let xml = client
        .query(EC2, ACTION, VERSION, &params, credentials, deadline)
        .await?;
    parse_describe_volumes(&xml)
}

/// The volumes of a `DescribeVolumes` answer (its `volumeSet`), each with its
/// ID and zone. Public for the fuzz targets (fuzz/).
pub fn parse_describe_volumes(xml: &str) -> Result<Vec<Volume>, AwsError> {
    const ACTION: &str = "DescribeVolumes";
    let garbage = |problem: String| AwsError::garbage("ec2", ACTION, problem);
    let document = roxmltree::Document::parse(xml).map_err(|e| garbage(e.to_string()))?;
    let Some(set) = document.descendants().find(|n| n.has_tag_name("volumeSet")) else {
        return Err(garbage("no volumeSet".into()));
    };
    set.children()
        .filter(|n| n.has_tag_name("item"))
        .map(|item| {
            let field = |name: &str| item.children().find(|n| n.has_tag_name(name)).and_then(|n| n.text());
            match (field("volumeId"), field("availabilityZone")) {
                (Some(id), Some(zone)) => Ok(Volume {
                    id: id.to_owned(),
                    availability_zone: zone.to_owned(),
                }),
                _ => Err(garbage("a volume without volumeId or availabilityZone".into())),
            }
        })
        .collect()
}

/// The instance's `PrivateDnsName`.
pub async fn private_dns_name(
    client: &AwsClient,
    instance_id: &str,
    credentials: &AwsCredentials,
    deadline: Instant,
) -> Result<Option<String>, AwsError> {
    const ACTION: &str = "DescribeInstances";
    let xml = client
        .query(
            EC2,
            ACTION,
            VERSION,
            &[("InstanceId.1", instance_id)],
            credentials,
            deadline,
        )
        .await?;
    let document = roxmltree::Document::parse(&xml).map_err(|e| AwsError::garbage("ec2", ACTION, e.to_string()))?;
    Ok(document
        .descendants()
        .find(|n| n.has_tag_name("privateDnsName"))
        .and_then(|n| n.text())
        .map(str::to_owned)
        .filter(|name| !name.is_empty()))
}
