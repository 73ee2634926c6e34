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
    let names = numbered("VolumeId", volume_ids.len());
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

/// The Query protocol's list parameters: `PREFIX.1` to `PREFIX.count`.
fn numbered(prefix: &str, count: usize) -> Vec<String> {
    (1..=count).map(|i| format!("{prefix}.{i}")).collect()
}

/// Most volume IDs one [`describe_volumes_filtered`] call names (EC2 takes
/// up to 200 values per filter).
pub const MAX_FILTER_VALUES: usize = 200;
/// Most pages one [`describe_volumes_filtered`] call reads: 200 IDs at the
/// page size of 500 fit in one; more is an answer that does not end.
const MAX_FILTER_PAGES: usize = 4;

/// The zones of those of `volume_ids` that exist (at most
/// [`MAX_FILTER_VALUES`]), in one call: a `volume-id` filter, which, unlike
/// `VolumeId.N`, answers the volumes it finds instead of failing the whole
/// call with `InvalidVolume.NotFound` for one it does not. Pages are
/// followed (`NextToken`) up to a bound.
pub async fn describe_volumes_filtered(
    client: &AwsClient,
    volume_ids: &[&str],
    credentials: &AwsCredentials,
    deadline: Instant,
) -> Result<Vec<Volume>, AwsError> {
    const ACTION: &str = "DescribeVolumes";
    let volume_ids = &volume_ids[..volume_ids.len().min(MAX_FILTER_VALUES)];
    let names = numbered("Filter.1.Value", volume_ids.len());
    let mut volumes = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..MAX_FILTER_PAGES {
        let mut params: Vec<(&str, &str)> = vec![("Filter.1.Name", "volume-id"), ("MaxResults", "500")];
        params.extend(names.iter().map(String::as_str).zip(volume_ids.iter().copied()));
        if let Some(token) = &token {
            params.push(("NextToken", token));
        }
        let xml = client
            .query(EC2, ACTION, VERSION, &params, credentials, deadline)
            .await?;
        let (page, next) = parse_volume_page(&xml)?;
        volumes.extend(page);
        token = next;
        if token.is_none() {
            return Ok(volumes);
        }
    }
    Err(AwsError::garbage(
        "ec2",
        ACTION,
        format!("more than {MAX_FILTER_PAGES} pages for {} volume IDs", volume_ids.len()),
    ))
}

/// The volumes of a `DescribeVolumes` answer (its `volumeSet`), each with its
/// ID and zone. Public for the fuzz targets (fuzz/).
pub fn parse_describe_volumes(xml: &str) -> Result<Vec<Volume>, AwsError> {
    parse_volume_page(xml).map(|(volumes, _)| volumes)
}

/// The volumes of one page of a `DescribeVolumes` answer and its
/// `nextToken` (absent or empty: the last page).
fn parse_volume_page(xml: &str) -> Result<(Vec<Volume>, Option<String>), AwsError> {
    const ACTION: &str = "DescribeVolumes";
    let garbage = |problem: String| AwsError::garbage("ec2", ACTION, problem);
    let document = roxmltree::Document::parse(xml).map_err(|e| garbage(e.to_string()))?;
    let Some(set) = document.descendants().find(|n| n.has_tag_name("volumeSet")) else {
        return Err(garbage("no volumeSet".into()));
    };
    let token = document
        .root_element()
        .children()
        .find(|n| n.has_tag_name("nextToken"))
        .and_then(|n| n.text())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned);
    let volumes = set
        .children()
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
        .collect::<Result<Vec<_>, _>>()?;
    Ok((volumes, token))
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

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "<DescribeVolumesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\
        <requestId>r</requestId><volumeSet><item><volumeId>vol-1</volumeId>\
        <availabilityZone>us-east-1a</availabilityZone><attachmentSet><item><volumeId>vol-1</volumeId>\
        </item></attachmentSet></item></volumeSet><nextToken>TOKEN</nextToken></DescribeVolumesResponse>";

    #[test]
    fn a_page_gives_its_volumes_and_the_next_token() {
        let (volumes, token) = parse_volume_page(PAGE).expect("a page");
        assert_eq!(
            volumes,
            [Volume {
                id: "vol-1".into(),
                availability_zone: "us-east-1a".into()
            }]
        );
        assert_eq!(token.as_deref(), Some("TOKEN"));
        let last = PAGE.replace("<nextToken>TOKEN</nextToken>", "<nextToken/>");
        assert_eq!(parse_volume_page(&last).expect("the last page").1, None);
        let none = PAGE.replace("<nextToken>TOKEN</nextToken>", "");
        assert_eq!(parse_volume_page(&none).expect("one page").1, None);
    }
}
