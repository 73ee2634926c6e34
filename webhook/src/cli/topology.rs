//! Where topology comes from: rules files, the lookup settings every cloud shares, and
//! one flattened group per cloud lookup.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use suite_program::duration;

/// Where cloud-provider-azure's config is on a node, and so `--azure-config`'s default.
pub const DEFAULT_AZURE_CONFIG: &str = "/etc/kubernetes/azure.json";
/// Where the OpenStack cloud provider's and Cinder CSI driver's manifests mount
/// `cloud.conf`, and so `--openstack-cloud-config`'s default.
pub const DEFAULT_OPENSTACK_CLOUD_CONFIG: &str = "/etc/config/cloud.conf";
/// The system-wide `clouds.yaml` of OpenStack's clients, `--openstack-clouds-file`'s default.
pub const DEFAULT_OPENSTACK_CLOUDS_FILE: &str = "/etc/openstack/clouds.yaml";

/// Where the vSphere CSI driver's manifests mount its config Secret, and so
/// `--vsphere-config`'s default.
pub const DEFAULT_VSPHERE_CONFIG: &str = "/etc/cloud/csi-vsphere.conf";

/// Where topology comes from.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Topology sources")]
pub struct TopologyArgs {
    /// Rules file (YAML) giving the topology of volumes the built-in parsers do not know;
    /// repeat for several files, whose rules are tried in order (comma-separated in the
    /// environment variable).
    #[arg(
        long = "rules",
        value_name = "FILE",
        env = "PV_TOPOLOGY_WEBHOOK_RULES",
        value_delimiter = ','
    )]
    pub rules: Vec<PathBuf>,
    /// Deadline of one cloud lookup, e.g. `2s` or `500ms`; keep it below the webhook's
    /// timeoutSeconds.
    #[arg(
        long,
        value_name = "DURATION",
        env = "PV_TOPOLOGY_WEBHOOK_LOOKUP_TIMEOUT",
        default_value = "2s",
        value_parser = duration::positive
    )]
    pub lookup_timeout: Duration,
    /// Most volumes whose looked-up topology is kept (a volume never changes zone).
    #[arg(
        long,
        value_name = "COUNT",
        env = "PV_TOPOLOGY_WEBHOOK_LOOKUP_CACHE_SIZE",
        default_value = "10000"
    )]
    pub lookup_cache_size: std::num::NonZeroUsize,
    /// How long a looked-up topology is kept.
    #[arg(
        long,
        value_name = "DURATION",
        env = "PV_TOPOLOGY_WEBHOOK_LOOKUP_CACHE_TTL",
        default_value = "12h",
        value_parser = duration::positive
    )]
    pub lookup_cache_ttl: Duration,
    #[command(flatten)]
    pub aws: AwsArgs,
    #[command(flatten)]
    pub gce: GceArgs,
    #[command(flatten)]
    pub azure: AzureArgs,
    #[command(flatten)]
    pub openstack: OpenStackArgs,
    #[command(flatten)]
    pub vsphere: VsphereArgs,
}

/// The EBS lookup.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "AWS EBS lookup")]
pub struct AwsArgs {
    /// Look up EBS volumes (in-tree awsElasticBlockStore IDs without a zone, and
    /// ebs.csi.aws.com handles) with EC2 DescribeVolumes. Credentials come from the
    /// standard AWS chain (IRSA, Pod Identity, instance role, environment).
    #[arg(long, env = "PV_TOPOLOGY_WEBHOOK_AWS_EBS_LOOKUP", value_parser = suite_program::boolish)]
    pub aws_ebs_lookup: bool,
    /// The cluster's AWS region, for --aws-ebs-lookup (default: $AWS_REGION, then
    /// $AWS_DEFAULT_REGION).
    #[arg(long, value_name = "REGION", env = "PV_TOPOLOGY_WEBHOOK_AWS_REGION")]
    pub aws_region: Option<String>,
}

