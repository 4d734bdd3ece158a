//! Cosign keys: public keys (PEM `PUBLIC KEY`, ECDSA P-256) a module's
//! signature is checked with, and the private keys `radwasm policy sign`
//! signs with: cosign's own `cosign generate-key-pair` file (PEM `ENCRYPTED
//! SIGSTORE PRIVATE KEY`, or the older `ENCRYPTED COSIGN PRIVATE KEY`: PKCS#8
//! sealed with NaCl secretbox under a key derived with scrypt from a
//! password) or a plain PKCS#8 EC P-256 PEM (`PRIVATE KEY`).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use crypto_secretbox::aead::{Aead, KeyInit};
use crypto_secretbox::{Nonce, XSalsa20Poly1305};
use p256::ecdsa::{SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Why a key could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {detail}")]
pub struct KeyError {
    /// The key: a file, or `Secret NS/NAME key K`.
    pub what: String,
    pub detail: String,
}

fn key_error(what: &str, detail: impl Into<String>) -> KeyError {
    KeyError {
        what: what.to_string(),
        detail: detail.into(),
    }
}

/// One public key a signature may be made with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey {
    /// Where it came from (a file, or the key of the Secret or ConfigMap).
    pub name: String,
    /// `sha256:` of the key's DER SubjectPublicKeyInfo: names it in
    /// statuses and logs whatever it is called.
    pub fingerprint: String,
    pub key: VerifyingKey,
}

impl PublicKey {
    /// `name` (`sha256:…`), as statuses and messages name a key.
    pub fn describe(&self) -> String {
        format!("{} ({})", self.name, self.fingerprint)
    }
}

/// A PEM public key (`-----BEGIN PUBLIC KEY-----`, ECDSA P-256, as `cosign
/// generate-key-pair` writes `cosign.pub`).
pub fn public_key_from_pem(name: &str, pem: &str) -> Result<PublicKey, KeyError> {
    let key = VerifyingKey::from_public_key_pem(pem.trim()).map_err(|error| {
        key_error(
            name,
            format!(
                "not a PEM ECDSA P-256 public key (-----BEGIN PUBLIC KEY-----, as cosign \
                 generate-key-pair writes cosign.pub): {error}"
            ),
        )
    })?;
    Ok(PublicKey {
        name: name.to_string(),
        fingerprint: fingerprint(&key),
        key,
    })
}

/// `sha256:` of the DER SubjectPublicKeyInfo of `key`.
pub fn fingerprint(key: &VerifyingKey) -> String {
    match key.to_public_key_der() {
        Ok(der) => format!("sha256:{}", hex::encode(Sha256::digest(der.as_bytes()))),
        // A P-256 point always encodes; keep a name for it anyway.
        Err(_) => format!(
            "sha256:{}",
            hex::encode(Sha256::digest(key.to_encoded_point(false).as_bytes()))
        ),
    }
}

/// A private key file: cosign's encrypted key (with `password`, as cosign
/// reads it from `COSIGN_PASSWORD`) or a plain PKCS#8 EC P-256 PEM.
pub fn signing_key_from_pem(
    what: &str,
    pem: &str,
    password: Option<&str>,
) -> Result<SigningKey, KeyError> {
    let text = pem.trim();
    for label in [
        "ENCRYPTED SIGSTORE PRIVATE KEY",
        "ENCRYPTED COSIGN PRIVATE KEY",
    ] {
        let begin = format!("-----BEGIN {label}-----");
        if let Some(rest) = text.strip_prefix(&begin) {
            let end = format!("-----END {label}-----");
            let body = rest
                .strip_suffix(&end)
                .ok_or_else(|| key_error(what, format!("no {end} line")))?;
            let json = STANDARD
                .decode(body.split_whitespace().collect::<String>())
                .map_err(|error| key_error(what, format!("the PEM body is not base64: {error}")))?;
            let der = decrypt_cosign_key(what, &json, password.unwrap_or(""))?;
            return SigningKey::from_pkcs8_der(&der).map_err(|error| {
                key_error(
                    what,
                    format!("the decrypted key is not a PKCS#8 ECDSA P-256 key: {error}"),
                )
            });
        }
    }
    if text.starts_with("-----BEGIN PRIVATE KEY-----") {
        return SigningKey::from_pkcs8_pem(text).map_err(|error| {
            key_error(
                what,
                format!("not a PKCS#8 ECDSA P-256 private key: {error}"),
            )
        });
    }
    Err(key_error(
        what,
        "not a private key: expected cosign's ENCRYPTED SIGSTORE PRIVATE KEY (cosign \
         generate-key-pair) or a PKCS#8 EC P-256 PEM (-----BEGIN PRIVATE KEY-----)",
    ))
}

/// The JSON inside cosign's encrypted key PEM (go-securesystemslib's
/// `encrypted` format).
#[derive(Deserialize)]
struct SealedKey {
    kdf: Kdf,
    cipher: Cipher,
    ciphertext: String,
}

#[derive(Deserialize)]
struct Kdf {
    name: String,
    params: ScryptParams,
    salt: String,
}

