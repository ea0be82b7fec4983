//! Documents into QuickJS: a `serde_json::Value`, or JSON text read by `serde_json`'s
//! streaming parser ([`json_to_frozen`]), becomes a deep-frozen JavaScript value.
//!
//! CouchDB passes each document to the map functions deep-frozen (views.js `mapDoc`
//! calls `Couch.recursivelySeal`). Freezing a parsed document from JavaScript costs more
//! than parsing it, so documents are built here already frozen: object members are
//! defined enumerable, non-writable and non-configurable (what `Object.freeze` leaves
//! them as) and the object is then made non-extensible; arrays are filled and then
//! frozen. Numbers become doubles, as `JSON.parse` would make them. Measured in
//! `examples/map_speed.rs`: this is about twice as fast as `JSON.parse` plus a JavaScript
//! deep freeze, and faster than `JSON.parse` alone when the document is a `Value` already.

use rquickjs::object::Property;
use rquickjs::{Array, Ctx, Function, Object, Value as JsValue};
use serde_json::Value;

/// The host's `Object.freeze` and `Object.preventExtensions`, captured before user code
/// ran.
pub(crate) struct Freezer<'js> {
    pub(crate) freeze: Function<'js>,
    pub(crate) prevent_extensions: Function<'js>,
}

/// Builds `value` as a frozen JavaScript value.
pub(crate) fn to_frozen<'js>(
    ctx: &Ctx<'js>,
    freezer: &Freezer<'js>,
    value: &Value,
) -> rquickjs::Result<JsValue<'js>> {
    Ok(match value {
        Value::Null => JsValue::new_null(ctx.clone()),
        Value::Bool(b) => JsValue::new_bool(ctx.clone(), *b),
        Value::Number(n) => JsValue::new_float(ctx.clone(), n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => rquickjs::String::from_str(ctx.clone(), s)?.into_value(),
        Value::Array(items) => {
            let array = Array::new(ctx.clone())?;
            for (i, item) in items.iter().enumerate() {
                array.set(i, to_frozen(ctx, freezer, item)?)?;
            }
            freezer.freeze.call::<_, ()>((array.clone(),))?;
            array.into_value()
        }
        Value::Object(members) => {
            let object = Object::new(ctx.clone())?;
            for (key, item) in members {
                object.prop(
                    key.as_str(),
                    Property::from(to_frozen(ctx, freezer, item)?).enumerable(),
                )?;
            }
            freezer.prevent_extensions.call::<_, ()>((object.clone(),))?;
            object.into_value()
        }
    })
}

/// The key under which `serde_json` (with its `arbitrary_precision` feature, on in this
/// workspace) hands a number to a visitor: a one-member map holding the number's text.
/// `serde_json::Value`'s own visitor recognises it the same way.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Builds the JSON text `text` as a frozen JavaScript value, read straight from the text
/// into QuickJS: no `serde_json::Value` in between. The result equals
/// `to_frozen(&serde_json::from_str(text)?)` except for an object with a member named
/// twice, which this refuses (`Err`) where `Value` keeps the last: callers fall back to
/// [`to_frozen`] then.
pub(crate) fn json_to_frozen<'js>(
    ctx: &Ctx<'js>,
    freezer: &Freezer<'js>,
    text: &str,
) -> Result<JsValue<'js>, serde_json::Error> {
    let mut reader = serde_json::Deserializer::from_str(text);
    let value = serde::de::DeserializeSeed::deserialize(Frozen { ctx, freezer }, &mut reader)?;
    reader.end()?;
    Ok(value)
}

/// [`json_to_frozen`]'s visitor: one JavaScript value per JSON value.
#[derive(Clone, Copy)]
struct Frozen<'a, 'js> {
    ctx: &'a Ctx<'js>,
    freezer: &'a Freezer<'js>,
}

impl<'de, 'js> serde::de::DeserializeSeed<'de> for Frozen<'_, 'js> {
    type Value = JsValue<'js>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// A JavaScript failure while building, as a deserialisation error.
fn js<E: serde::de::Error>(error: rquickjs::Error) -> E {
    E::custom(error)
}

impl<'de, 'js> serde::de::Visitor<'de> for Frozen<'_, 'js> {
    type Value = JsValue<'js>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(JsValue::new_null(self.ctx.clone()))
    }

    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(JsValue::new_bool(self.ctx.clone(), b))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
        Ok(JsValue::new_float(self.ctx.clone(), n as f64))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
        Ok(JsValue::new_float(self.ctx.clone(), n as f64))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Self::Value, E> {
        Ok(JsValue::new_float(self.ctx.clone(), n))
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(rquickjs::String::from_str(self.ctx.clone(), s).map_err(js)?.into_value())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let array = Array::new(self.ctx.clone()).map_err(js)?;
        let mut i = 0;
        while let Some(item) = seq.next_element_seed(self)? {
            array.set(i, item).map_err(js)?;
            i += 1;
        }
        self.freezer.freeze.call::<_, ()>((array.clone(),)).map_err(js)?;
        Ok(array.into_value())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let object = Object::new(self.ctx.clone()).map_err(js)?;
        let mut first = true;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if std::mem::take(&mut first) && key.0 == NUMBER_TOKEN {
                // As `Number::as_f64`: a number too large for a double is not finite.
                let text: Key<'de> = map.next_value()?;
                let n = text.0.parse::<f64>().ok().filter(|n| n.is_finite());
                return Ok(JsValue::new_float(self.ctx.clone(), n.unwrap_or(f64::NAN)));
            }
            let item = map.next_value_seed(self)?;
            object.prop(&*key.0, Property::from(item).enumerable()).map_err(js)?;
        }
        self.freezer.prevent_extensions.call::<_, ()>((object.clone(),)).map_err(js)?;
        Ok(object.into_value())
    }
}

/// A member name or number text, borrowed from the JSON text unless it had escapes.
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(s.into()))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(s.to_owned().into()))
            }
            fn visit_string<E>(self, s: String) -> Result<Key<'de>, E> {
                Ok(Key(s.into()))
            }
        }
        d.deserialize_str(Visit)
    }
}
