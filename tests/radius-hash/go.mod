// Test tooling only, never part of the product: computes the statusHash
// Radius's controller writes for a DeploymentTemplate spec, with Go's own
// encoding/json, so radwasm's reimplementation is checked against Go itself.
module radwasm.dev/tests/radius-hash

go 1.24
