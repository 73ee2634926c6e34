//! Who a pull is made as: the node, or (KEP-4412 workload identity, opted in
//! by a service-account annotation) the pod's federated identity or a Google
//! service account it impersonates.

use std::collections::BTreeMap;

use super::{AuthFlow, GcpBackendError, GcpSettings};

/// The service-account annotation naming the Google service account to
/// impersonate (GKE's workload identity annotation), allowed by default.
pub const DEFAULT_SERVICE_ACCOUNT_ANNOTATION: &str = "iam.gke.io/gcp-service-account";

/// The service-account annotation that opts a service account's pods in to
/// pulling with their own identity (auth-provider-gcp's, PR #1202).
pub const WORKLOAD_IDENTITY_ANNOTATION: &str = "iam.gke.io/enable-wi-image-pull";

/// Who the pull is made as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// The node's default service account (metadata server).
    Node,
    /// The pod's Kubernetes service account, federated by Google STS.
    Federated,
    /// A Google service account, impersonated with the federated token.
    Impersonated { key: String, account: String },
}

/// Who a request pulls as, from its service account's annotations:
///
/// - without `iam.gke.io/enable-wi-image-pull: "true"`: the node (refused
///   with `--require-workload-identity`); an annotation naming a Google
///   service account is not read then;
/// - with it, and a Google service account under an allowed key: that
///   account, if allowed;
/// - with it and no such annotation: the pod's own federated identity.
pub fn identity(settings: &GcpSettings, annotations: &BTreeMap<String, String>) -> Result<Identity, GcpBackendError> {
    let opt_in = match annotations.get(WORKLOAD_IDENTITY_ANNOTATION).map(|v| v.trim()) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(GcpBackendError::BadOptIn {
                value: cloud_access::logging::clean_text(other, &[], 100),
            });
        }
    };
    if !opt_in {
        if settings.require_workload_identity {
            return Err(GcpBackendError::WorkloadIdentityRequired);
        }
        return Ok(Identity::Node);
    }
    if settings.flow != AuthFlow::Gcr {
        return Err(GcpBackendError::NotInFlow {
            flow: settings.flow.name(),
        });
    }
    if settings.audience.is_none() {
        return Err(GcpBackendError::NotConfigured);
    }
    let named = settings
        .service_account_annotations
        .iter()
        .find_map(|key| annotations.get(key).map(|value| (key, value.trim())));
    let Some((key, account)) = named else {
        return Ok(Identity::Federated);
    };
    check_service_account(account).map_err(|problem| GcpBackendError::BadServiceAccount {
        key: key.clone(),
        value: cloud_access::logging::clean_text(account, &[], 200),
        problem,
    })?;
    if !account_allowed(&settings.allowed_service_accounts, account) {
        return Err(GcpBackendError::AccountNotAllowed {
            key: key.clone(),
            account: account.to_owned(),
        });
    }
    Ok(Identity::Impersonated {
        key: key.clone(),
        account: account.to_owned(),
    })
}

/// A Google service account's e-mail address: `NAME@DOMAIN` where DOMAIN
/// ends in `gserviceaccount.com` (`PROJECT.iam.`, `developer.`,
/// `appspot.`), of the characters such addresses are made of.
pub fn check_service_account(value: &str) -> Result<(), &'static str> {
    let (name, domain) = value.split_once('@').ok_or("no '@'")?;
    let name_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let domain_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.');
    if name.is_empty() || name.len() > 100 || !name.chars().all(name_ok) {
        return Err("the part before '@' is not a service account's name");
    }
    if !domain.chars().all(domain_ok) || !(domain == "gserviceaccount.com" || domain.ends_with(".gserviceaccount.com"))
    {
        return Err("the domain is not *.gserviceaccount.com");
    }
    Ok(())
}

