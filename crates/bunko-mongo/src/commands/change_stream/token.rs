//! Resume tokens: `{_data: "<hex>"}`, opaque to drivers. A token holds the stream's
//! position in every engine database it reads (the database's numeric id, which survives
//! restarts, and the last seq read there) and the highest database id known when it was
//! made: a database with a higher id was created later, so a resumed stream reads it from
//! its start. A token that ends an invalidated stream carries a mark, so that `resumeAfter`
//! can refuse it and `startAfter` can start after it.
//!
//! Layout (hex of): version byte `0x82`, horizon (8 bytes big-endian), a flag byte (`1`:
//! invalidate), then `(db id, seq)` pairs of 8 bytes each.

use std::collections::BTreeMap;

use bson::{Bson, Document, doc};

use crate::error::MongoError;

const VERSION: u8 = 0x82;

/// A decoded token.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Token {
    pub horizon: u64,
    pub invalidate: bool,
    /// Engine database id → last seq read.
    pub seqs: BTreeMap<u64, u64>,
}

impl Token {
    pub fn to_doc(&self) -> Document {
        let mut bytes = vec![VERSION];
        bytes.extend(self.horizon.to_be_bytes());
        bytes.push(u8::from(self.invalidate));
        for (db, seq) in &self.seqs {
            bytes.extend(db.to_be_bytes());
            bytes.extend(seq.to_be_bytes());
        }
        let hex: String = bytes.iter().map(|b| format!("{b:02X}")).collect();
        doc! {"_data": hex}
    }

    /// Reads `{_data: "<hex>"}` as written by [`Token::to_doc`].
    pub fn parse(value: &Bson) -> Result<Token, MongoError> {
        let bad = || MongoError::bad_value("Invalid resume token: not a token this server made");
        let Bson::Document(doc) = value else { return Err(bad()) };
        let hex = doc.get_str("_data").map_err(|_| bad())?;
        if hex.len() % 2 != 0 || !hex.is_ascii() {
            return Err(bad());
        }
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
            .collect::<Option<_>>()
            .ok_or_else(bad)?;
        let (head, rest) = bytes.split_at_checked(10).ok_or_else(bad)?;
        if head.first() != Some(&VERSION) || rest.len() % 16 != 0 {
            return Err(bad());
        }
        let word = |b: &[u8]| b.try_into().map(u64::from_be_bytes).map_err(|_| bad());
        let horizon = word(head.get(1..9).ok_or_else(bad)?)?;
        let invalidate = head.get(9) == Some(&1);
        let mut seqs = BTreeMap::new();
        for pair in rest.chunks_exact(16) {
            let (db, seq) = pair.split_at(8);
            seqs.insert(word(db)?, word(seq)?);
        }
        Ok(Token { horizon, invalidate, seqs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_read_back_and_refuse_foreign_data() -> Result<(), MongoError> {
        let token = Token { horizon: 9, invalidate: true, seqs: BTreeMap::from([(3, 7), (9, 0)]) };
        let doc = token.to_doc();
        assert_eq!(Token::parse(&Bson::Document(doc))?, token);
        for data in ["", "82", "8200", "zz", "826400000000000000000000"] {
            assert!(Token::parse(&Bson::Document(doc! {"_data": data})).is_err(), "{data}");
        }
        assert!(Token::parse(&Bson::Int32(1)).is_err());
        Ok(())
    }
}