#[derive(Deserialize)]
#[allow(non_snake_case)]
struct ScryptParams {
    N: u64,
    r: u32,
    p: u32,
}

#[derive(Deserialize)]
struct Cipher {
    name: String,
    nonce: String,
}

fn decrypt_cosign_key(what: &str, json: &[u8], password: &str) -> Result<Vec<u8>, KeyError> {
    let sealed: SealedKey = serde_json::from_slice(json)
        .map_err(|error| key_error(what, format!("not cosign's encrypted key JSON: {error}")))?;
    if sealed.kdf.name != "scrypt" || sealed.cipher.name != "nacl/secretbox" {
        return Err(key_error(
            what,
            format!(
                "encrypted with {} and {}; only scrypt and nacl/secretbox (cosign's) are read",
                sealed.kdf.name, sealed.cipher.name
            ),
        ));
    }
    let decode = |field: &str, text: &str| {
        STANDARD
            .decode(text)
            .map_err(|error| key_error(what, format!("{field} is not base64: {error}")))
    };
    let salt = decode("kdf.salt", &sealed.kdf.salt)?;
    let nonce = decode("cipher.nonce", &sealed.cipher.nonce)?;
    let ciphertext = decode("ciphertext", &sealed.ciphertext)?;
    let n = sealed.kdf.params.N;
    // cosign writes N = 32768; more than 2^20 would take seconds and GiBs.
    if !n.is_power_of_two() || !(2..=1 << 20).contains(&n) {
        return Err(key_error(
            what,
            format!("scrypt N = {n} is not a power of two up to 2^20"),
        ));
    }
    let params = scrypt::Params::new(
        n.trailing_zeros() as u8,
        sealed.kdf.params.r,
        sealed.kdf.params.p,
        32,
    )
    .map_err(|error| key_error(what, format!("scrypt parameters: {error}")))?;
    let mut key = [0u8; 32];
    scrypt::scrypt(password.as_bytes(), &salt, &params, &mut key)
        .map_err(|error| key_error(what, format!("scrypt: {error}")))?;
    if nonce.len() != 24 {
        return Err(key_error(what, "the secretbox nonce is not 24 bytes"));
    }
    XSalsa20Poly1305::new(&key.into())
        .decrypt(Nonce::from_slice(&nonce), ciphertext.as_slice())
        .map_err(|_| {
            key_error(
                what,
                "cannot decrypt the key: wrong password (set COSIGN_PASSWORD) or a damaged file",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::pkcs8::{EncodePrivateKey, LineEnding};

    fn sealed(der: &[u8], password: &str) -> String {
        let salt = [7u8; 32];
        let nonce = [9u8; 24];
        let params = scrypt::Params::new(10, 8, 1, 32).expect("params");
        let mut key = [0u8; 32];
        scrypt::scrypt(password.as_bytes(), &salt, &params, &mut key).expect("scrypt");
        let ciphertext = XSalsa20Poly1305::new(&key.into())
            .encrypt(Nonce::from_slice(&nonce), der)
            .expect("seal");
        let json = serde_json::json!({
            "kdf": {"name": "scrypt", "params": {"N": 1024, "r": 8, "p": 1}, "salt": STANDARD.encode(salt)},
            "cipher": {"name": "nacl/secretbox", "nonce": STANDARD.encode(nonce)},
            "ciphertext": STANDARD.encode(ciphertext),
        });
        format!(
            "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n{}\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n",
            STANDARD.encode(json.to_string())
        )
    }

    #[test]
    fn an_encrypted_cosign_key_opens_with_its_password_only() {
        let signing = SigningKey::from_slice(&[3u8; 32]).expect("key");
        let der = signing.to_pkcs8_der().expect("der");
        let pem = sealed(der.as_bytes(), "s3cret");
        let opened = signing_key_from_pem("cosign.key", &pem, Some("s3cret")).expect("opens");
        assert_eq!(opened.verifying_key(), signing.verifying_key());
        let error = signing_key_from_pem("cosign.key", &pem, Some("wrong")).unwrap_err();
        assert!(error.to_string().contains("wrong password"), "{error}");
    }

    #[test]
    fn plain_pkcs8_and_public_keys_are_read_and_garbage_is_named() {
        let signing = SigningKey::from_slice(&[5u8; 32]).expect("key");
        let pem = signing.to_pkcs8_pem(LineEnding::LF).expect("pem");
        let opened = signing_key_from_pem("k.pem", &pem, None).expect("plain");
        let public = opened
            .verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .expect("pub");
        let key = public_key_from_pem("cosign.pub", &public).expect("public");
        assert!(key.fingerprint.starts_with("sha256:"));
        let error = public_key_from_pem("keys/bad.pub", "hello").unwrap_err();
        assert!(
            error.to_string().starts_with("keys/bad.pub: not a PEM"),
            "{error}"
        );
        let error = signing_key_from_pem("x", "hello", None).unwrap_err();
        assert!(error.to_string().contains("not a private key"), "{error}");
    }
}
