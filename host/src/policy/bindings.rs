//! Typed host bindings generated from `wit/policy.wit` (world `policy`, which
//! covers both object kinds). Host code never touches raw component values.

wasmtime::component::bindgen!({
    world: "policy",
    path: "../wit",
});
