//! Unit tests of the operators that need no filter; the documented MongoDB examples with
//! filters (`$pull` conditions, positional paths) run in `bunko-mongo`'s update golden test.

use bson::{Bson, Document, doc};

use super::*;

fn run(doc: Document, update: Document) -> Result<Document, UpdateError> {
    Update::parse(&update)?.apply(&doc, false)
}

#[test]
fn operators_update_as_mongodb() -> Result<(), UpdateError> {
    let d = doc! {"_id": 1, "n": 1, "big": i32::MAX, "f": 1.5, "a": {"b": 1}, "arr": [1, 2]};
    let out = run(
        d.clone(),
        doc! {"$set": {"z": 1, "a.c": "x", "arr.3": 9}, "$inc": {"n": 2, "big": 1, "f": 1, "new": 5_i64}, "$unset": {"a.b": ""}},
    )?;
    assert_eq!(
        out,
        doc! {"_id": 1, "n": 3, "big": i64::from(i32::MAX) + 1, "f": 2.5, "a": {"c": "x"}, "arr": [1, 2, null, 9], "new": 5_i64, "z": 1}
    );
    let replaced = run(d.clone(), doc! {"x": 1})?;
    assert_eq!(replaced, doc! {"_id": 1, "x": 1});
    Ok(())
}

#[test]
fn arithmetic_keeps_mongodb_types() -> Result<(), UpdateError> {
    let d = doc! {"_id": 1, "i": 3, "l": 4_i64, "f": 1.5, "m": 10, "b": 13};
    let out = run(
        d,
        doc! {"$mul": {"i": 2, "l": 2, "f": 2, "new": 5_i64}, "$min": {"m": 5, "lo": 1}, "$max": {"i2": 7}, "$bit": {"b": {"and": 10, "or": 1}}},
    )?;
    assert_eq!(
        out,
        doc! {"_id": 1, "i": 6, "l": 8_i64, "f": 3.0, "m": 5, "b": 9, "i2": 7, "lo": 1, "new": 0_i64}
    );
    let max = run(
        doc! {"_id": 1, "d": bson::DateTime::from_millis(5)},
        doc! {"$max": {"d": bson::DateTime::from_millis(3)}},
    )?;
    assert_eq!(max.get("d"), Some(&Bson::DateTime(bson::DateTime::from_millis(5))));
    Ok(())
}

#[test]
fn push_each_sort_slice_keeps_newest() -> Result<(), UpdateError> {
    let d = doc! {"_id": 1, "reviews": [{"r": 1, "at": 1}, {"r": 2, "at": 5}]};
    let out = run(
        d,
        doc! {"$push": {"reviews": {"$each": [{"r": 3, "at": 9}], "$sort": {"at": -1}, "$slice": 2}}},
    )?;
    assert_eq!(out, doc! {"_id": 1, "reviews": [{"r": 3, "at": 9}, {"r": 2, "at": 5}]});
    let positioned = run(
        doc! {"_id": 1, "a": [1, 2, 3]},
        doc! {"$push": {"a": {"$each": [8, 9], "$position": -1}}, "$addToSet": {"s": {"$each": [1, 1.0, 2]}}},
    )?;
    assert_eq!(positioned, doc! {"_id": 1, "a": [1, 2, 8, 9, 3], "s": [1, 2]});
    let popped = run(
        doc! {"_id": 1, "a": [1, 2, 3], "b": [1, 2]},
        doc! {"$pop": {"a": -1, "b": 1}, "$pullAll": {"c": [1]}},
    )?;
    assert_eq!(popped, doc! {"_id": 1, "a": [2, 3], "b": [1]});
    Ok(())
}

#[test]
fn rename_and_current_date() -> Result<(), UpdateError> {
    let out = run(
        doc! {"_id": 1, "a": {"b": 1}, "c": 2},
        doc! {"$rename": {"a.b": "x.y", "c": "d", "zz": "q"}},
    )?;
    assert_eq!(out, doc! {"_id": 1, "a": {}, "x": {"y": 1}, "d": 2});
    let dated =
        run(doc! {"_id": 1}, doc! {"$currentDate": {"d": true, "t": {"$type": "timestamp"}}})?;
    assert!(matches!(dated.get("d"), Some(Bson::DateTime(_))));
    assert!(matches!(dated.get("t"), Some(Bson::Timestamp(_))));
    Ok(())
}

