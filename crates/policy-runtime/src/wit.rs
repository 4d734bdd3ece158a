//! The contract's WIT files, carried by the binary: `radwasm policy wit`
//! writes them, and `radwasm policy new` puts the current one into a
//! Python or JavaScript scaffold.

/// The contract's WIT files, as the binary was built with them: where each
/// goes under the directory `policy wit` writes, and its text.
pub const FILES: [(&str, &str); 6] = [
    ("policy.wit", include_str!("../../../wit/policy.wit")),
    (
        "v0.5/policy.wit",
        include_str!("../../../wit/v0.5/policy.wit"),
    ),
    (
        "v0.4/policy.wit",
        include_str!("../../../wit/v0.4/policy.wit"),
    ),
    (
        "v0.3/policy.wit",
        include_str!("../../../wit/v0.3/policy.wit"),
    ),
    (
        "v0.2/policy.wit",
        include_str!("../../../wit/v0.2/policy.wit"),
    ),
    (
        "v0.1/policy.wit",
        include_str!("../../../wit/v0.1/policy.wit"),
    ),
];

/// The current contract (`wit/policy.wit`).
pub const CURRENT: &str = FILES[0].1;
