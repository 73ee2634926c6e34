//! kubelet's matchImages logic (`credential_provider::matching`): a pattern
//! and an image, split at the first NUL byte.
//!
//! Properties, from what kubelet's parsing (Go's `url.Parse` of
//! `"https://" + text`) normalises away:
//! - a query or fragment of the image does not change the result;
//! - percent-escaping a letter or digit of the image's path (one without
//!   escapes) does not change it;
//! - a pattern without glob characters matches itself;
//! - a match still holds for a longer path of the image (prefix rule);
//! - `keyring_key` drops an `https://` or `http://` scheme, and a `/v1/` or
//!   `/v2/` path stands for the bare host.
#![no_main]

use credential_provider::matching::{keyring_key, matches, parse_schemeless, urls_match};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((pattern, image)) = fuzz::two(data) else {
        return;
    };
    let result = urls_match(pattern, image);
    assert_eq!(matches(pattern, image), result == Ok(true));
    let plain = !image.contains(['?', '#']);

    if plain {
        assert_eq!(
            urls_match(pattern, &format!("{image}?q=1")),
            result,
            "a query changes the result"
        );
        assert_eq!(
            urls_match(pattern, &format!("{image}#")),
            result,
            "a fragment changes the result"
        );
        if let Some(slash) = image.find('/') {
            let path = &image[slash..];
            // (Only in a path without escapes: a letter may be part of one.)
            if let Some(i) = path
                .find(|c: char| c.is_ascii_alphanumeric())
                .filter(|_| !path.contains('%'))
            {
                let at = slash + i;
                let escaped = format!("{}%{:02X}{}", &image[..at], image.as_bytes()[at], &image[at + 1..]);
                // (Errors may quote the escape: only what parses is compared.)
                assert_eq!(
                    parse_schemeless(&escaped).ok(),
                    parse_schemeless(image).ok(),
                    "escaping changes the parse of {image:?}"
                );
                assert_eq!(
                    urls_match(pattern, &escaped).ok(),
                    result.clone().ok(),
                    "escaping changes {image:?}"
                );
            }
        }
        if result == Ok(true) {
            assert!(
                matches(pattern, &format!("{image}/more")),
                "a longer path no longer matches"
            );
        }
    }
    if !pattern.contains(['*', '?', '[', '\\', '#']) && parse_schemeless(pattern).is_ok() {
        assert_eq!(
            urls_match(pattern, pattern),
            Ok(true),
            "{pattern:?} does not match itself"
        );
    }

    let key = keyring_key(image);
    if !image.starts_with("http://") && !image.starts_with("https://") {
        assert_eq!(keyring_key(&format!("https://{image}")), key);
        assert_eq!(keyring_key(&format!("http://{image}")), key);
        if !image.contains(['/', '?', '#']) {
            assert_eq!(keyring_key(&format!("{image}/v2/")), key, "/v2/ is not the bare host");
        }
    }
});
