//! `cloud.conf` and `clouds.yaml` as operators write them, and the errors that name
//! the file, the field and the fix.

use secrecy::ExposeSecret;

use super::*;

const CONF: &str = "/etc/kubernetes/cloud.conf";

fn conf(text: &str) -> Result<OpenStackConfig, OpenStackConfigError> {
    OpenStackConfig::parse_cloud_conf(Path::new(CONF), text, false)
}

fn error(text: &str) -> String {
    conf(text).expect_err("refused").to_string()
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/openstack")
        .join(name)
}

#[test]
fn an_application_credential_by_id() {
    let config = OpenStackConfig::read_cloud_conf(&data("cloud.conf"), false).expect("read");
    assert_eq!(config.auth_url.as_str(), "http://127.0.0.1:1/identity/v3");
    assert_eq!(config.region, "RegionOne");
    assert_eq!(config.interface, Interface::Public);
    assert!(!config.ignore_volume_az);
    let Credential::ApplicationCredential { id, name, user, secret } = &config.credential else {
        panic!("{:?}", config.credential);
    };
    assert_eq!(id.as_deref(), Some("7d3c5f0e8a1b4c2d9e6f0a1b2c3d4e5f"));
    assert_eq!((name, user), (&None, &None));
    assert_eq!(secret.expose_secret(), "appcred-secret-Zq8x-do-not-log");
    let shown = format!("{config:?}");
    assert!(!shown.contains("appcred-secret"), "{shown}");
}

#[test]
fn a_password_with_a_project_by_name() {
    let config = OpenStackConfig::read_cloud_conf(&data("password.conf"), false).expect("read");
    assert_eq!(config.interface, Interface::Internal);
    let Credential::Password { user, password, scope } = &config.credential else {
        panic!("{:?}", config.credential);
    };
    assert_eq!(
        user,
        &Named::Name {
            name: "cinder-reader".into(),
            domain: Domain::Name("Default".into())
        }
    );
    assert_eq!(password.expose_secret(), "password-Xy7-do-not-log");
    assert_eq!(
        scope,
        &Scope::Project(Named::Name {
            name: "demo".into(),
            domain: Domain::Name("Default".into())
        })
    );
    assert!(!format!("{config:?}").contains("password-Xy7"));
}

#[test]
fn ignore_volume_az_and_trusts() {
    let config = conf(
        "[Global]\nauth-url=https://k.example/v3\nregion=r1\nuser-id=u1\npassword=p\ntrust-id=t1\n[BlockStorage]\nignore-volume-az = true\n",
    )
    .expect("read");
    assert!(config.ignore_volume_az);
    assert!(matches!(
        &config.credential,
        Credential::Password { user: Named::Id(u), scope: Scope::Trust(t), .. } if u == "u1" && t == "t1"
    ));
    let bad = error(
        "[Global]\nauth-url=https://k/v3\nregion=r\nuser-id=u\npassword=p\ntenant-id=t\n[BlockStorage]\nignore-volume-az = maybe\n",
    );
    assert!(
        bad.starts_with(&format!("{CONF}: [BlockStorage] ignore-volume-az: ")),
        "{bad}"
    );
}

#[test]
fn missing_and_wrong_fields_name_the_field_and_the_fix() {
    let global = "[Global]\nauth-url = https://keystone.example/v3\nregion = RegionOne\n";
    for (text, expected) in [
        (
            "[Global]\nregion = r\n",
            "[Global] auth-url: not set: Keystone's URL is needed",
        ),
        (
            "[Global]\nauth-url = http://keystone.example/v3\nregion = r\n",
            "[Global] auth-url: the URL \"http://keystone.example/v3\" uses http",
        ),
        ("[Global]\nauth-url = https://k/v3\n", "[Global] region: not set"),
        (
            "[Global]\nauth-url = https://k/v3\nregion = Region One\n",
            "[Global] region: \"Region One\" cannot be a label value",
        ),
        (
            &format!("{global}application-credential-id = x\n"),
            "[Global] application-credential-secret: not set",
        ),
        (
            &format!("{global}application-credential-name = x\napplication-credential-secret = s\n"),
            "[Global] username: not set: an application credential given by name needs its user",
        ),
        (
            global,
            "[Global] password: no credential: set application-credential-id",
        ),
        (
            &format!("{global}username = u\npassword = p\ntenant-id = t\n"),
            "[Global] user-domain-name: not set",
        ),
        (
            &format!("{global}user-id = u\npassword = p\n"),
            "[Global] tenant-id: not set",
        ),
        (
            &format!("{global}user-id = u\npassword = p\ntenant-name = t\n"),
            "[Global] tenant-domain-name: not set",
        ),
        (
            &format!("{global}user-id = u\npassword = p\ntenant-id = t\nos-endpoint-type = private\n"),
            "[Global] os-endpoint-type: \"private\" is not public, internal or admin",
        ),
        (
            &format!("{global}user-id = u\npassword = p\ntenant-id = t\ncert-file = /c.pem\n"),
            "[Global] cert-file: client certificates are not supported",
        ),
        (
            &format!("{global}user-id = u\npassword = p\ntenant-id = t\nca-file = /nonexistent/ca.pem\n"),
            "[Global] ca-file: ",
        ),
        (
            &format!("{global}user-id = u\npassword = p\ntenant-id = t\nuse-clouds = true\n"),
            "[Global] clouds-file: not set, but use-clouds is",
        ),
    ] {
        let shown = error(text);
        assert!(shown.starts_with(&format!("{CONF}: {expected}")), "{text}\n=> {shown}");
    }
    assert!(error("[Global\n").starts_with(&format!("{CONF}: not a gcfg (INI-like) file: line 1: ")));
    assert!(error("[BlockStorage]\n").contains("no [Global] section"));
}

