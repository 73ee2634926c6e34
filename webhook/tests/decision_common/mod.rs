//! Shared by the decision tests (`decision*.rs`): the GCE PD CSI driver's
//! name and the nodeSelectorTerms of a patched PV.
#![allow(dead_code)] // each test file uses a different subset

use serde_json::Value;

/// The GCE PD CSI driver.
pub const GCE: &str = "pd.csi.storage.gke.io";

/// `spec.nodeAffinity.required.nodeSelectorTerms` of a PV as JSON.
pub fn affinity_terms(object: &Value) -> &Vec<Value> {
    object["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        .as_array()
        .unwrap()
}