#[test]
fn errors_carry_mongodb_codes() {
    let d = doc! {"_id": 1, "s": "text", "n": 1, "arr": [{"x": 1}]};
    let code = |u: Document| run(d.clone(), u).err().map(|e| (e.code, e.message));
    assert_eq!(code(doc! {"$set": {"a": 1}, "$inc": {"a": 1}}).map(|e| e.0), Some(40));
    assert_eq!(
        code(doc! {"$set": {"a.b": 1}, "$unset": {"a": 1}}),
        Some((40, "Updating the path 'a.b' would create a conflict at 'a'".into()))
    );
    assert_eq!(
        code(doc! {"$inc": {"s": 1}}),
        Some((14, "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 's' of non-numeric type string".into()))
    );
    assert_eq!(
        code(doc! {"$inc": {"n": "x"}}),
        Some((14, "Cannot increment with non-numeric argument: {n: \"x\"}".into()))
    );
    assert_eq!(code(doc! {"$set": {"_id": 2}}).map(|e| e.0), Some(66));
    assert_eq!(code(doc! {"$set": {"n.x": 2}}).map(|e| e.0), Some(28));
    assert_eq!(code(doc! {"$foo": {"n": 2}}).map(|e| e.0), Some(9));
    assert_eq!(code(doc! {"$set": 5}).map(|e| e.0), Some(9));
    assert_eq!(code(doc! {"_id": 2, "x": 1}).map(|e| e.0), Some(66));
    assert_eq!(
        code(doc! {"$push": {"s": 1}}),
        Some((
            2,
            "The field 's' must be an array but is of type string in document {_id: 1}".into()
        ))
    );
    assert_eq!(code(doc! {"$pop": {"a": 2}}).map(|e| e.0), Some(9));
    assert_eq!(code(doc! {"$rename": {"a": "a"}}).map(|e| e.0), Some(2));
    assert_eq!(code(doc! {"$rename": {"arr.x": "y"}}).map(|e| e.0), Some(2));
    assert_eq!(code(doc! {"$rename": {"n": "m"}, "$set": {"m": 1}}).map(|e| e.0), Some(40));
    assert_eq!(
        code(doc! {"$set": {"arr.$.x": 1}}),
        Some((2, "The positional operator did not find the match needed from the query.".into()))
    );
    assert_eq!(code(doc! {"$set": {"arr.$[i].x": 1}}).map(|e| e.0), Some(2));
    assert_eq!(code(doc! {"$set": {"$.x": 1}}).map(|e| e.0), Some(2));
    assert_eq!(code(doc! {"$set": {"a.$x": 1}}).map(|e| e.0), Some(52));
    assert_eq!(code(doc! {"$bit": {"n": {"nand": 1}}}).map(|e| e.0), Some(2));
    assert_eq!(code(doc! {"$currentDate": {"n": 1}}).map(|e| e.0), Some(2));
    let far = doc! {"_id": 1, "arr": [1]};
    let err = run(far, doc! {"$set": {"arr.99999999": 1}}).err().map(|e| e.code);
    assert_eq!(err, Some(2));
}

#[test]
fn all_positional_updates_every_element() -> Result<(), UpdateError> {
    let out = run(doc! {"_id": 1, "g": [1, 2, 3]}, doc! {"$inc": {"g.$[]": 10}})?;
    assert_eq!(out, doc! {"_id": 1, "g": [11, 12, 13]});
    let missing = run(doc! {"_id": 1}, doc! {"$set": {"g.$[]": 1}}).err().map(|e| e.message);
    assert_eq!(
        missing.as_deref(),
        Some("The path 'g' must exist in the document in order to apply array updates.")
    );
    Ok(())
}
