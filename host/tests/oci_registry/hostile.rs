//! A hostile registry cannot push the controller past its memory limit, and
//! what it stores where signatures belong is refused for trust, not
//! retried as a fetch failure. The registry is an axum server on loopback
//! that lies: an endless manifest, a layer longer than it declares, an
//! index at a signature tag. Each read must stop within its bound; the
//! server counts what it managed to send.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::stream;

use super::*;

const CHUNK: usize = 64 << 10;
const DIGEST: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";

/// What the fake registry serves, and how much it sent.
#[derive(Clone)]
struct Hostile {
    /// The manifest body for every manifest request, or `None` for an
    /// endless one.
    manifest: Option<Vec<u8>>,
    /// Bytes of every blob request: endless.
    sent: Arc<AtomicU64>,
    /// Answer blob requests 404 instead.
    no_blobs: bool,
}

/// An endless body of `byte`, counting what was handed to the socket.
fn endless(sent: Arc<AtomicU64>, byte: u8) -> Body {
    Body::from_stream(stream::repeat_with(move || {
        sent.fetch_add(CHUNK as u64, Ordering::Relaxed);
        Ok::<_, std::io::Error>(vec![byte; CHUNK])
    }))
}

/// `/v2/{repository}/manifests/{reference}` and `/v2/{repository}/blobs/{digest}`
/// (a repository has slashes, so one wildcard route takes both).
async fn v2(State(hostile): State<Hostile>, UrlPath(rest): UrlPath<String>) -> Response {
    if rest.contains("/blobs/") && hostile.no_blobs {
        return StatusCode::NOT_FOUND.into_response();
    }
    if rest.contains("/blobs/") {
        return (StatusCode::OK, endless(hostile.sent.clone(), b'x')).into_response();
    }
    if !rest.contains("/manifests/") {
        return StatusCode::NOT_FOUND.into_response();
    }
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        OCI_MANIFEST.parse().expect("a header value"),
    );
    match &hostile.manifest {
        Some(body) => (headers, body.clone()).into_response(),
        None => (headers, endless(hostile.sent.clone(), b' ')).into_response(),
    }
}

/// Serve `hostile` on loopback; the address, and the task to abort.
async fn serve(hostile: Hostile) -> (String, tokio::task::JoinHandle<()>) {
    let app = Router::new()
        .route("/v2/", get(|| async { StatusCode::OK }))
        .route("/v2/{*rest}", get(v2))
        .with_state(hostile);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("address").to_string();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, task)
}

fn options(addr: &str) -> OciOptions {
    OciOptions {
        insecure_registries: vec![addr.to_string()],
        auth: None,
        user_agent: radwasm::USER_AGENT,
    }
}

/// A manifest whose one layer (of `media_type`) declares `size` bytes.
fn manifest_with_layer(media_type: &str, size: u64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": DIGEST, "size": 2},
        "layers": [{"mediaType": media_type, "digest": DIGEST, "size": size}],
    }))
    .expect("JSON")
}

/// At most this much may reach the socket before the reader stops: the
/// bound and what the kernel's buffers take before the peer closes.
fn at_most(bound: u64) -> u64 {
    bound + (16 << 20)
}