/// Whether `allowed` (exact addresses, or `*@DOMAIN` for every account of a
/// domain; empty: any) admits `account`. Addresses compare without case.
pub fn account_allowed(allowed: &[String], account: &str) -> bool {
    allowed.is_empty()
        || allowed.iter().any(|entry| match entry.strip_prefix("*@") {
            Some(domain) => account
                .rsplit_once('@')
                .is_some_and(|(_, d)| d.eq_ignore_ascii_case(domain)),
            None => entry.eq_ignore_ascii_case(account),
        })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use cloud_access::SecureEndpoint;
    use url::Url;

    use super::*;

    fn settings() -> GcpSettings {
        let endpoint = |url| SecureEndpoint::parse("test", url).unwrap();
        GcpSettings {
            flow: AuthFlow::Gcr,
            metadata_base: Url::parse("http://127.0.0.1:9/").unwrap(),
            audience: Some("identitynamespace:p.svc.id.goog:https://idp".into()),
            service_account_annotations: vec![DEFAULT_SERVICE_ACCOUNT_ANNOTATION.into()],
            allowed_service_accounts: Vec::new(),
            require_workload_identity: false,
            sts_endpoint: endpoint("http://127.0.0.1:9/"),
            iam_credentials_endpoint: endpoint("http://127.0.0.1:9/"),
            cache_duration: None,
            expiry_margin: Duration::from_secs(60),
            timeout: Duration::from_secs(20),
        }
    }

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    const GSA: &str = "builder@p.iam.gserviceaccount.com";

    #[test]
    fn the_opt_in_annotation_decides_between_node_and_workload_identity() {
        let s = settings();
        let gsa = (DEFAULT_SERVICE_ACCOUNT_ANNOTATION, GSA);
        let on = (WORKLOAD_IDENTITY_ANNOTATION, "true");
        assert_eq!(identity(&s, &annotations(&[])).unwrap(), Identity::Node);
        // A Google service account alone does not switch pulls over.
        assert_eq!(identity(&s, &annotations(&[gsa])).unwrap(), Identity::Node);
        assert_eq!(
            identity(&s, &annotations(&[gsa, (WORKLOAD_IDENTITY_ANNOTATION, "false")])).unwrap(),
            Identity::Node
        );
        assert_eq!(identity(&s, &annotations(&[on])).unwrap(), Identity::Federated);
        assert_eq!(
            identity(&s, &annotations(&[on, gsa])).unwrap(),
            Identity::Impersonated {
                key: DEFAULT_SERVICE_ACCOUNT_ANNOTATION.into(),
                account: GSA.into()
            }
        );
        // A key the flag does not allow is not read.
        assert_eq!(
            identity(&s, &annotations(&[on, ("example.com/gcp-service-account", GSA)])).unwrap(),
            Identity::Federated
        );
        let err = identity(&s, &annotations(&[(WORKLOAD_IDENTITY_ANNOTATION, "yes\n")])).unwrap_err();
        assert!(matches!(err, GcpBackendError::BadOptIn { .. }), "{err}");
        assert!(!err.to_string().contains('\n'));
    }

    #[test]
    fn workload_identity_needs_its_configuration_and_the_gcr_flow() {
        let on = annotations(&[(WORKLOAD_IDENTITY_ANNOTATION, "true")]);
        let mut s = settings();
        s.audience = None;
        assert!(matches!(identity(&s, &on), Err(GcpBackendError::NotConfigured)));
        let mut s = settings();
        s.flow = AuthFlow::DockercfgUrl;
        assert!(matches!(identity(&s, &on), Err(GcpBackendError::NotInFlow { .. })));
        let mut s = settings();
        s.require_workload_identity = true;
        assert!(matches!(
            identity(&s, &annotations(&[])),
            Err(GcpBackendError::WorkloadIdentityRequired)
        ));
        assert_eq!(identity(&s, &on).unwrap(), Identity::Federated);
    }

    #[test]
    fn impersonated_accounts_are_checked_and_allow_listed() {
        let on = (WORKLOAD_IDENTITY_ANNOTATION, "true");
        let mut s = settings();
        s.allowed_service_accounts = vec![
            "*@p.iam.gserviceaccount.com".into(),
            "ci@other.iam.gserviceaccount.com".into(),
        ];
        let with = |account: &str| identity(&s, &annotations(&[on, (DEFAULT_SERVICE_ACCOUNT_ANNOTATION, account)]));
        assert!(with(GSA).is_ok());
        assert!(with("CI@other.iam.gserviceaccount.com").is_ok());
        assert!(matches!(
            with("app@q.iam.gserviceaccount.com"),
            Err(GcpBackendError::AccountNotAllowed { .. })
        ));
        for bad in [
            "",
            "builder",
            "a@b@p.iam.gserviceaccount.com",
            "x@evil.example.com",
            "a/b@p.iam.gserviceaccount.com",
            "a@p.iam.gserviceaccount.com/x",
        ] {
            assert!(
                matches!(with(bad), Err(GcpBackendError::BadServiceAccount { .. })),
                "{bad:?}"
            );
        }
        assert!(check_service_account("123-compute@developer.gserviceaccount.com").is_ok());
        assert!(account_allowed(&[], "anyone@x.gserviceaccount.com"));
    }
}
