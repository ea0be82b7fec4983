//! SCRAM-SHA-256 credentials (RFC 5802 §3, RFC 7677) for the MongoDB front end, kept in user
//! documents beside CouchDB's PBKDF2 fields.
//!
//! A SCRAM server needs `StoredKey = H(HMAC(SaltedPassword, "Client Key"))` and
//! `ServerKey = HMAC(SaltedPassword, "Server Key")`: enough to check a client's proof, not
//! enough to make one. CouchDB's `derived_key` would serve as `SaltedPassword` directly, but
//! then whoever reads a user document (a backup, a replica, the `_users` admin) could log in
//! over MongoDB without the password. So a password gets its own SCRAM salt and keys,
//! derived when it is set (the `SASLprep`ed password, as drivers send it) and stored as
//! `scram_sha_256: {salt, iterations, stored_key, server_key}` (base64). A user document
//! without them (written by CouchDB, or before this field existed) cannot log in over MongoDB
//! until its password is set again.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use rand::Rng;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The user-document field holding the credential.
pub const FIELD: &str = "scram_sha_256";

/// PBKDF2 rounds of a new credential: MongoDB's default for SCRAM-SHA-256.
pub const ITERATIONS: u32 = 15_000;

/// What a server keeps to check SCRAM-SHA-256 proofs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramKeys {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl ScramKeys {
    /// The credential of `password` with `salt`.
    pub fn derive(password: &str, salt: &[u8], iterations: u32) -> Self {
        let prepped = stringprep::saslprep(password)
            .map(|p| p.into_owned())
            .unwrap_or_else(|_| password.to_string());
        let mut salted = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<Sha256>(prepped.as_bytes(), salt, iterations, &mut salted);
        let stored_key = Sha256::digest(hmac(&salted, b"Client Key")).to_vec();
        let server_key = hmac(&salted, b"Server Key");
        Self { salt: salt.to_vec(), iterations, stored_key, server_key }
    }

    /// A new credential of `password` with a random salt.
    pub fn new(password: &str) -> Self {
        Self::derive(password, &rand::rng().random::<[u8; 16]>(), ITERATIONS)
    }

    /// The credential stored in a user document, if it has one.
    pub fn from_user_doc(body: &Value) -> Option<Self> {
        let scram = body.get(FIELD)?;
        let bytes = |name: &str| STANDARD.decode(scram.get(name)?.as_str()?).ok();
        Some(Self {
            salt: bytes("salt")?,
            iterations: u32::try_from(scram.get("iterations")?.as_u64()?).ok()?,
            stored_key: bytes("stored_key")?,
            server_key: bytes("server_key")?,
        })
    }

    /// The credential as stored in a user document.
    pub fn to_json(&self) -> Value {
        json!({
            "salt": STANDARD.encode(&self.salt),
            "iterations": self.iterations,
            "stored_key": STANDARD.encode(&self.stored_key),
            "server_key": STANDARD.encode(&self.server_key),
        })
    }
}

/// HMAC-SHA-256 of `data` under `key`.
pub fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else { return Vec::new() };
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 §3's exchange (user "user", password "pencil", 4096 rounds): the stored keys
    /// accept its proof and produce its server signature.
    #[test]
    fn keys_check_the_rfc_7677_exchange() -> Result<(), base64::DecodeError> {
        let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==")?;
        let keys = ScramKeys::derive("pencil", &salt, 4096);
        let nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let auth_message = format!(
            "n=user,r=rOprNGfwEbeRWgbNEkqO,r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r={nonce}"
        );
        let proof = STANDARD.decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")?;
        let signature = hmac(&keys.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        assert_eq!(Sha256::digest(&client_key).to_vec(), keys.stored_key);
        let server = STANDARD.encode(hmac(&keys.server_key, auth_message.as_bytes()));
        assert_eq!(server, "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        assert_eq!(ScramKeys::from_user_doc(&json!({FIELD: keys.to_json()})), Some(keys));
        Ok(())
    }
}
