//! Where an AWS service lives: partitions, regional, FIPS and dual-stack
//! endpoints, and the `AWS_ENDPOINT_URL` variables that override them (how
//! tests reach moto and how private endpoints are configured).

use url::Url;

/// An AWS partition: the regions that share a DNS suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    pub name: &'static str,
    pub dns_suffix: &'static str,
    pub dual_stack_suffix: &'static str,
}

const AWS: Partition = Partition {
    name: "aws",
    dns_suffix: "amazonaws.com",
    dual_stack_suffix: "api.aws",
};
const AWS_CN: Partition = Partition {
    name: "aws-cn",
    dns_suffix: "amazonaws.com.cn",
    dual_stack_suffix: "api.amazonwebservices.com.cn",
};
const AWS_US_GOV: Partition = Partition {
    name: "aws-us-gov",
    dns_suffix: "amazonaws.com",
    dual_stack_suffix: "api.aws",
};
const AWS_ISO: Partition = Partition {
    name: "aws-iso",
    dns_suffix: "c2s.ic.gov",
    dual_stack_suffix: "c2s.ic.gov",
};
const AWS_ISO_B: Partition = Partition {
    name: "aws-iso-b",
    dns_suffix: "sc2s.sgov.gov",
    dual_stack_suffix: "sc2s.sgov.gov",
};
const AWS_ISO_E: Partition = Partition {
    name: "aws-iso-e",
    dns_suffix: "cloud.adc-e.uk",
    dual_stack_suffix: "cloud.adc-e.uk",
};
const AWS_ISO_F: Partition = Partition {
    name: "aws-iso-f",
    dns_suffix: "csp.hci.ic.gov",
    dual_stack_suffix: "csp.hci.ic.gov",
};

/// The partition a region belongs to, by its name.
pub fn partition(region: &str) -> Partition {
    if region.starts_with("cn-") {
        AWS_CN
    } else if region.starts_with("us-gov-") {
        AWS_US_GOV
    } else if region.starts_with("us-isob-") {
        AWS_ISO_B
    } else if region.starts_with("us-isof-") {
        AWS_ISO_F
    } else if region.starts_with("us-iso-") {
        AWS_ISO
    } else if region.starts_with("eu-isoe-") {
        AWS_ISO_E
    } else {
        AWS
    }
}

/// Whether `region` has a region's form (`us-east-1`, `us-gov-west-1`): it
/// becomes part of a host name, so nothing else may pass.
pub fn valid_region(region: &str) -> bool {
    region.len() <= 64
        && region.split('-').count() >= 3
        && region.split('-').all(|part| !part.is_empty())
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// One AWS API: the names that make up its endpoint and its signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Service {
    /// SigV4 signing name.
    pub signing_name: &'static str,
    /// Host prefix of the regional endpoint.
    pub endpoint_prefix: &'static str,
    /// Host prefix of the FIPS endpoint.
    pub fips_prefix: &'static str,
    /// Host prefix of the dual-stack endpoint.
    pub dual_stack_prefix: &'static str,
    /// Suffix of `AWS_ENDPOINT_URL_<ID>`.
    pub env_id: &'static str,
    /// The largest answer read from it: more is refused, not buffered.
    pub max_answer: usize,
}

pub const EC2: Service = Service {
    signing_name: "ec2",
    endpoint_prefix: "ec2",
    fips_prefix: "ec2-fips",
    dual_stack_prefix: "ec2",
    env_id: "EC2",
    // Far above an answer about one volume or instance (a few KB), with
    // room for the many volumes or tags a large instance may have.
    max_answer: 4 << 20,
};
pub const ECR: Service = Service {
    signing_name: "ecr",
    endpoint_prefix: "api.ecr",
    fips_prefix: "ecr-fips",
    dual_stack_prefix: "ecr",
    env_id: "ECR",
    // Far above an authorization token answer (a few KB), and above the
    // megabyte of error text a broken server may send (then capped).
    max_answer: 4 << 20,
};
pub const ECR_PUBLIC: Service = Service {
    signing_name: "ecr-public",
    endpoint_prefix: "api.ecr-public",
    fips_prefix: "api.ecr-public",
    dual_stack_prefix: "ecr-public",
    env_id: "ECR_PUBLIC",
    max_answer: 4 << 20,
};
pub const STS: Service = Service {
    signing_name: "sts",
    endpoint_prefix: "sts",
    fips_prefix: "sts-fips",
    dual_stack_prefix: "sts",
    env_id: "STS",
    // Far above a credentials answer (a few KB).
    max_answer: 1 << 20,
};

