//! The nodes' RBAC for a config's audiences (KEP-4412). kubelet asks the
//! apiserver for each pod's service-account token for a provider's
//! `tokenAttributes.serviceAccountTokenAudience`; since 1.33
//! kube-apiserver's NodeRestriction (gate ServiceAccountNodeAudienceRestriction,
//! on by default) issues one only for an audience a volume of the pod names,
//! or if the node may `request-serviceaccounts-token-audience` on the
//! resource named by the audience, API group `""`, with the service account's
//! namespace and name (k8s.io/kubernetes v1.37.2,
//! plugin/pkg/admission/noderestriction/admission.go,
//! `validateNodeServiceAccountAudience` and `buildAuthorizerAttributes`). A
//! credential provider's audience is in no pod's volumes: the grant is what
//! lets kubelet get the token at all.
//!
//! [`Grant`] is the ClusterRole and ClusterRoleBinding for every audience of a
//! config; [`access_review`] asks the apiserver the question NodeRestriction
//! asks, and [`AudienceAccess`] reads its answer.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::CredentialProviderConfig;

/// The verb NodeRestriction authorizes a node's token request with.
pub const VERB: &str = "request-serviceaccounts-token-audience";
/// The group of every kubelet's credentials.
pub const NODES_GROUP: &str = "system:nodes";
/// The ClusterRole's and ClusterRoleBinding's name unless `--rbac-name` says.
pub const DEFAULT_NAME: &str = "cloud-credential-provider:token-audience";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The audiences kubelet will request tokens for: each provider's
/// `serviceAccountTokenAudience`, in the config's order, each once.
pub fn audiences(config: &CredentialProviderConfig) -> Vec<String> {
    let mut audiences: Vec<String> = Vec::new();
    for attributes in config.providers.iter().filter_map(|p| p.token_attributes.as_ref()) {
        let audience = &attributes.service_account_token_audience;
        if !audience.is_empty() && !audiences.contains(audience) {
            audiences.push(audience.clone());
        }
    }
    audiences
}

/// What is wrong with `name` as an RBAC object's name (the apiserver's
/// `ValidateRBACName`: a path segment, so not `.` or `..`, no `/` or `%`).
pub fn rbac_name_problem(name: &str) -> Option<&'static str> {
    match name {
        "" => Some("is empty"),
        "." | ".." => Some("may not be '.' or '..'"),
        _ if name.contains(['/', '%']) => Some("may not contain '/' or '%'"),
        _ => None,
    }
}

/// The ClusterRole that allows [`VERB`] on every audience and the
/// ClusterRoleBinding that gives it to the group `group`, both named `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub name: String,
    pub group: String,
    pub audiences: Vec<String>,
}

impl Grant {
    /// The ClusterRole (rbac.authorization.k8s.io/v1).
    pub fn role(&self) -> Value {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": self.name},
            "rules": [{"apiGroups": [""], "resources": self.audiences, "verbs": [VERB]}],
        })
    }

    /// The ClusterRoleBinding of [`Grant::role`] to the group.
    pub fn binding(&self) -> Value {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": self.name},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": self.name},
            "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": self.group}],
        })
    }

    /// The two objects as YAML documents for `kubectl apply -f -`.
    pub fn yaml(&self) -> String {
        let role = serde_yaml_ng::to_string(&self.role()).unwrap_or_default();
        let binding = serde_yaml_ng::to_string(&self.binding()).unwrap_or_default();
        format!("{role}---\n{binding}")
    }

    /// The two objects as one `v1` `List`, which `kubectl apply -f` takes too.
    pub fn json(&self) -> String {
        let list = serde_json::json!({
            "apiVersion": "v1",
            "kind": "List",
            "items": [self.role(), self.binding()],
        });
        format!("{}\n", serde_json::to_string_pretty(&list).unwrap_or_default())
    }
}

/// Who the live check asks about: kubelet's identity on the node `node`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    pub node: String,
    /// The groups of the node's credentials: [`NODES_GROUP`] and
    /// `system:authenticated`, and the `--node-group` when it is another.
    pub groups: Vec<String>,
}

impl NodeIdentity {
    pub fn new(node: &str, group: &str) -> Self {
        let mut groups = vec![NODES_GROUP.to_owned(), "system:authenticated".to_owned()];
        if !groups.iter().any(|g| g == group) {
            groups.push(group.to_owned());
        }
        NodeIdentity {
            node: node.to_owned(),
            groups,
        }
    }

