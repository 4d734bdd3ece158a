//! End-to-end scenarios: the real `radwasm run` process against the embedded
//! API server and the Radius simulator over HTTP (issue 5). Each scenario
//! uses its own namespace-free stand-ins so they run in parallel.

mod harness;
mod scenarios;