/// How to reach endpoints; from the environment by [`AwsConfig`](super::AwsConfig).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointOptions {
    pub fips: bool,
    pub dual_stack: bool,
    /// `AWS_ENDPOINT_URL`: one URL for every service.
    pub global_override: Option<String>,
    /// `AWS_ENDPOINT_URL_<SERVICE>` values, looked up per service.
    pub service_overrides: Vec<(String, String)>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("endpoint {url:?} from {variable} is not a valid URL: {reason}")]
pub struct EndpointError {
    pub variable: String,
    pub url: String,
    pub reason: String,
}

/// The endpoint of `service` in `region`.
pub fn endpoint(service: Service, region: &str, options: &EndpointOptions) -> Result<Url, EndpointError> {
    let service_variable = format!("AWS_ENDPOINT_URL_{}", service.env_id);
    let chosen = options
        .service_overrides
        .iter()
        .find(|(id, _)| id == service.env_id)
        .map(|(_, url)| (service_variable.as_str(), url.clone()))
        .or_else(|| options.global_override.clone().map(|url| ("AWS_ENDPOINT_URL", url)));
    if let Some((variable, url)) = chosen {
        return Url::parse(&url).map_err(|e| EndpointError {
            variable: variable.to_owned(),
            url,
            reason: e.to_string(),
        });
    }
    let partition = partition(region);
    let host = match (options.fips, options.dual_stack) {
        (false, false) => format!("{}.{region}.{}", service.endpoint_prefix, partition.dns_suffix),
        (true, false) => format!("{}.{region}.{}", service.fips_prefix, partition.dns_suffix),
        (false, true) => format!("{}.{region}.{}", service.dual_stack_prefix, partition.dual_stack_suffix),
        (true, true) => format!(
            "{}-fips.{region}.{}",
            service.dual_stack_prefix, partition.dual_stack_suffix
        ),
    };
    Url::parse(&format!("https://{host}/")).map_err(|e| EndpointError {
        variable: "the region".into(),
        url: host,
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(service: Service, region: &str, fips: bool, dual_stack: bool) -> String {
        let options = EndpointOptions {
            fips,
            dual_stack,
            ..EndpointOptions::default()
        };
        endpoint(service, region, &options).unwrap().to_string()
    }

    #[test]
    fn regional_fips_and_dual_stack_endpoints() {
        assert_eq!(
            url(ECR, "eu-west-1", false, false),
            "https://api.ecr.eu-west-1.amazonaws.com/"
        );
        assert_eq!(
            url(ECR, "cn-north-1", false, false),
            "https://api.ecr.cn-north-1.amazonaws.com.cn/"
        );
        assert_eq!(
            url(ECR, "us-gov-west-1", true, false),
            "https://ecr-fips.us-gov-west-1.amazonaws.com/"
        );
        assert_eq!(url(ECR, "eu-west-1", false, true), "https://ecr.eu-west-1.api.aws/");
        assert_eq!(url(EC2, "us-east-1", true, true), "https://ec2-fips.us-east-1.api.aws/");
        assert_eq!(
            url(STS, "ap-south-2", false, false),
            "https://sts.ap-south-2.amazonaws.com/"
        );
        assert_eq!(
            url(EC2, "us-iso-east-1", false, false),
            "https://ec2.us-iso-east-1.c2s.ic.gov/"
        );
    }

    #[test]
    fn overrides_win_service_first() {
        let options = EndpointOptions {
            global_override: Some("http://127.0.0.1:5000".into()),
            service_overrides: vec![("ECR".into(), "http://127.0.0.1:6000".into())],
            ..EndpointOptions::default()
        };
        assert_eq!(
            endpoint(ECR, "eu-west-1", &options).unwrap().as_str(),
            "http://127.0.0.1:6000/"
        );
        assert_eq!(
            endpoint(EC2, "eu-west-1", &options).unwrap().as_str(),
            "http://127.0.0.1:5000/"
        );
        let bad = EndpointOptions {
            global_override: Some("not a url".into()),
            ..EndpointOptions::default()
        };
        assert_eq!(
            endpoint(EC2, "eu-west-1", &bad).unwrap_err().variable,
            "AWS_ENDPOINT_URL"
        );
    }

    #[test]
    fn partitions() {
        assert_eq!(partition("eu-central-1").name, "aws");
        assert_eq!(partition("cn-northwest-1").name, "aws-cn");
        assert_eq!(partition("us-gov-east-1").name, "aws-us-gov");
        assert_eq!(partition("us-isob-east-1").name, "aws-iso-b");
    }
}
