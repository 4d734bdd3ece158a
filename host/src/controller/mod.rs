//! The two controllers and what they share: observing, guard rails, acting.

pub mod guard;
