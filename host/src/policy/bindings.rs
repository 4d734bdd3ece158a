//! Typed host bindings generated from the contract (world `policy`, which
//! covers both object kinds), one module per contract version the host
//! loads: `v0_3` from `wit/policy.wit`, `v0_2` from `wit/v0.2/policy.wit`,
//! `v0_1` from `wit/v0.1/policy.wit`. Host code never touches raw component
//! values.

pub mod v0_3 {
    wasmtime::component::bindgen!({
        world: "policy",
        path: "../wit",
    });
}

pub mod v0_2 {
    wasmtime::component::bindgen!({
        world: "policy",
        path: "../wit/v0.2",
    });
}

pub mod v0_1 {
    wasmtime::component::bindgen!({
        world: "policy",
        path: "../wit/v0.1",
    });
}
