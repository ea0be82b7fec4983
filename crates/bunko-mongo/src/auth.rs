//! Authentication: SCRAM-SHA-256 (RFC 7677, as MongoDB runs it through `saslStart` and
//! `saslContinue`) against the same users as the HTTP API.
//!
//! - Server admins (configured with a password) get a random salt and 15,000 iterations
//!   (MongoDB's default) when the server starts; only the salted password is kept.
//! - `_users` users: CouchDB's `pbkdf2` record with `pbkdf2_prf: "sha256"` *is* SCRAM's
//!   SaltedPassword: `derived_key = PBKDF2-HMAC-SHA256(password, salt, iterations)` where
//!   `salt` is the stored hex text taken as bytes, so the server sends
//!   `s = base64(salt text)` and `i = iterations`. No password is ever needed.
//!   Older PBKDF2-SHA1 records cannot serve SCRAM-SHA-256 (the user must set the password
//!   again); MongoDB drivers also refuse fewer than 4,096 iterations.
//! - Clients SASLprep the password; CouchDB hashes the bytes as given. The two agree for
//!   every password SASLprep leaves unchanged (all of ASCII but control characters).
//!
//! An unknown user gets a well-formed exchange with a salt derived from the name, and then
//! `AuthenticationFailed`, so that user names cannot be probed.

use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bunko_engine::Engine;
use bunko_engine::security::UserCtx;
use bunko_engine::login::constant_time_eq;
use bunko_engine::users::{USER_PREFIX, USERS_DB};
use hmac::{Hmac, Mac};
use rand::Rng;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::MongoError;

pub const MECHANISM: &str = "SCRAM-SHA-256";
const ADMIN_ITERATIONS: u32 = 15_000;

/// What SCRAM needs of a user.
#[derive(Clone)]
struct Credentials {
    salt: Vec<u8>,
    iterations: u32,
    salted: Vec<u8>,
    ctx: Option<UserCtx>,
}

/// The users the MongoDB front end knows: server admins, then `_users`.
pub struct Auth {
    admins: HashMap<String, Credentials>,
    secret: [u8; 32],
}

impl Auth {
    pub fn new(admins: &[(String, String)]) -> Auth {
        let admins = admins
            .iter()
            .map(|(name, password)| {
                let salt = hex(&rand::rng().random::<[u8; 16]>()).into_bytes();
                let salted = salt_password(password, &salt, ADMIN_ITERATIONS);
                let ctx = Some(UserCtx::admin(name));
                (name.clone(), Credentials { salt, iterations: ADMIN_ITERATIONS, salted, ctx })
            })
            .collect();
        Auth { admins, secret: rand::rng().random() }
    }

    fn credentials(&self, engine: &Engine, name: &str) -> Credentials {
        if let Some(creds) = self.admins.get(name) {
            return creds.clone();
        }
        user_credentials(engine, name).unwrap_or_else(|| self.decoy(name))
    }

    /// Credentials no proof matches, with a stable salt per name.
    fn decoy(&self, name: &str) -> Credentials {
        let salt = hex(&hmac(&self.secret, name.as_bytes())[..16]).into_bytes();
        Credentials { salt, iterations: ADMIN_ITERATIONS, salted: Vec::new(), ctx: None }
    }
}

fn user_credentials(engine: &Engine, name: &str) -> Option<Credentials> {
    let users = engine.get_db(USERS_DB)?;
    let doc = users.get(&format!("{USER_PREFIX}{name}"), None).ok()?;
    let body: Value = serde_json::from_slice(&doc.body).ok()?;
    let field = |k: &str| body.get(k).and_then(Value::as_str);
    if field("password_scheme")? != "pbkdf2" || field("pbkdf2_prf")? != "sha256" {
        return None;
    }
    let salted = unhex(field("derived_key")?)?;
    let iterations = u32::try_from(body.get("iterations")?.as_u64()?).ok()?;
    let roles = body
        .get("roles")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(|v| v.as_str().map(str::to_string)).collect::<Vec<_>>());
    let ctx = UserCtx { name: Some(name.to_string()), roles: roles.unwrap_or_default() };
    Some(Credentials {
        salt: field("salt")?.as_bytes().to_vec(),
        iterations,
        salted,
        ctx: Some(ctx),
    })
}

/// One SCRAM conversation in progress on a connection.
pub struct Conversation {
    /// The user name the client claims.
    pub name: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    creds: Credentials,
    /// Set once the proof was verified; the next (empty) step finishes.
    verified: Option<UserCtx>,
}

/// What a step of the exchange answers.
pub struct Step {
    pub payload: Vec<u8>,
    pub done: bool,
    /// The authenticated user, once `done`.
    pub user: Option<UserCtx>,
}

