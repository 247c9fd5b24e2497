//! The `metal.binder.dev/v1alpha1` API: `Server` and `ServerClaim`.

/// Both CRDs as multi-document YAML, as `server-binder crd` prints them.
pub fn crd_yaml() -> Result<String, String> {
    Err("not yet".into())
}