    /// The user name of the node's credentials (the Node authorizer's form).
    pub fn user(&self) -> String {
        format!("system:node:{}", self.node)
    }
}

/// The service account whose pods' tokens the check asks for: `None` for
/// either part means every one (a namespace's RoleBinding then does not
/// count: only a ClusterRoleBinding grants every namespace).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceAccountScope {
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// The SubjectAccessReview (authorization.k8s.io/v1) of NodeRestriction's
/// question: may the node request tokens for `audience` of the service
/// account in `scope`.
pub fn access_review(identity: &NodeIdentity, audience: &str, scope: &ServiceAccountScope) -> Value {
    let mut attributes = json!({"verb": VERB, "group": "", "version": "v1", "resource": audience});
    if let Some(namespace) = &scope.namespace {
        attributes["namespace"] = json!(namespace);
    }
    if let Some(name) = &scope.name {
        attributes["name"] = json!(name);
    }
    json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": identity.user(), "groups": identity.groups, "resourceAttributes": attributes},
    })
}

/// The part of a SubjectAccessReview's answer the check reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ReviewAnswer {
    #[serde(default)]
    pub status: Option<ReviewStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewStatus {
    #[serde(default)]
    pub allowed: bool,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub evaluation_error: Option<String>,
}

/// The apiserver's answer for one audience.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AudienceAccess {
    pub audience: String,
    pub allowed: bool,
    /// The authorizer's reason (RBAC names the binding that allows it).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// An authorizer's evaluation error, which may stand beside either answer.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub evaluation_error: String,
}

impl AudienceAccess {
    /// Read from the review's answer; text from the apiserver is cleaned and
    /// bounded for one line.
    pub fn from_review(audience: &str, answer: &ReviewAnswer) -> Self {
        let status = answer.status.as_ref();
        let text = |s: Option<&String>| cloud_access::logging::clean_text(s.map_or("", String::as_str), &[], 300);
        AudienceAccess {
            audience: audience.to_owned(),
            // `denied` only says no opinion was final; `allowed` is the answer.
            allowed: status.is_some_and(|s| s.allowed),
            reason: text(status.and_then(|s| s.reason.as_ref())),
            evaluation_error: text(status.and_then(|s| s.evaluation_error.as_ref())),
        }
    }
}

/// What the live check found for every audience of a config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AccessReport {
    pub config: String,
    pub user: String,
    pub groups: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    pub audiences: Vec<AudienceAccess>,
    /// The command that prints the missing grant.
    #[serde(skip)]
    pub fix: String,
}

impl AccessReport {
    pub fn missing(&self) -> impl Iterator<Item = &AudienceAccess> {
        self.audiences.iter().filter(|a| !a.allowed)
    }

    /// 0 when every audience is granted, 2 when one is not.
    pub fn exit_code(&self) -> std::process::ExitCode {
        std::process::ExitCode::from(if self.missing().next().is_none() { 0 } else { 2 })
    }

    pub fn render(&self, format: crate::cli::OutputFormat) -> String {
        match format {
            crate::cli::OutputFormat::Json => {
                format!("{}\n", serde_json::to_string_pretty(self).unwrap_or_default())
            }
            crate::cli::OutputFormat::Text => self.text(),
        }
    }