#[tokio::test]
async fn an_endless_manifest_is_refused_at_the_manifest_bound() {
    let sent = Arc::new(AtomicU64::new(0));
    let (addr, task) = serve(Hostile {
        manifest: None,
        sent: sent.clone(),
        no_blobs: false,
    })
    .await;
    let reference = format!("{addr}/policies/endless:1");
    let error = tokio::time::timeout(
        Duration::from_secs(60),
        oci::pull(&reference, &options(&addr)),
    )
    .await
    .expect("the pull stops at the bound instead of reading on")
    .expect_err("an endless manifest is refused");
    assert!(
        matches!(error, OciError::ManifestTooLarge { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("4 MiB"), "{error}");
    let served = sent.load(Ordering::Relaxed);
    assert!(
        served <= at_most(oci::MAX_MANIFEST_BYTES),
        "the registry sent {served} bytes"
    );
    task.abort();
}

#[tokio::test]
async fn a_component_layer_longer_than_declared_is_not_read_on() {
    let sent = Arc::new(AtomicU64::new(0));
    let (addr, task) = serve(Hostile {
        manifest: Some(manifest_with_layer("application/wasm", 1000)),
        sent: sent.clone(),
        no_blobs: false,
    })
    .await;
    let reference = format!("{addr}/policies/long:1");
    let error = tokio::time::timeout(
        Duration::from_secs(60),
        oci::pull(&reference, &options(&addr)),
    )
    .await
    .expect("the pull stops at the declared size")
    .expect_err("a layer longer than declared is refused");
    assert!(
        matches!(error, OciError::LayerTooLong { limit: 1000, .. }),
        "{error:?}"
    );
    assert!(sent.load(Ordering::Relaxed) <= at_most(1000));
    task.abort();
}

#[tokio::test]
async fn a_signature_layer_longer_than_declared_is_a_refusal_for_trust() {
    let sent = Arc::new(AtomicU64::new(0));
    let (addr, task) = serve(Hostile {
        manifest: Some(manifest_with_layer(
            "application/vnd.dev.cosign.simplesigning.v1+json",
            300,
        )),
        sent: sent.clone(),
        no_blobs: false,
    })
    .await;
    let reference = format!("{addr}/policies/signed@{DIGEST}");
    let error = tokio::time::timeout(
        Duration::from_secs(60),
        oci::signatures(&reference, DIGEST, &options(&addr)),
    )
    .await
    .expect("the read stops at the declared size")
    .expect_err("refused");
    assert!(matches!(error, OciError::BadSignatures { .. }), "{error:?}");
    assert!(
        error.to_string().contains("sha256-"),
        "names the tag: {error}"
    );
    assert!(sent.load(Ordering::Relaxed) <= at_most(300));
    task.abort();
}

#[tokio::test]
async fn an_oversized_signature_layer_or_an_index_at_the_signature_tag_is_refused() {
    let sent = Arc::new(AtomicU64::new(0));
    let oversized =
        manifest_with_layer("application/vnd.dev.cosign.simplesigning.v1+json", 1 << 30);
    let index = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": DIGEST, "size": 10}],
    }))
    .expect("JSON");
    for (body, expected) in [
        (oversized, "declares 1073741824 bytes"),
        (index, "image index"),
    ] {
        let (addr, task) = serve(Hostile {
            manifest: Some(body),
            sent: sent.clone(),
            no_blobs: false,
        })
        .await;
        let reference = format!("{addr}/policies/signed@{DIGEST}");
        let error = oci::signatures(&reference, DIGEST, &options(&addr))
            .await
            .expect_err("refused");
        assert!(matches!(error, OciError::BadSignatures { .. }), "{error:?}");
        assert!(error.to_string().contains(expected), "{error}");
        task.abort();
    }
    assert_eq!(sent.load(Ordering::Relaxed), 0, "no blob was read");
}

#[tokio::test]
async fn a_layer_is_never_fetched_from_the_urls_its_manifest_names() {
    // Another server on loopback, counting every request it gets.
    let elsewhere = Arc::new(AtomicU64::new(0));
    let counted = elsewhere.clone();
    let app = Router::new().fallback(move || {
        let counted = counted.clone();
        async move {
            counted.fetch_add(1, Ordering::Relaxed);
            vec![b'x'; 1000]
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let other = listener.local_addr().expect("address");
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": DIGEST, "size": 2},
        "layers": [{"mediaType": "application/wasm", "digest": DIGEST, "size": 1000,
                    "urls": [format!("http://{other}/layer")]}],
    }))
    .expect("JSON");
    let (addr, task) = serve(Hostile {
        manifest: Some(manifest),
        sent: Arc::new(AtomicU64::new(0)),
        no_blobs: true,
    })
    .await;
    let error = oci::pull(&format!("{addr}/policies/foreign:1"), &options(&addr))
        .await
        .expect_err("a layer the registry does not serve is not found");
    assert!(matches!(error, OciError::NotFound { .. }), "{error:?}");
    assert_eq!(
        elsewhere.load(Ordering::Relaxed),
        0,
        "a request went to the manifest's urls"
    );
    task.abort();
    server.abort();
}
