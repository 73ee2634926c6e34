//! Keystone v3 tokens (`POST {auth_url}/v3/auth/tokens`) and the block-storage
//! endpoint of their service catalog.
//!
//! [`KeystoneAuth`] is a [`TokenSource`]: put it behind the crate's one token cache
//! ([`crate::token::CachedTokenSource`]) so the token is kept until a margin before
//! its `expires_at` and one fetch serves every caller. Each fetch also reads the
//! catalog the token comes with and keeps its block-storage endpoint
//! ([`KeystoneAuth::endpoint`]): the endpoint and the token always come from the same
//! answer.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use url::Url;

use super::Call;
use super::config::{Credential, Domain, Interface, Named, OpenStackConfig, Scope};
use super::error::OpenStackError;
use crate::endpoint::SecureEndpoint;
use crate::token::{AccessToken, TokenFuture, TokenSource};

/// The service name Keystone's errors carry.
pub const KEYSTONE: &str = "Keystone";

/// The catalog types of the block-storage service, most preferred first: the
/// official type, then its aliases (gophercloud's order for the v3 client).
pub const BLOCK_STORAGE_TYPES: [&str; 5] = ["block-storage", "volumev3", "volumev2", "volume", "block-store"];

/// Tokens from Keystone for the configured credential, and the block-storage
/// endpoint of the last token's catalog.
pub struct KeystoneAuth {
    http: reqwest::Client,
    tokens_url: Url,
    credential: Credential,
    region: String,
    interface: Interface,
    timeout: Duration,
    endpoint: Mutex<Option<SecureEndpoint>>,
}

impl std::fmt::Debug for KeystoneAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeystoneAuth")
            .field("tokens_url", &self.tokens_url.as_str())
            .field("region", &self.region)
            .field("interface", &self.interface)
            .finish_non_exhaustive()
    }
}

/// `{auth_url}/v3/auth/tokens`, whether `auth_url` ends in `/v3` or not.
pub fn tokens_url(auth_url: &SecureEndpoint) -> Url {
    let mut url = auth_url.url().clone();
    url.set_query(None);
    url.set_fragment(None);
    let path = url.path().trim_end_matches('/').to_owned();
    let path = if path.ends_with("/v3") {
        format!("{path}/auth/tokens")
    } else {
        format!("{path}/v3/auth/tokens")
    };
    url.set_path(&path);
    url
}

impl KeystoneAuth {
    /// Tokens for `config`'s credential through `http`, each fetch within `timeout`.
    pub fn new(http: reqwest::Client, config: &OpenStackConfig, timeout: Duration) -> Self {
        Self {
            http,
            tokens_url: tokens_url(&config.auth_url),
            credential: config.credential.clone(),
            region: config.region.clone(),
            interface: config.interface,
            timeout,
            endpoint: Mutex::new(None),
        }
    }

    pub fn tokens_url(&self) -> &Url {
        &self.tokens_url
    }

    /// The block-storage endpoint of the last token's catalog (none before the first).
    pub fn endpoint(&self) -> Option<SecureEndpoint> {
        self.endpoint.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    async fn fetch(&self) -> Result<AccessToken, OpenStackError> {
        let deadline = Instant::now() + self.timeout;
        let url = &self.tokens_url;
        let (body, secret) = request_body(&self.credential);
        let secret = secret.expose_secret();
        let request = self.http.post(url.clone()).json(&body);
        let answer = Call::exchange(KEYSTONE, url, request, deadline).await?;
        let token = answer
            .headers
            .get("X-Subject-Token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = Call::check(KEYSTONE, url, answer, &[secret])?;
        let token = token
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Call::garbage(KEYSTONE, url, "the answer has no X-Subject-Token header"))?;
        let json = Call::json(KEYSTONE, url, &body)?;
        let expires_at =
            token_expires_at(&json).ok_or_else(|| Call::garbage(KEYSTONE, url, "the token has no expires_at time"))?;
        let endpoint = match select_endpoint(&json["token"]["catalog"], &self.region, self.interface) {
            // The token goes to it: https, or plain http on loopback only.
            Ok(found) => SecureEndpoint::parse("the block-storage endpoint", found).map_err(|e| {
                let problem = format!(
                    "{e}; the catalog's {} endpoint cannot receive the token: set os-endpoint-type (interface) to one whose endpoint is https",
                    self.interface.as_str()
                );
                Call::garbage(KEYSTONE, url, problem)
            })?,
            Err(Selection::None { found }) => {
                return Err(OpenStackError::NoEndpoint {
                    url: crate::http::shown_url(url),
                    region: self.region.clone(),
                    interface: self.interface.as_str(),
                    found,
                });
            }
            Err(Selection::Several { kind, found }) => {
                return Err(OpenStackError::AmbiguousEndpoint {
                    url: crate::http::shown_url(url),
                    kind,
                    region: self.region.clone(),
                    interface: self.interface.as_str(),
                    found,
                });
            }
        };
        *self.endpoint.lock().unwrap_or_else(PoisonError::into_inner) = Some(endpoint);
        Ok(AccessToken::expiring_at(SecretString::from(token), expires_at))
    }
}

impl TokenSource<OpenStackError> for KeystoneAuth {
    fn token(&self) -> TokenFuture<'_, OpenStackError> {
        Box::pin(self.fetch())
    }
}