    /// One line per audience, then what to do when one is missing.
    fn text(&self) -> String {
        let scope = match (&self.namespace, &self.service_account) {
            (Some(ns), Some(sa)) => format!("service account {ns}/{sa}"),
            (Some(ns), None) => format!("every service account of namespace {ns}"),
            _ => "every service account".to_owned(),
        };
        let mut out = String::new();
        for access in &self.audiences {
            let mut line = if access.allowed {
                format!(
                    "{}: granted: {} may request tokens for it ({scope})",
                    access.audience, self.user
                )
            } else {
                format!(
                    "{}: MISSING: {} may not request tokens for it ({scope}); NodeRestriction refuses kubelet's TokenRequest (\"{} is not authorized to request tokens for audience {:?}\") and the images this provider serves are pulled without its credentials",
                    access.audience, self.user, self.user, access.audience
                )
            };
            if !access.reason.is_empty() {
                line.push_str(&format!("; the authorizer: {}", access.reason));
            }
            if !access.evaluation_error.is_empty() {
                line.push_str(&format!("; evaluation error: {}", access.evaluation_error));
            }
            out.push_str(&line);
            out.push('\n');
        }
        if self.missing().next().is_some() {
            out.push_str(&format!("fix: {}\n", self.fix));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant() -> Grant {
        Grant {
            name: DEFAULT_NAME.to_owned(),
            group: NODES_GROUP.to_owned(),
            audiences: vec!["sts.amazonaws.com".to_owned(), "api://AzureADTokenExchange".to_owned()],
        }
    }

    #[test]
    fn the_grant_is_a_cluster_role_on_the_audiences_bound_to_the_group() {
        let documents: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&grant().yaml())
            .map(|d| serde::Deserialize::deserialize(d).expect("YAML"))
            .collect();
        assert_eq!(
            documents,
            [
                serde_json::json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": DEFAULT_NAME},
                    "rules": [{"apiGroups": [""], "resources": ["sts.amazonaws.com", "api://AzureADTokenExchange"], "verbs": [VERB]}],
                }),
                serde_json::json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": DEFAULT_NAME},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": DEFAULT_NAME},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": NODES_GROUP}],
                }),
            ]
        );
        let list: serde_json::Value = serde_json::from_str(&grant().json()).expect("JSON");
        assert_eq!(list["kind"], "List");
        assert_eq!(list["items"].as_array().map(Vec::len), Some(2));
        assert_eq!(list["items"][0], documents[0]);
    }

    #[test]
    fn rbac_names_are_path_segments() {
        for bad in ["", ".", "..", "a/b", "50%"] {
            assert!(rbac_name_problem(bad).is_some(), "{bad:?}");
        }
        for good in [DEFAULT_NAME, "system:x", "a.b"] {
            assert_eq!(rbac_name_problem(good), None, "{good:?}");
        }
    }

    #[test]
    fn the_review_asks_what_node_restriction_asks() {
        let identity = NodeIdentity::new("node-a", "pool-gpu");
        let scope = ServiceAccountScope {
            namespace: Some("team".to_owned()),
            name: Some("app".to_owned()),
        };
        let review = access_review(&identity, "sts.amazonaws.com", &scope);
        assert_eq!(review["kind"], "SubjectAccessReview");
        assert_eq!(review["apiVersion"], "authorization.k8s.io/v1");
        assert_eq!(
            review["spec"],
            serde_json::json!({
                "user": "system:node:node-a",
                "groups": ["system:nodes", "system:authenticated", "pool-gpu"],
                "resourceAttributes": {
                    "verb": VERB, "group": "", "version": "v1", "resource": "sts.amazonaws.com",
                    "namespace": "team", "name": "app",
                },
            })
        );
        assert_eq!(NodeIdentity::new("n", NODES_GROUP).groups.len(), 2);
    }

    #[test]
    fn the_report_names_each_missing_audience_and_the_fix() {
        let answer = |allowed: bool, reason: &str| ReviewAnswer {
            status: Some(ReviewStatus {
                allowed,
                reason: Some(reason.to_owned()),
                ..ReviewStatus::default()
            }),
        };
        let report = AccessReport {
            config: "c.yaml".to_owned(),
            user: "system:node:node-a".to_owned(),
            groups: vec![NODES_GROUP.to_owned()],
            namespace: None,
            service_account: None,
            audiences: vec![
                AudienceAccess::from_review("a.example", &answer(true, "RBAC: allowed by ClusterRoleBinding \"x\"")),
                AudienceAccess::from_review("b.example", &answer(false, "\u{1b}[31m")),
                AudienceAccess::from_review("c.example", &ReviewAnswer::default()),
            ],
            fix: "cloud-credential-provider check-config --rbac c.yaml | kubectl apply -f -".to_owned(),
        };
        let text = report.render(crate::cli::OutputFormat::Text);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("a.example: granted: system:node:node-a may request tokens for it (every service account); the authorizer: RBAC: allowed"), "{text}");
        assert!(
            lines[1].starts_with("b.example: MISSING: system:node:node-a may not request tokens for it"),
            "{text}"
        );
        assert!(!lines[1].contains('\u{1b}'), "the apiserver's text is cleaned: {text}");
        assert!(
            lines[2].starts_with("c.example: MISSING"),
            "no status is no grant: {text}"
        );
        assert_eq!(
            lines[3],
            "fix: cloud-credential-provider check-config --rbac c.yaml | kubectl apply -f -"
        );
        assert_eq!(report.exit_code(), std::process::ExitCode::from(2));
        let json: serde_json::Value =
            serde_json::from_str(&report.render(crate::cli::OutputFormat::Json)).expect("JSON");
        assert_eq!(json["audiences"][1]["allowed"], false);
        assert_eq!(json["user"], "system:node:node-a");
    }
}