#[test]
fn tls_insecure_only_when_the_caller_allows_it() {
    let text = "[Global]\nauth-url=https://k/v3\nregion=r\nuser-id=u\npassword=hunter2-password\ntenant-id=t\ntls-insecure=true\n";
    let shown = error(text);
    assert!(
        shown.starts_with(&format!("{CONF}: [Global] tls-insecure: ")),
        "{shown}"
    );
    assert!(
        shown.contains("turns off the checking") && shown.contains("ca-file"),
        "{shown}"
    );
    assert!(!shown.contains("hunter2"), "{shown}");
    let config = OpenStackConfig::parse_cloud_conf(Path::new(CONF), text, true).expect("allowed");
    assert!(config.insecure);
}

#[test]
fn a_ca_file_is_read_when_the_config_is() {
    let dir = tempfile::tempdir().expect("a directory");
    let empty = dir.path().join("ca.pem");
    std::fs::write(&empty, "not a certificate\n").expect("written");
    let text = format!(
        "[Global]\nauth-url=https://k/v3\nregion=r\nuser-id=u\npassword=p\ntenant-id=t\nca-file={}\n",
        empty.display()
    );
    let shown = error(&text);
    assert!(
        shown.contains("[Global] ca-file: ") && shown.contains("no certificate in it"),
        "{shown}"
    );
}

#[test]
fn clouds_yaml_entries() {
    let path = data("clouds.yaml");
    let config = OpenStackConfig::read_clouds_yaml(&path, "appcred", false).expect("read");
    assert_eq!(config.region, "RegionOne");
    assert!(
        matches!(&config.credential, Credential::ApplicationCredential { id: Some(id), .. } if id == "7d3c5f0e8a1b4c2d9e6f0a1b2c3d4e5f")
    );
    let config = OpenStackConfig::read_clouds_yaml(&path, "password", false).expect("read");
    assert_eq!(
        (config.region.as_str(), config.interface),
        ("RegionTwo", Interface::Internal)
    );
    assert!(matches!(
        &config.credential,
        Credential::Password { scope: Scope::Project(Named::Id(p)), .. } if p == "0123456789abcdef0123456789abcdef"
    ));
    let shown = OpenStackConfig::read_clouds_yaml(&path, "other", false)
        .expect_err("no such cloud")
        .to_string();
    assert!(
        shown.ends_with("clouds.other: no such cloud; the file has: appcred, password"),
        "{shown}"
    );
    let yaml = "clouds:\n  c:\n    auth:\n      auth_url: https://k/v3\n      application_credential_id: a\n      application_credential_secret: s\n    region_name: r\n    verify: false\n";
    let shown = OpenStackConfig::parse_clouds_yaml(Path::new("clouds.yaml"), yaml, "c", false)
        .expect_err("insecure")
        .to_string();
    assert!(shown.starts_with("clouds.yaml: clouds.c.verify: turns off"), "{shown}");
    let yaml = "clouds:\n  c:\n    auth:\n      application_credential_id: a\n    region_name: r\n";
    let shown = OpenStackConfig::parse_clouds_yaml(Path::new("clouds.yaml"), yaml, "c", false)
        .expect_err("no auth_url")
        .to_string();
    assert!(
        shown.starts_with("clouds.yaml: clouds.c.auth.auth_url: not set"),
        "{shown}"
    );
}

#[test]
fn use_clouds_fills_what_cloud_conf_leaves_empty() {
    let text = format!(
        "[Global]\nuse-clouds = true\nclouds-file = {}\ncloud = password\nregion = RegionOne\n",
        data("clouds.yaml").display()
    );
    let config = conf(&text).expect("read");
    // cloud.conf's region wins; the rest comes from the entry.
    assert_eq!(config.region, "RegionOne");
    assert_eq!(config.auth_url.as_str(), "http://127.0.0.1:1/identity");
    assert!(matches!(&config.credential, Credential::Password { .. }));
}

#[test]
fn a_missing_file_is_named() {
    let shown = OpenStackConfig::read_cloud_conf(Path::new("/nonexistent/cloud.conf"), false)
        .expect_err("no file")
        .to_string();
    assert!(
        shown.starts_with("cannot read the OpenStack config: ") && shown.contains("/nonexistent/cloud.conf"),
        "{shown}"
    );
    let shown = OpenStackConfig::read_clouds_yaml(Path::new("/nonexistent/clouds.yaml"), "c", false)
        .expect_err("no file")
        .to_string();
    assert!(shown.contains("/nonexistent/clouds.yaml"), "{shown}");
}
