//! What signature verification adds to a policy's activation: the fetch a
//! `ReconcilePolicy` does (pull the artifact by its tag, check its digests)
//! against the same plus what `spec.verify` adds (reading the keys, fetching
//! the `sha256-<hex>.sig` manifest and its payloads, checking the ECDSA
//! signature), against a CNCF distribution registry on loopback
//! (`docker-registry`, started and stopped here). Medians of `--reps` runs
//! each (default 50), and the ECDSA check alone.
//!
//! ```sh
//! cargo bench -p radwasm --bench policy_verify -- [--reps 50]
//! ```
//!
//! Figures are in `docs/benchmarks-policy-activation.md`, "Verifying a
//! signed policy".

use std::time::{Duration, Instant};

use p256::ecdsa::SigningKey;
use p256::pkcs8::{EncodePublicKey, LineEnding};
use radwasm::policy::embedded::DEFAULT_POLICY;
use radwasm::policy::source::oci;
use radwasm::policy::trust;
use radwasm_test_support::registry::Registry;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let reps = args
        .iter()
        .position(|a| a == "--reps")
        .and_then(|i| args.get(i + 1))
        .map(|n| n.parse::<usize>())
        .transpose()?
        .unwrap_or(50)
        .max(1);
    let registry = Registry::start();
    let options = registry.options();
    let tag = registry.reference("policies/default:bench");
    let pushed = oci::push(&tag, DEFAULT_POLICY, &options).await?;
    let key = SigningKey::from_slice(&[42; 32])?;
    let (repository, digest) = pushed
        .reference
        .split_once('@')
        .ok_or("a pinned reference")?;
    let payload = trust::payload(repository, digest);
    let signature = trust::sign(&payload, &key);
    oci::push_signature(&pushed.reference, digest, payload, signature, &options).await?;
    let pem = key.verifying_key().to_public_key_pem(LineEnding::LF)?;

    let mut fetch = Vec::new();
    let mut verified = Vec::new();
    let mut added = Vec::new();
    let mut check = Vec::new();
    for _ in 0..reps {
        let started = Instant::now();
        oci::pull(&tag, &options).await?;
        let pulled_in = started.elapsed();
        fetch.push(pulled_in);

        let started = Instant::now();
        let pulled = oci::pull(&tag, &options).await?;
        let after_pull = started.elapsed();
        let keys = vec![trust::public_key_from_pem("cosign.pub", &pem)?];
        let layers = oci::signatures(&pulled.reference, &pulled.digest, &options).await?;
        let checking = Instant::now();
        trust::verify(&layers, &pulled.digest, &keys)?;
        check.push(checking.elapsed());
        let total = started.elapsed();
        verified.push(total);
        added.push(total.saturating_sub(after_pull));
    }
    println!(
        "{reps} runs, default policy ({} bytes), registry on loopback",
        DEFAULT_POLICY.len()
    );
    println!(
        "fetch (pull by tag, digests checked):  median {}",
        ms(median(fetch))
    );
    println!(
        "fetch + verify:                        median {}",
        ms(median(verified))
    );
    println!(
        "added by verification:                 median {}",
        ms(median(added))
    );
    println!(
        "ECDSA P-256 check alone:               median {}",
        ms(median(check))
    );
    Ok(())
}
