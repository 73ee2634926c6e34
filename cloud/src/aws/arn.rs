//! IAM role ARNs, checked against IAM's rules before one is sent to STS or
//! shown in a message: a value from an annotation is untrusted text.

/// IAM's limit on a role name.
const MAX_NAME: usize = 64;
/// IAM's limit on a path, slashes included.
const MAX_PATH: usize = 512;

/// How a role ARN is written, for messages that refuse one.
pub const ROLE_ARN_FORM: &str =
    "arn:PARTITION:iam::ACCOUNT:role/NAME (a name of letters, digits and +=,.@_-, optionally after a /PATH/)";

/// The account of `arn:PARTITION:iam::ACCOUNT:role/[PATH/]NAME`, or `None`
/// when `text` is not a role ARN. Follows IAM's rules: a partition of `aws`
/// or `aws-…`, a 12-digit account, a name of 1 to 64 characters of
/// `[A-Za-z0-9+=,.@_-]`, and path segments of printable ASCII other than `/`.
pub fn role_account(text: &str) -> Option<&str> {
    let mut parts = text.splitn(6, ':');
    let (scheme, partition, service, region, account, resource) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    let partition_ok = partition == "aws"
        || partition.strip_prefix("aws-").is_some_and(|rest| {
            !rest.is_empty()
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        });
    let account_ok = account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit());
    let valid = scheme == "arn"
        && partition_ok
        && service == "iam"
        && region.is_empty()
        && account_ok
        && resource.strip_prefix("role/").is_some_and(valid_path_and_name);
    valid.then_some(account)
}

fn valid_path_and_name(path_and_name: &str) -> bool {
    let (path, name) = match path_and_name.rsplit_once('/') {
        Some((path, name)) => (Some(path), name),
        None => (None, path_and_name),
    };
    let name_ok = (1..=MAX_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b));
    // The path as IAM writes it is "/" + segments joined by "/" + "/".
    let path_ok = path.is_none_or(|path| {
        path.len() + 2 <= MAX_PATH
            && path
                .split('/')
                .all(|segment| !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_graphic()))
    });
    name_ok && path_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_arns_by_iams_rules() {
        for (arn, account) in [
            ("arn:aws:iam::123456789012:role/puller", "123456789012"),
            ("arn:aws-cn:iam::123456789012:role/path/puller", "123456789012"),
            (
                "arn:aws-us-gov:iam::210987654321:role/a/b/c/ecr+pull=1,x.y@z_w-v",
                "210987654321",
            ),
            (
                "arn:aws-iso-b:iam::123456789012:role/service-role/puller",
                "123456789012",
            ),
        ] {
            assert_eq!(role_account(arn), Some(account), "{arn}");
        }
        let long_name = format!("arn:aws:iam::123456789012:role/{}", "n".repeat(65));
        let long_path = format!("arn:aws:iam::123456789012:role/{}/n", "p".repeat(511));
        for bad in [
            "arn:aws:iam::123:role/puller",
            "arn:aws:s3:::bucket",
            "arn:aws:iam::123456789012:user/alice",
            "arn:aws:iam::123456789012:role/",
            "arn:aws:iam::123456789012:role/path/",
            "arn:aws:iam::123456789012:role//puller",
            "arn:aws:iam::123456789012:role/puller\nE1130 forged",
            "arn:aws:iam::123456789012:role/pull er",
            "arn:aws:iam::123456789012:role/\u{1b}[31m",
            "arn:aws:iam::123456789012:role/puller:x",
            "arn:aws:iam::123456789012:role/pa th/puller",
            "arn:aws:iam:us-east-1:123456789012:role/puller",
            "arn:evil:iam::123456789012:role/puller",
            "arn:aws-:iam::123456789012:role/puller",
            "arn:AWS:iam::123456789012:role/puller",
            "puller",
            &long_name,
            &long_path,
        ] {
            assert_eq!(role_account(bad), None, "{bad:?}");
        }
    }
}