/// The body of a token request for `credential`, and the secret it carries.
fn request_body(credential: &Credential) -> (Value, &SecretString) {
    let domain = |d: &Domain| match d {
        Domain::Id(id) => json!({"id": id}),
        Domain::Name(name) => json!({"name": name}),
    };
    let named = |n: &Named| match n {
        Named::Id(id) => json!({"id": id}),
        Named::Name { name, domain: d } => json!({"name": name, "domain": domain(d)}),
    };
    match credential {
        Credential::ApplicationCredential { id, name, user, secret } => {
            let mut credential = json!({"secret": secret.expose_secret()});
            if let Some(id) = id {
                credential["id"] = json!(id);
            } else {
                credential["name"] = json!(name);
                if let Some(user) = user {
                    credential["user"] = named(user);
                }
            }
            let body = json!({"auth": {"identity": {
                "methods": ["application_credential"],
                "application_credential": credential
            }}});
            (body, secret)
        }
        Credential::Password { user, password, scope } => {
            let mut user = named(user);
            user["password"] = json!(password.expose_secret());
            let scope = match scope {
                Scope::Project(project) => json!({"project": named(project)}),
                Scope::Trust(id) => json!({"OS-TRUST:trust": {"id": id}}),
            };
            let body = json!({"auth": {
                "identity": {"methods": ["password"], "password": {"user": user}},
                "scope": scope
            }});
            (body, password)
        }
    }
}

/// Why no endpoint was picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Nothing matches; `found` lists what the catalog has.
    None { found: String },
    /// Several different URLs of the most preferred type that matches.
    Several { kind: String, found: String },
}

/// The `token.expires_at` time of a Keystone v3 token answer (RFC 3339), if
/// it has one. Public for the fuzz targets (fuzz/).
pub fn token_expires_at(json: &Value) -> Option<std::time::SystemTime> {
    json["token"]["expires_at"]
        .as_str()
        .and_then(|at| humantime::parse_rfc3339(at.trim()).ok())
}