/// The GCE persistent disk lookup.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "GCE lookup")]
pub struct GceArgs {
    /// Look up GCE persistent disks whose zones the volume does not name (in-tree
    /// gcePersistentDisk, pd.csi.storage.gke.io handles with an UNSPECIFIED zone, and
    /// regional disks' replica zones) with Compute Engine disks.get and regionDisks.get.
    /// The token is the metadata server's (the node's service account, or GKE Workload
    /// Identity's).
    #[arg(long, env = "PV_TOPOLOGY_WEBHOOK_GCE_LOOKUP", value_parser = suite_program::boolish)]
    pub gce_lookup: bool,
    /// The project disks are looked up in, for --gce-lookup, unless a CSI handle names its
    /// own (default: the metadata server's project/project-id).
    #[arg(long, value_name = "PROJECT", env = "PV_TOPOLOGY_WEBHOOK_GCE_PROJECT")]
    pub gce_project: Option<String>,
    /// The region a disk whose zone is unknown is looked for in, as a regional disk and in
    /// its zones, for --gce-lookup (default: the region of --gce-zones, else of the
    /// metadata server's instance/zone).
    #[arg(long, value_name = "REGION", env = "PV_TOPOLOGY_WEBHOOK_GCE_REGION")]
    pub gce_region: Option<String>,
    /// The zones a disk whose zone is unknown is looked for in, for --gce-lookup;
    /// repeatable or comma-separated, all in one region (default: every zone of the
    /// region, from Compute regions.get).
    #[arg(
        long,
        value_name = "ZONE",
        env = "PV_TOPOLOGY_WEBHOOK_GCE_ZONES",
        value_delimiter = ','
    )]
    pub gce_zones: Vec<String>,
    /// Base URL of the Compute Engine API, for --gce-lookup (a private endpoint, tests):
    /// https, or plain http on loopback only (default:
    /// https://compute.googleapis.com/compute/v1/).
    #[arg(long, value_name = "URL", env = "PV_TOPOLOGY_WEBHOOK_GCE_COMPUTE_ENDPOINT")]
    pub gce_compute_endpoint: Option<String>,
}

/// The Azure managed disk lookup.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Azure disk lookup")]
pub struct AzureArgs {
    /// Look up Azure managed disks (in-tree azureDisk diskURI and disk.csi.azure.com
    /// handles) with Azure Resource Manager Disks.Get. Credentials come from the cloud
    /// config (--azure-config): workload identity (with the pod's AZURE_* variables),
    /// managed identity, or a client secret.
    #[arg(long, env = "PV_TOPOLOGY_WEBHOOK_AZURE_DISK_LOOKUP", value_parser = suite_program::boolish)]
    pub azure_disk_lookup: bool,
    /// The Azure cloud config (azure.json, JSON or YAML, as cloud-provider-azure reads
    /// it), for --azure-disk-lookup: the cloud and the credentials. Read at start-up.
    #[arg(
        long,
        value_name = "FILE",
        env = "PV_TOPOLOGY_WEBHOOK_AZURE_CONFIG",
        default_value = DEFAULT_AZURE_CONFIG
    )]
    pub azure_config: PathBuf,
    /// Azure Resource Manager's base URL, for --azure-disk-lookup, instead of the
    /// cloud's (a private endpoint, tests): https, or plain http on loopback only.
    #[arg(long, value_name = "URL", env = "PV_TOPOLOGY_WEBHOOK_AZURE_ARM_ENDPOINT")]
    pub azure_arm_endpoint: Option<String>,
    /// Entra ID's authority host, for --azure-disk-lookup with a client secret or
    /// workload identity, instead of the cloud's: https, or plain http on loopback only.
    #[arg(long, value_name = "URL", env = "PV_TOPOLOGY_WEBHOOK_AZURE_AUTHORITY_ENDPOINT")]
    pub azure_authority_endpoint: Option<String>,
    /// The instance metadata service (IMDS), for --azure-disk-lookup with a managed
    /// identity, instead of http://169.254.169.254/ (a node-local proxy, tests): https,
    /// or plain http on loopback only.
    #[arg(long, value_name = "URL", env = "PV_TOPOLOGY_WEBHOOK_AZURE_IMDS_ENDPOINT")]
    pub azure_imds_endpoint: Option<String>,
}

