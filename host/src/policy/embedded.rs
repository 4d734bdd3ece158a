//! The default policy, compiled for wasm32-wasip2 by `host/build.rs` and
//! embedded in the host binary, so `radwasm` works with no `.wasm` on disk.

/// Bytes of the default policy component.
pub const DEFAULT_POLICY: &[u8] = include_bytes!(env!("RADWASM_DEFAULT_POLICY_WASM"));

/// The name the embedded policy is loaded under in messages.
pub const DEFAULT_POLICY_SOURCE: &str = "<embedded default policy>";

/// Load the embedded default policy into `engine`.
pub fn load_default(engine: &super::PolicyEngine) -> Result<super::LoadedPolicy, super::LoadError> {
    engine.load_bytes(DEFAULT_POLICY_SOURCE, DEFAULT_POLICY)
}