/// The block-storage endpoint of a v3 `catalog` in `region` (an endpoint's `region`
/// or `region_id`) for `interface`: of the first type of [`BLOCK_STORAGE_TYPES`] that
/// has one, as gophercloud picks.
pub fn select_endpoint<'a>(catalog: &'a Value, region: &str, interface: Interface) -> Result<&'a str, Selection> {
    let services = catalog.as_array().map(Vec::as_slice).unwrap_or_default();
    let text = |v: &'a Value, key: &str| v[key].as_str().unwrap_or_default();
    for kind in BLOCK_STORAGE_TYPES {
        let mut urls: Vec<&str> = services
            .iter()
            .filter(|s| text(s, "type") == kind)
            .flat_map(|s| s["endpoints"].as_array().map(Vec::as_slice).unwrap_or_default())
            .filter(|e| text(e, "interface") == interface.as_str())
            .filter(|e| text(e, "region") == region || text(e, "region_id") == region)
            .map(|e| text(e, "url"))
            .filter(|u| !u.is_empty())
            .collect();
        urls.sort_unstable();
        urls.dedup();
        match urls.as_slice() {
            [] => continue,
            [one] => return Ok(one),
            several => {
                return Err(Selection::Several {
                    kind: kind.to_owned(),
                    found: crate::logging::clean_text(&several.join(", "), &[], 500),
                });
            }
        }
    }
    let listed: Vec<String> = services
        .iter()
        .filter(|s| BLOCK_STORAGE_TYPES.contains(&text(s, "type")))
        .flat_map(|s| {
            s["endpoints"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .map(move |e| {
                    let region = Some(text(e, "region"))
                        .filter(|r| !r.is_empty())
                        .unwrap_or(text(e, "region_id"));
                    format!("{} in {region} ({})", text(s, "type"), text(e, "interface"))
                })
        })
        .collect();
    let found = if listed.is_empty() {
        let types: Vec<&str> = services.iter().map(|s| text(s, "type")).collect();
        format!(
            "no block-storage service (its services: {})",
            if types.is_empty() {
                "none".to_owned()
            } else {
                types.join(", ")
            }
        )
    } else {
        listed.join(", ")
    };
    Err(Selection::None {
        found: crate::logging::clean_text(&found, &[], 500),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(region: &str, interface: &str, url: &str) -> Value {
        json!({"id": "e", "interface": interface, "region": region, "region_id": region, "url": url})
    }

    fn catalog() -> Value {
        json!([
            {"type": "identity", "name": "keystone", "endpoints": [endpoint("RegionOne", "public", "https://k/v3")]},
            {"type": "volumev2", "name": "cinderv2", "endpoints": [
                endpoint("RegionOne", "public", "https://cinder-one/v2/p"),
            ]},
            {"type": "volumev3", "name": "cinderv3", "endpoints": [
                endpoint("RegionOne", "public", "https://cinder-one/v3/p"),
                endpoint("RegionOne", "internal", "https://cinder-one.internal/v3/p"),
                endpoint("RegionTwo", "public", "https://cinder-two/v3/p"),
            ]},
        ])
    }

    #[test]
    fn the_preferred_type_in_the_region_and_interface() {
        let c = catalog();
        assert_eq!(
            select_endpoint(&c, "RegionOne", Interface::Public),
            Ok("https://cinder-one/v3/p")
        );
        assert_eq!(
            select_endpoint(&c, "RegionOne", Interface::Internal),
            Ok("https://cinder-one.internal/v3/p")
        );
        assert_eq!(
            select_endpoint(&c, "RegionTwo", Interface::Public),
            Ok("https://cinder-two/v3/p")
        );
        // block-storage comes before volumev3.
        let mut c = catalog();
        c.as_array_mut()
            .expect("a list")
            .push(json!({"type": "block-storage", "endpoints": [endpoint("RegionOne", "public", "https://bs/v3/p")]}));
        assert_eq!(
            select_endpoint(&c, "RegionOne", Interface::Public),
            Ok("https://bs/v3/p")
        );
    }

    /// A catalog offering each of `types`, in this order, one public RegionOne endpoint
    /// each at `https://{type}/v3/p`, and a RegionTwo one of every type.
    fn catalog_of(types: &[&str]) -> Value {
        let services: Vec<Value> = types
            .iter()
            .map(|kind| {
                json!({"type": kind, "endpoints": [
                    endpoint("RegionTwo", "public", &format!("https://{kind}.two/v3/p")),
                    endpoint("RegionOne", "public", &format!("https://{kind}/v3/p")),
                ]})
            })
            .collect();
        Value::Array(services)
    }

    #[test]
    fn a_catalog_with_only_an_older_alias() {
        for kind in ["volume", "block-store", "volumev2"] {
            let c = catalog_of(&["identity", kind]);
            let expected = format!("https://{kind}/v3/p");
            assert_eq!(
                select_endpoint(&c, "RegionOne", Interface::Public),
                Ok(expected.as_str()),
                "{kind}"
            );
            // Its other region's endpoint, not the first listed.
            let expected = format!("https://{kind}.two/v3/p");
            assert_eq!(
                select_endpoint(&c, "RegionTwo", Interface::Public),
                Ok(expected.as_str()),
                "{kind}"
            );
        }
        // A type that is not an alias is not taken.
        let c = catalog_of(&["volumev4", "object-store"]);
        assert!(matches!(
            select_endpoint(&c, "RegionOne", Interface::Public),
            Err(Selection::None { .. })
        ));
    }

    #[test]
    fn the_aliases_in_preference_order_whatever_the_catalog_order() {
        // block-storage, volumev3, volumev2, volume, block-store: with the preferred
        // ones taken away one by one, the next in that order is chosen, although the
        // catalog lists them the other way round.
        let order = ["block-storage", "volumev3", "volumev2", "volume", "block-store"];
        assert_eq!(BLOCK_STORAGE_TYPES, order);
        for first in 0..order.len() {
            let mut offered: Vec<&str> = order[first..].to_vec();
            offered.reverse();
            let c = catalog_of(&offered);
            let expected = format!("https://{}/v3/p", order[first]);
            assert_eq!(
                select_endpoint(&c, "RegionOne", Interface::Public),
                Ok(expected.as_str()),
                "offered {offered:?}"
            );
        }
        // A preferred type without an endpoint in the region gives way to the next.
        let mut c = catalog_of(&["volume"]);
        c.as_array_mut()
            .expect("a list")
            .push(json!({"type": "volumev3", "endpoints": [
                endpoint("RegionTwo", "public", "https://volumev3.two/v3/p"),
                endpoint("RegionOne", "internal", "https://volumev3.internal/v3/p"),
            ]}));
        assert_eq!(
            select_endpoint(&c, "RegionOne", Interface::Public),
            Ok("https://volume/v3/p")
        );
    }

    #[test]
    fn nothing_or_several_say_what_the_catalog_has() {
        let c = catalog();
        let Err(Selection::None { found }) = select_endpoint(&c, "RegionThree", Interface::Public) else {
            panic!("RegionThree has no endpoint");
        };
        assert!(found.contains("volumev3 in RegionTwo (public)"), "{found}");
        let Err(Selection::None { found }) = select_endpoint(&c, "RegionTwo", Interface::Admin) else {
            panic!("no admin endpoint");
        };
        assert!(found.contains("volumev2 in RegionOne (public)"), "{found}");
        let bare = json!([{"type": "compute", "endpoints": []}]);
        assert_eq!(
            select_endpoint(&bare, "RegionOne", Interface::Public),
            Err(Selection::None {
                found: "no block-storage service (its services: compute)".into()
            })
        );
        let twice = json!([{"type": "volumev3", "endpoints": [
            endpoint("RegionOne", "public", "https://a/v3"), endpoint("RegionOne", "public", "https://b/v3")
        ]}]);
        assert!(matches!(
            select_endpoint(&twice, "RegionOne", Interface::Public),
            Err(Selection::Several { .. })
        ));
    }

    #[test]
    fn the_tokens_url_with_or_without_v3() {
        for (auth, expected) in [
            (
                "https://keystone.example:5000/v3",
                "https://keystone.example:5000/v3/auth/tokens",
            ),
            (
                "https://keystone.example:5000/v3/",
                "https://keystone.example:5000/v3/auth/tokens",
            ),
            (
                "https://keystone.example/identity",
                "https://keystone.example/identity/v3/auth/tokens",
            ),
            ("https://keystone.example", "https://keystone.example/v3/auth/tokens"),
        ] {
            let auth = SecureEndpoint::parse("auth-url", auth).expect("a valid URL");
            assert_eq!(tokens_url(&auth).as_str(), expected);
        }
    }

    #[test]
    fn request_bodies_as_the_identity_api_documents_them() {
        let secret = || SecretString::from("s3cret".to_owned());
        let default = Domain::Name("Default".into());
        let (body, _) = request_body(&Credential::ApplicationCredential {
            id: None,
            name: Some("lookup".into()),
            user: Some(Named::Name {
                name: "reader".into(),
                domain: default.clone(),
            }),
            secret: secret(),
        });
        assert_eq!(
            body,
            json!({"auth": {"identity": {"methods": ["application_credential"], "application_credential": {
                "name": "lookup", "secret": "s3cret", "user": {"name": "reader", "domain": {"name": "Default"}}
            }}}})
        );
        let password = Credential::Password {
            user: Named::Id("u1".into()),
            password: secret(),
            scope: Scope::Project(Named::Name {
                name: "demo".into(),
                domain: Domain::Id("default".into()),
            }),
        };
        let (body, shown) = request_body(&password);
        assert_eq!(shown.expose_secret(), "s3cret");
        assert_eq!(
            body,
            json!({"auth": {
                "identity": {"methods": ["password"], "password": {"user": {"id": "u1", "password": "s3cret"}}},
                "scope": {"project": {"name": "demo", "domain": {"id": "default"}}}
            }})
        );
        let (body, _) = request_body(&Credential::Password {
            user: Named::Id("u1".into()),
            password: secret(),
            scope: Scope::Trust("t1".into()),
        });
        assert_eq!(body["auth"]["scope"], json!({"OS-TRUST:trust": {"id": "t1"}}));
    }
}
