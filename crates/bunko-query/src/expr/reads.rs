//! Which top-level fields of the document an expression reads, so that a stage can be fed
//! only those (`$group` over a collection converts just the fields its key and accumulators
//! name). `None` when it may read the whole document: `$$ROOT`/`$$CURRENT` without a path,
//! the operators that read `$$CURRENT` implicitly (`$getField`, `$setField`,
//! `$unsetField`) and `{$meta: "sortKey"}`.

use super::accum::AccSpec;
use super::{Args, Expr};

impl Expr {
    /// Adds the top-level fields `self` reads to `out`; `false` if it may read any field.
    pub fn reads(&self, out: &mut Vec<String>) -> bool {
        self.visit(&mut |path| add(out, path.first()))
    }

    /// Adds the whole (dotted) paths `self` reads to `out`; `false` if it may read any
    /// field (what a covering index must hold).
    pub fn paths(&self, out: &mut Vec<String>) -> bool {
        self.visit(&mut |path| add(out, (!path.is_empty()).then(|| path.join(".")).as_ref()))
    }

    /// Calls `seen` with every field path `self` reads; `false` if it may read any field.
    fn visit(&self, seen: &mut dyn FnMut(&[String]) -> bool) -> bool {
        match self {
            Expr::Literal(_) => true,
            Expr::Field(path) => seen(path),
            Expr::Var(name, path) if name == "ROOT" || name == "CURRENT" => seen(path),
            Expr::Var(..) => true,
            Expr::Object(fields) => fields.iter().all(|(_, e)| e.visit(seen)),
            Expr::Array(items) => items.iter().all(|e| e.visit(seen)),
            Expr::Op(op, _) if matches!(op.name, "$getField" | "$setField" | "$unsetField") => {
                false
            }
            Expr::Op(_, Args::List(args)) => args.iter().all(|e| e.visit(seen)),
            Expr::Op(_, Args::Named(args)) => args.iter().all(|(_, e)| e.visit(seen)),
            // The sort's fields (the index's, `_id`), which the expression does not name.
            Expr::SortKey | Expr::IndexKey | Expr::RecordId => false,
        }
    }
}

/// Adds `name` to `out` once; `false` for none (the whole document).
fn add(out: &mut Vec<String>, name: Option<&String>) -> bool {
    let Some(name) = name else { return false };
    if !out.contains(name) {
        out.push(name.clone());
    }
    true
}

impl AccSpec {
    /// Adds the top-level fields the accumulator reads to `out` (see [`Expr::reads`]).
    pub fn reads(&self, out: &mut Vec<String>) -> bool {
        let sorted = self.sort.iter().flatten().all(|(path, _)| match path.first() {
            Some(name) if !out.contains(name) => {
                out.push(name.clone());
                true
            }
            first => first.is_some(),
        });
        sorted && self.expr.reads(out) && self.n.as_ref().is_none_or(|n| n.reads(out))
    }

    /// Adds the whole paths the accumulator reads to `out` (see [`Expr::paths`]).
    pub fn paths(&self, out: &mut Vec<String>) -> bool {
        let sorted = self
            .sort
            .iter()
            .flatten()
            .all(|(path, _)| add(out, (!path.is_empty()).then(|| path.join(".")).as_ref()));
        sorted && self.expr.paths(out) && self.n.as_ref().is_none_or(|n| n.paths(out))
    }
}

#[cfg(test)]
mod tests {
    use bson::bson;

    use super::*;

    fn reads(spec: bson::Bson) -> Option<Vec<String>> {
        let mut out = Vec::new();
        Expr::parse(&spec).ok()?.reads(&mut out).then_some(out)
    }

    #[test]
    fn fields_read_are_found_and_whole_document_reads_are_not_narrowed() {
        let names = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(reads(bson!("$deviceID")), names(&["deviceID"]));
        assert_eq!(
            reads(bson!({"$add": ["$a.b", {"$multiply": ["$c", 2]}, "$$ROOT.a", "$$NOW"]})),
            names(&["a", "c"])
        );
        assert_eq!(
            reads(bson!({"$map": {"input": "$xs", "as": "x", "in": {"$add": ["$$x", "$y"]}}})),
            names(&["xs", "y"])
        );
        assert_eq!(reads(bson!({"k": "$k", "v": ["$v", 1]})), names(&["k", "v"]));
        assert_eq!(reads(bson!("$$ROOT")), None);
        assert_eq!(reads(bson!({"$mergeObjects": ["$$CURRENT", {"x": 1}]})), None);
        assert_eq!(reads(bson!({"$getField": "n"})), None);
        let mut paths = Vec::new();
        let e = Expr::parse(&bson!({"$add": ["$a.b", "$$CURRENT.c.d", "$a.b"]})).unwrap();
        assert!(e.paths(&mut paths));
        assert_eq!(paths, ["a.b", "c.d"]);
    }
}
