//! The webhook's rules file (`Rules::parse`): no panic; what parses can be
//! used to answer a review (through `Reviewer::review`, with the AdmissionReview
//! seeds of tests/data/webhook/).
#![no_main]

use std::path::Path;
use std::sync::LazyLock;

use fuzz::block_on;
use libfuzzer_sys::fuzz_target;
use pv_topology_webhook::model::DecisionConfig;
use pv_topology_webhook::resolve::Resolver;
use pv_topology_webhook::review::Reviewer;
use pv_topology_webhook::rules::Rules;

/// The AdmissionReviews of tests/data/webhook/ each parsed rules file answers.
static REVIEWS: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| {
    let dir = fuzz::data_dir().join("webhook");
    let mut reviews: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .expect("tests/data/webhook")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|p| std::fs::read(p).ok())
        .collect();
    reviews.sort();
    reviews
});

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(rules) = Rules::parse(Path::new("fuzz-rules.yaml"), text) else {
        return;
    };
    let _ = rules.rules().len();
    let reviewer = Reviewer::new(Resolver::new(rules), DecisionConfig::default());
    for review in REVIEWS.iter() {
        let answer = block_on(reviewer.review(review)).expect("a test review is a review");
        let _: serde_json::Value = serde_json::from_slice(&answer.body).expect("the answer is JSON");
    }
});