/// The Cinder volume lookup.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "OpenStack Cinder lookup")]
pub struct OpenStackArgs {
    /// Look up OpenStack Cinder volumes (in-tree cinder volumeID and
    /// cinder.csi.openstack.org handles) with Cinder's volume API: the zone is the
    /// volume's availability zone, the region the config's. Credentials come from
    /// --openstack-cloud-config (application credential or password), or from
    /// --openstack-clouds-file when --os-cloud is set.
    #[arg(long, env = "PV_TOPOLOGY_WEBHOOK_OPENSTACK_CINDER_LOOKUP", value_parser = suite_program::boolish)]
    pub openstack_cinder_lookup: bool,
    /// The OpenStack cloud provider's cloud.conf ([Global] auth-url, region, credentials;
    /// [BlockStorage] ignore-volume-az), for --openstack-cinder-lookup. Read at start-up.
    #[arg(
        long,
        value_name = "FILE",
        env = "PV_TOPOLOGY_WEBHOOK_OPENSTACK_CLOUD_CONFIG",
        default_value = DEFAULT_OPENSTACK_CLOUD_CONFIG
    )]
    pub openstack_cloud_config: PathBuf,
    /// Read the credentials of this cloud from --openstack-clouds-file instead of
    /// --openstack-cloud-config, for --openstack-cinder-lookup.
    #[arg(long, value_name = "NAME", env = "PV_TOPOLOGY_WEBHOOK_OS_CLOUD")]
    pub os_cloud: Option<String>,
    /// The clouds.yaml that --os-cloud names a cloud of.
    #[arg(
        long,
        value_name = "FILE",
        env = "PV_TOPOLOGY_WEBHOOK_OPENSTACK_CLOUDS_FILE",
        default_value = DEFAULT_OPENSTACK_CLOUDS_FILE
    )]
    pub openstack_clouds_file: PathBuf,
    /// Allow the config's tls-insecure (clouds.yaml: verify: false), which turns off
    /// the check of Keystone's and Cinder's certificates; refused without this flag.
    #[arg(long, env = "PV_TOPOLOGY_WEBHOOK_OPENSTACK_ALLOW_INSECURE_TLS", value_parser = suite_program::boolish)]
    pub openstack_allow_insecure_tls: bool,
}

/// The vSphere volume lookup.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "vSphere lookup")]
pub struct VsphereArgs {
    /// Look up vSphere volumes (in-tree vsphereVolume paths and csi.vsphere.vmware.com
    /// handles) in vCenter: the zone and region are the tags (of --vsphere-zone-category
    /// and --vsphere-region-category) on the hosts that mount the volume's datastore, or
    /// on their nearest tagged ancestor. Credentials come from --vsphere-config.
    #[arg(long, env = "PV_TOPOLOGY_WEBHOOK_VSPHERE_LOOKUP", value_parser = suite_program::boolish)]
    pub vsphere_lookup: bool,
    /// The vSphere CSI driver's config (csi-vsphere.conf: [Global] or
    /// [VirtualCenter "host"] with user, password, ca-file, port), mounted from its
    /// Secret, for --vsphere-lookup. Read at start-up.
    #[arg(
        long,
        value_name = "FILE",
        env = "PV_TOPOLOGY_WEBHOOK_VSPHERE_CONFIG",
        default_value = DEFAULT_VSPHERE_CONFIG
    )]
    pub vsphere_config: PathBuf,
    /// vCenter's base URL instead of the config's host and port (a proxy, tests): https,
    /// or plain http on loopback only.
    #[arg(long, value_name = "URL", env = "PV_TOPOLOGY_WEBHOOK_VSPHERE_ENDPOINT")]
    pub vsphere_endpoint: Option<String>,
    /// The tag category whose tags name zones, for --vsphere-lookup.
    #[arg(
        long,
        value_name = "CATEGORY",
        env = "PV_TOPOLOGY_WEBHOOK_VSPHERE_ZONE_CATEGORY",
        default_value = crate::lookup::vsphere::DEFAULT_ZONE_CATEGORY
    )]
    pub vsphere_zone_category: String,
    /// The tag category whose tags name regions, for --vsphere-lookup.
    #[arg(
        long,
        value_name = "CATEGORY",
        env = "PV_TOPOLOGY_WEBHOOK_VSPHERE_REGION_CATEGORY",
        default_value = crate::lookup::vsphere::DEFAULT_REGION_CATEGORY
    )]
    pub vsphere_region_category: String,
    /// Allow the config's insecure-flag, which turns off the check of vCenter's
    /// certificate; refused without this flag.
    #[arg(long, env = "PV_TOPOLOGY_WEBHOOK_VSPHERE_ALLOW_INSECURE_TLS", value_parser = suite_program::boolish)]
    pub vsphere_allow_insecure_tls: bool,
}
