//! Typed host bindings generated from the contract, one module per
//! contract version the host loads: `v0_6` from `wit/policy.wit`, `v0_5`
//! from `wit/v0.5/policy.wit`, `v0_4` from `wit/v0.4/policy.wit`, `v0_3`
//! from `wit/v0.3/policy.wit`, `v0_2` from `wit/v0.2/policy.wit`, `v0_1`
//! from `wit/v0.1/policy.wit`. For 0.1–0.3 the world is `policy` (both
//! object kinds); from 0.4 it is
//! a host-only world holding every export such a guest may have (policy and
//! layer alike), of which a guest implements some. Host code never touches
//! raw component values.

pub mod v0_6 {
    wasmtime::component::bindgen!({
        inline: "
            package radwasm:host;
            world guest-exports {
                include radapp:policy/policy@0.6.0;
                include radapp:policy/layer@0.6.0;
            }
        ",
        path: "../../wit",
        world: "radwasm:host/guest-exports",
    });
}

pub mod v0_5 {
    wasmtime::component::bindgen!({
        inline: "
            package radwasm:host;
            world guest-exports {
                include radapp:policy/policy@0.5.0;
                include radapp:policy/layer@0.5.0;
            }
        ",
        path: "../../wit/v0.5",
        world: "radwasm:host/guest-exports",
    });
}

pub mod v0_4 {
    wasmtime::component::bindgen!({
        inline: "
            package radwasm:host;
            world guest-exports {
                include radapp:policy/policy@0.4.0;
                include radapp:policy/layer@0.4.0;
            }
        ",
        path: "../../wit/v0.4",
        world: "radwasm:host/guest-exports",
    });
}

pub mod v0_3 {
    wasmtime::component::bindgen!({
        world: "policy",
        path: "../../wit/v0.3",
    });
}

pub mod v0_2 {
    wasmtime::component::bindgen!({
        world: "policy",
        path: "../../wit/v0.2",
    });
}

pub mod v0_1 {
    wasmtime::component::bindgen!({
        world: "policy",
        path: "../../wit/v0.1",
    });
}
