//! SCRAM-SHA-256 and SCRAM-SHA-1 credentials (RFC 5802 §3, RFC 7677) for the MongoDB front
//! end, kept in user documents beside CouchDB's PBKDF2 fields.
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
//!
//! SCRAM-SHA-1, for old drivers, is MongoDB's variant: its password is not the user's but
//! `hex(MD5("<user>:mongo:<password>"))` (and it is not `SASLprep`ed), so it can only be
//! derived where the password is seen; it is kept as `scram_sha_1` with the same four fields
//! (HMAC-SHA-1 keys, 10,000 rounds: MongoDB's default). [`Mechanism`] names the two.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use md5::Md5;
use rand::Rng;
use serde_json::{Value, json};
use sha1::Sha1;
use sha2::{Digest, Sha256};

/// The user-document field holding the SCRAM-SHA-256 credential.
pub const FIELD: &str = "scram_sha_256";

/// The user-document field holding the SCRAM-SHA-1 credential.
pub const FIELD_SHA1: &str = "scram_sha_1";

/// PBKDF2 rounds of a new credential: MongoDB's default for SCRAM-SHA-256.
pub const ITERATIONS: u32 = 15_000;

/// PBKDF2 rounds of a new SCRAM-SHA-1 credential: MongoDB's default.
pub const ITERATIONS_SHA1: u32 = 10_000;

/// A SCRAM mechanism: which hash its keys and proofs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Sha1,
    Sha256,
}

impl Mechanism {
    /// Both, strongest first (the order MongoDB lists them in).
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha256, Mechanism::Sha1];

    /// MongoDB's name (`SCRAM-SHA-256`).
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha1 => "SCRAM-SHA-1",
            Mechanism::Sha256 => "SCRAM-SHA-256",
        }
    }

    /// The mechanism MongoDB names `name`.
    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The user-document field of its credential.
    pub fn field(self) -> &'static str {
        match self {
            Mechanism::Sha1 => FIELD_SHA1,
            Mechanism::Sha256 => FIELD,
        }
    }

    /// PBKDF2 rounds of a new credential.
    pub fn iterations(self) -> u32 {
        match self {
            Mechanism::Sha1 => ITERATIONS_SHA1,
            Mechanism::Sha256 => ITERATIONS,
        }
    }

    /// `HMAC(key, data)`.
    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => hmac_sha1(key, data),
            Mechanism::Sha256 => hmac(key, data),
        }
    }

    /// `H(data)`.
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => Sha1::digest(data).to_vec(),
            Mechanism::Sha256 => Sha256::digest(data).to_vec(),
        }
    }

    /// The credential of `user`'s `password` with `salt`.
    pub fn derive(self, user: &str, password: &str, salt: &[u8], iterations: u32) -> ScramKeys {
        match self {
            Mechanism::Sha256 => ScramKeys::derive(password, salt, iterations),
            Mechanism::Sha1 => {
                let digest = hex::encode(Md5::digest(format!("{user}:mongo:{password}")));
                let mut salted = [0u8; 20];
                pbkdf2::pbkdf2_hmac::<Sha1>(digest.as_bytes(), salt, iterations, &mut salted);
                let stored_key = Sha1::digest(hmac_sha1(&salted, b"Client Key")).to_vec();
                let server_key = hmac_sha1(&salted, b"Server Key");
                ScramKeys { salt: salt.to_vec(), iterations, stored_key, server_key }
            }
        }
    }

    /// A new credential of `user`'s `password` with a random salt.
    pub fn new_keys(self, user: &str, password: &str) -> ScramKeys {
        self.derive(user, password, &rand::rng().random::<[u8; 16]>(), self.iterations())
    }
}

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

    /// The SCRAM-SHA-256 credential stored in a user document, if it has one.
    pub fn from_user_doc(body: &Value) -> Option<Self> {
        Self::from_user_doc_as(body, Mechanism::Sha256)
    }

    /// The credential of `mechanism` stored in a user document, if it has one.
    pub fn from_user_doc_as(body: &Value, mechanism: Mechanism) -> Option<Self> {
        let scram = body.get(mechanism.field())?;
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

/// HMAC-SHA-1 of `data` under `key`.
fn hmac_sha1(key: &[u8], data: &[u8]) -> Vec<u8> {
    let Ok(mut mac) = Hmac::<Sha1>::new_from_slice(key) else { return Vec::new() };
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

    /// The SCRAM-SHA-1 example of MongoDB's authentication specification (user "user",
    /// password "pencil", 10,000 rounds; the password digested with the user name): the
    /// stored keys accept its proof and produce its server signature.
    #[test]
    fn sha1_keys_check_mongodb_s_example() -> Result<(), base64::DecodeError> {
        let salt = STANDARD.decode("rQ9ZY3MntBeuP3E1TDVC4w==")?;
        let sha1 = Mechanism::Sha1;
        let keys = sha1.derive("user", "pencil", &salt, 10_000);
        let nonce = "fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE";
        let auth_message = format!(
            "n=user,r=fyko+d2lbbFgONRv9qkxdawL,r={nonce},s=rQ9ZY3MntBeuP3E1TDVC4w==,i=10000,c=biws,r={nonce}"
        );
        let proof = STANDARD.decode("MC2T8BvbmWRckDw8oWl5IVghwCY=")?;
        let signature = sha1.hmac(&keys.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        assert_eq!(sha1.hash(&client_key), keys.stored_key);
        let server = STANDARD.encode(sha1.hmac(&keys.server_key, auth_message.as_bytes()));
        assert_eq!(server, "UMWeI25JD1yNYZRMpZ4VHvhZ9e0=");
        let doc = json!({FIELD_SHA1: keys.to_json()});
        assert_eq!(ScramKeys::from_user_doc_as(&doc, sha1), Some(keys));
        assert_eq!(ScramKeys::from_user_doc(&doc), None);
        Ok(())
    }
}