impl Auth {
    /// `saslStart`: the client-first message; answers the server-first message.
    pub fn start(
        &self,
        engine: &Engine,
        mechanism: &str,
        payload: &[u8],
    ) -> Result<(Conversation, Vec<u8>), MongoError> {
        if mechanism != MECHANISM {
            return Err(MongoError::new(
                334,
                "MechanismUnavailable",
                format!("Received authentication for mechanism {mechanism} which is not enabled"),
            ));
        }
        let text = std::str::from_utf8(payload).map_err(|_| MongoError::auth_failed())?;
        let bare = text.strip_prefix("n,,").ok_or_else(|| {
            MongoError::bad_value("SCRAM: only 'n,,' (no channel binding, no authzid) is supported")
        })?;
        let mut name = None;
        let mut client_nonce = None;
        for attr in bare.split(',') {
            if let Some(v) = attr.strip_prefix("n=") {
                name = Some(v.replace("=2C", ",").replace("=3D", "="));
            } else if let Some(v) = attr.strip_prefix("r=") {
                client_nonce = Some(v.to_string());
            }
        }
        let (Some(name), Some(client_nonce)) = (name, client_nonce) else {
            return Err(MongoError::bad_value("SCRAM: malformed client-first message"));
        };
        let creds = self.credentials(engine, &name);
        let nonce = format!("{client_nonce}{}", STANDARD.encode(rand::rng().random::<[u8; 24]>()));
        let server_first =
            format!("r={nonce},s={},i={}", STANDARD.encode(&creds.salt), creds.iterations);
        let payload = server_first.clone().into_bytes();
        let conv = Conversation {
            name,
            client_first_bare: bare.to_string(),
            server_first,
            nonce,
            creds,
            verified: None,
        };
        Ok((conv, payload))
    }
}

impl Conversation {
    /// `saslContinue`: checks the client's proof and answers the server signature; with
    /// `skip_empty` (the driver's `skipEmptyExchange`) that already finishes.
    pub fn step(&mut self, payload: &[u8], skip_empty: bool) -> Result<Step, MongoError> {
        if let Some(user) = self.verified.take() {
            return Ok(Step { payload: Vec::new(), done: true, user: Some(user) });
        }
        let text = std::str::from_utf8(payload).map_err(|_| MongoError::auth_failed())?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(MongoError::auth_failed)?;
        let nonce_ok = without_proof.split(',').any(|a| a == format!("r={}", self.nonce));
        let binding_ok = without_proof.split(',').any(|a| a == "c=biws");
        let proof = STANDARD.decode(proof).map_err(|_| MongoError::auth_failed())?;
        let auth_message =
            format!("{},{},{}", self.client_first_bare, self.server_first, without_proof);
        let creds = &self.creds;
        let (Some(ctx), true, true) = (creds.ctx.clone(), nonce_ok, binding_ok) else {
            return Err(MongoError::auth_failed());
        };
        let client_key = hmac(&creds.salted, b"Client Key");
        let stored_key = Sha256::digest(&client_key);
        let signature = hmac(&stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(MongoError::auth_failed());
        }
        let recovered: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        if !constant_time_eq(&Sha256::digest(&recovered), &stored_key) {
            return Err(MongoError::auth_failed());
        }
        let server_key = hmac(&creds.salted, b"Server Key");
        let server_signature = hmac(&server_key, auth_message.as_bytes());
        let payload = format!("v={}", STANDARD.encode(server_signature)).into_bytes();
        if skip_empty {
            return Ok(Step { payload, done: true, user: Some(ctx) });
        }
        self.verified = Some(ctx);
        Ok(Step { payload, done: false, user: None })
    }
}

/// SCRAM's `Hi(Normalize(password), salt, i)`.
pub fn salt_password(password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    let prepped = stringprep::saslprep(password)
        .map(|p| p.into_owned())
        .unwrap_or_else(|_| password.to_string());
    let mut out = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(prepped.as_bytes(), salt, iterations, &mut out);
    out.to_vec()
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else { return Vec::new() };
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 example, run through the server side.
    #[test]
    fn rfc7677_exchange_verifies() -> Result<(), MongoError> {
        let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap_or_default();
        let salted = salt_password("pencil", &salt, 4096);
        let creds =
            Credentials { salt, iterations: 4096, salted, ctx: Some(UserCtx::admin("user")) };
        let mut conv = Conversation {
            client_first_bare: "n=user,r=rOprNGfwEbeRWgbNEkqO".to_string(),
            server_first: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".to_string(),
            nonce: "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".to_string(),
            creds,
            verified: None,
        };
        let final_msg = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        let step = conv.step(final_msg.as_bytes(), true)?;
        assert!(step.done);
        assert_eq!(step.payload, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        let bad = final_msg.replace("p=dH", "p=eH");
        assert_eq!(conv.step(bad.as_bytes(), true).err().map(|e| e.code), Some(18));
        Ok(())
    }
}
