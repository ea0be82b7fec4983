use serde_json::json;

use super::entries::{Options, entries};
use super::*;

fn lucene(selector: Value) -> String {
    Text::from_selector(&Selector::parse(&selector).unwrap()).lucene()
}

#[test]
fn selectors_become_couchdbs_lucene_queries() {
    assert_eq!(lucene(json!({"age": 22})), "(age_3anumber:22)");
    assert_eq!(lucene(json!({"name.first": "Stephanie"})), "(name.first_3astring:\"Stephanie\")");
    assert_eq!(lucene(json!({"$text": "Ramona"})), "($default:\"Ramona\")");
    assert_eq!(lucene(json!({"age": {"$lt": 23}})), "(age_3anumber:[* TO 23})");
    assert_eq!(
        lucene(json!({"company": {"$gt": "Zialactic"}})),
        "(company_3astring:{\"Zialactic\" TO u0x10FFFF])"
    );
    assert_eq!(
        lucene(json!({"a": {"$exists": true}})),
        "(($fieldnames:a_3a*) OR ($fieldnames:a.*))"
    );
    assert_eq!(
        lucene(json!({"a": {"$exists": false}})),
        "($fieldnames:/.*/  AND NOT ((($fieldnames:a_3a*) OR ($fieldnames:a.*))))"
    );
    assert_eq!(
        lucene(json!({"age": {"$ne": 22}})),
        "((($fieldnames:age_3a*) OR ($fieldnames:age.*)) AND NOT ((age_3anumber:22)))"
    );
    assert_eq!(lucene(json!({"v": "a b"})), "(v_3astring:\"a\\ b\")");
    assert_eq!(lucene(json!({"$or": []})), "");
}

#[test]
fn numeric_segments_also_search_any_element() {
    assert_eq!(
        lucene(json!({"favorites.1": "Python"})),
        "((favorites.1_3astring:\"Python\") OR (favorites._5b_5d_3astring:\"Python\"))"
    );
    let text = Text::from_selector(&Selector::parse(&json!({"favorites.1": "Python"})).unwrap());
    let fields: Vec<String> = text.indexable_fields().into_iter().collect();
    assert_eq!(fields, ["favorites.1:string"]);
}

#[test]
fn indexable_fields_name_typed_columns() {
    let s = json!({"$text": "x", "a": true, "b": 42, "c": {"$regex": ".*"}});
    let text = Text::from_selector(&Selector::parse(&s).unwrap());
    let fields: Vec<String> = text.indexable_fields().into_iter().collect();
    assert_eq!(fields, ["$default", "a:boolean", "b:number", "c:string"]);
}

#[test]
fn sort_fields_take_their_type_from_the_suffix_or_the_selector() {
    let s = Selector::parse(&json!({"age": {"$gt": 0}, "email": {"$gt": null}})).unwrap();
    assert_eq!(sort_field("age", &s).unwrap(), ("age_3anumber".to_string(), Kind::Number));
    assert_eq!(sort_field("n.last:string", &s).unwrap().0, "n.last_3astring");
    assert!(matches!(sort_field("email", &s), Err(Error::TextSortError(_))));
}

#[test]
fn documents_index_typed_fields_names_and_default_text() {
    let options =
        Options { fields: None, default_field: true, array_lengths: true, partial_filter: None };
    let doc = json!({"_id": "a", "n": {"f": "Jo"}, "t": [1, null], "m": false});
    let got = entries(&doc, &options);
    let has = |name: &str, v: Value| got.contains(&(name.to_string(), v));
    assert!(has("n.f_3astring", json!("Jo")));
    assert!(has("t._5b_5d_3alength", json!(2)));
    assert!(has("t._5b_5d_3anumber", json!(1)));
    assert!(has("t._5b_5d_3anull", json!(true)));
    assert!(has("m_3aboolean", json!(false)));
    assert!(has("$default", json!("Jo")));
    assert!(has("$fieldnames", json!("_5fid_3astring")));
    assert!(entries(&json!({"_id": "_design/x", "a": 1}), &options).is_empty());
}
