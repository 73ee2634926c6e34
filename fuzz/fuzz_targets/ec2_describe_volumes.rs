//! EC2 `DescribeVolumes` answers (XML) -> `cloud_access::aws::ec2::parse_describe_volumes`.
//!
//! Property: every volume read has a non-empty ID and zone.
#![no_main]

use cloud_access::aws::ec2::parse_describe_volumes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(xml) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(volumes) = parse_describe_volumes(xml) {
        for volume in volumes {
            assert!(
                !volume.id.is_empty() && !volume.availability_zone.is_empty(),
                "{volume:?}"
            );
        }
    }
});
