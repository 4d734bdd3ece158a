//! The default policy, compiled without WASI and made a component by
//! `host/build/main.rs`, and embedded in the host binary, so `radwasm` works with
//! no `.wasm` on disk.

/// Bytes of the default policy component.
pub const DEFAULT_POLICY: &[u8] = include_bytes!(env!("RADWASM_DEFAULT_POLICY_WASM"));

/// The name the embedded policy is loaded under in messages.
pub const DEFAULT_POLICY_SOURCE: &str = "<embedded default policy>";

/// The embedded default policy as a source's built-in component.
pub const DEFAULT: super::BuiltIn = super::BuiltIn {
    name: DEFAULT_POLICY_SOURCE,
    bytes: DEFAULT_POLICY,
};

/// The policy a command line names: `default` is the embedded default
/// policy, anything else a file.
pub fn source(text: &str) -> super::Source {
    super::Source::parse(text, DEFAULT)
}

/// Load the embedded default policy into `engine`.
pub fn load_default(engine: &super::PolicyEngine) -> Result<super::LoadedPolicy, super::LoadError> {
    engine.load_bytes(DEFAULT_POLICY_SOURCE, DEFAULT_POLICY)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built without WASI, the default policy imports nothing but the
    /// contract's own interfaces (`types`; it never logs), so a decision's
    /// instance links nothing else (docs/benchmarks-decisions.md has what
    /// that saves).
    #[test]
    fn the_default_policy_imports_only_the_contract() {
        let engine = wasmtime::Engine::new(wasmtime::Config::new().wasm_component_model(true))
            .expect("engine");
        let component =
            wasmtime::component::Component::new(&engine, DEFAULT_POLICY).expect("compiles");
        let imports: Vec<String> = component
            .component_type()
            .imports(&engine)
            .map(|(name, _)| name.to_string())
            .collect();
        for import in &imports {
            assert!(
                import.starts_with("radapp:policy/"),
                "the embedded default policy imports {import}: {imports:?}"
            );
        }
    }
}
