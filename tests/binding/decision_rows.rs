//! docs/binding.md's two state tables against the decision enums: every row's decision
//! is a variant, and every variant has a row, read from the source (syn) and from the
//! markdown, so neither side can move alone. A row that names a field's value
//! (`Release { policy: Recycle }`) names a variant of that field's enum, and then every
//! variant of that enum has its row; a field named beside the decision
//! (`BoundConfirmed` (`selector_mismatch`)) is a field of that variant. And each enum's
//! `name()`, which `explain` prints, returns its variant's name in every arm.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use syn::{Expr, Fields, ImplItem, Item, ItemEnum, Lit, Pat, Type};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A table of docs/binding.md and the enum its decision column names.
struct Table {
    heading: &'static str,
    enumeration: &'static str,
    source: &'static str,
}

const TABLES: [Table; 2] = [
    Table {
        heading: "## The claim controller's table",
        enumeration: "ClaimDecision",
        source: "src/binding/protocol/claim_decision.rs",
    },
    Table {
        heading: "## The server controller's table",
        enumeration: "ServerDecision",
        source: "src/binding/protocol/server_decision.rs",
    },
];

/// What one row's decision cell names.
#[derive(Debug)]
struct Row {
    line: usize,
    enumeration: String,
    variant: String,
    /// `{ field: Value }` written after the variant.
    values: Vec<(String, String)>,
    /// `` (`field`) `` written beside the decision.
    fields: Vec<String>,
}

/// A variant as the source declares it: its fields and their types' last segments.
type Variants = BTreeMap<String, BTreeMap<String, String>>;

fn read(rel: &str) -> String {
    let path = Path::new(ROOT).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The rows of the tables under `heading`: every `|` line after a header with a
/// `decision` column, up to the next `## `, with that column's cell parsed.
fn rows(doc: &str, heading: &str) -> Vec<Row> {
    let start = doc
        .lines()
        .position(|l| l.trim() == heading)
        .unwrap_or_else(|| panic!("docs/binding.md has no `{heading}`"));
    let mut column = None;
    let mut rows = Vec::new();
    for (n, line) in doc.lines().enumerate().skip(start + 1) {
        if line.starts_with("## ") {
            break;
        }
        if !line.starts_with('|') {
            continue;
        }
        let cells: Vec<String> = line
            .replace("\\|", "\u{0}")
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().replace('\u{0}', "|"))
            .collect();
        if cells
            .iter()
            .all(|c| c.chars().all(|ch| ch == '-' || ch == ':'))
        {
            continue;
        }
        // A section may hold several tables (the claim table's two paths): each header
        // says where the decision is.
        if let Some(i) = cells.iter().position(|c| c == "decision") {
            column = Some(i);
        } else if let Some(i) = column {
            rows.push(parse_decision(n + 1, &cells[i]));
        }
    }
    assert!(!rows.is_empty(), "no decision rows under `{heading}`");
    rows
}

/// `` `Enum::Variant { field: Value }` (`other_field`) `` into its parts.
fn parse_decision(line: usize, cell: &str) -> Row {
    let spans: Vec<&str> = cell.split('`').skip(1).step_by(2).collect();
    let (first, beside) = spans
        .split_first()
        .unwrap_or_else(|| panic!("docs/binding.md:{line}: no `Enum::Variant` in {cell:?}"));
    let (path, braces) = match first.split_once('{') {
        Some((p, b)) => (p.trim(), b.trim_end_matches('}')),
        None => (first.trim(), ""),
    };
    let (enumeration, variant) = path
        .split_once("::")
        .unwrap_or_else(|| panic!("docs/binding.md:{line}: `{first}` is not `Enum::Variant`"));
    let values = braces
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| {
            let (field, value) = pair.split_once(':').unwrap_or_else(|| {
                panic!("docs/binding.md:{line}: `{pair}` is not `field: Value`")
            });
            // `Cause(..)` names the variant `Cause`.
            let value = value.trim().split('(').next().unwrap_or_default();
            (field.trim().to_string(), value.to_string())
        })
        .collect();
    Row {
        line,
        enumeration: enumeration.to_string(),
        variant: variant.to_string(),
        values,
        fields: beside.iter().map(|f| f.to_string()).collect(),
    }
}

fn variants(e: &ItemEnum) -> Variants {
    e.variants
        .iter()
        .map(|v| {
            let fields = match &v.fields {
                Fields::Named(named) => named
                    .named
                    .iter()
                    .map(|f| (f.ident.as_ref().unwrap().to_string(), type_name(&f.ty)))
                    .collect(),
                Fields::Unnamed(_) | Fields::Unit => BTreeMap::new(),
            };
            (v.ident.to_string(), fields)
        })
        .collect()
}

fn type_name(ty: &Type) -> String {
    match ty {
        Type::Path(p) => p.path.segments.last().expect("a segment").ident.to_string(),
        _ => String::new(),
    }
}

/// Every enum declared under src/, by name, with its variants.
fn enums_in(dir: &Path, out: &mut BTreeMap<String, Variants>) {
    for entry in std::fs::read_dir(dir).expect("src/ lists") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            enums_in(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let source = std::fs::read_to_string(&path).expect("readable");
            let file = syn::parse_file(&source)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
            collect_enums(&file.items, out);
        }
    }
}

fn collect_enums(items: &[Item], out: &mut BTreeMap<String, Variants>) {
    for item in items {
        match item {
            Item::Enum(e) => {
                out.insert(e.ident.to_string(), variants(e));
            }
            Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    collect_enums(inner, out);
                }
            }
            _ => {}
        }
    }
}

/// Everything wrong between one table and its enum, as sentences.
fn mismatches(table: &Table, rows: &[Row], enums: &BTreeMap<String, Variants>) -> Vec<String> {
    let (name, source) = (table.enumeration, table.source);
    let declared = enums
        .get(name)
        .unwrap_or_else(|| panic!("no `enum {name}` under src/"));
    let mut problems = Vec::new();
    for row in rows {
        let at = format!("docs/binding.md:{} (`{}`)", row.line, table.heading);
        if row.enumeration != name {
            problems.push(format!(
                "{at}: names `{}::{}`, not a {name}",
                row.enumeration, row.variant
            ));
            continue;
        }
        let Some(fields) = declared.get(&row.variant) else {
            problems.push(format!(
                "{at}: row `{name}::{}` has no variant in {source}",
                row.variant
            ));
            continue;
        };
        for field in row.fields.iter().chain(row.values.iter().map(|(f, _)| f)) {
            if !fields.contains_key(field) {
                problems.push(format!(
                    "{at}: `{name}::{}` has no field `{field}`",
                    row.variant
                ));
            }
        }
        for (field, value) in &row.values {
            let ty = fields.get(field).map(String::as_str).unwrap_or_default();
            match enums.get(ty) {
                Some(values) if values.contains_key(value) => {}
                Some(_) => problems.push(format!("{at}: `{value}` is not a variant of `{ty}`")),
                None => problems.push(format!("{at}: `{field}: {value}` names no enum (`{ty}`)")),
            }
        }
    }
    for variant in declared.keys() {
        if !rows
            .iter()
            .any(|r| r.enumeration == name && &r.variant == variant)
        {
            problems.push(format!(
                "{source}: variant `{name}::{variant}` has no row in docs/binding.md's `{}`",
                table.heading
            ));
        }
    }
    problems.extend(uncovered_values(table, rows, declared, enums));
    problems
}

/// A variant whose rows name a field's value needs a row for every value of that enum
/// (`Release { policy: Recycle }` and `Release { policy: Retain }`).
fn uncovered_values(
    table: &Table,
    rows: &[Row],
    declared: &Variants,
    enums: &BTreeMap<String, Variants>,
) -> Vec<String> {
    let named: BTreeMap<(&str, &str), BTreeSet<&str>> =
        rows.iter().fold(BTreeMap::new(), |mut acc, r| {
            for (field, value) in &r.values {
                acc.entry((r.variant.as_str(), field.as_str()))
                    .or_default()
                    .insert(value.as_str());
            }
            acc
        });
    let mut problems = Vec::new();
    for ((variant, field), values) in named {
        let Some(ty) = declared.get(variant).and_then(|f| f.get(field)) else {
            continue;
        };
        for value in enums.get(ty).into_iter().flat_map(|v| v.keys()) {
            if !values.contains(value.as_str()) {
                problems.push(format!(
                    "{}: `{}::{variant} {{ {field}: {value} }}` has no row in docs/binding.md's `{}`",
                    table.source, table.enumeration, table.heading
                ));
            }
        }
    }
    problems
}

#[test]
fn the_state_tables_and_the_decision_enums_name_the_same_decisions() {
    let doc = read("docs/binding.md");
    let mut enums = BTreeMap::new();
    enums_in(&Path::new(ROOT).join("src"), &mut enums);
    let mut problems = Vec::new();
    for table in &TABLES {
        problems.extend(mismatches(table, &rows(&doc, table.heading), &enums));
    }
    assert!(
        problems.is_empty(),
        "docs/binding.md and the decision enums disagree:\n  {}",
        problems.join("\n  ")
    );
}

/// The parser on the shapes the tables use, so a change of style cannot make it read
/// nothing.
#[test]
fn a_decision_cell_reads_as_variant_values_and_fields() {
    let row = parse_decision(1, "`ServerDecision::Release { policy: Retain }`");
    assert_eq!(
        (row.enumeration.as_str(), row.variant.as_str()),
        ("ServerDecision", "Release")
    );
    assert_eq!(row.values, [("policy".to_string(), "Retain".to_string())]);
    let row = parse_decision(2, "`ClaimDecision::BoundConfirmed` (`selector_mismatch`)");
    assert_eq!(row.variant, "BoundConfirmed");
    assert_eq!(row.fields, ["selector_mismatch"]);
    let row = parse_decision(3, "`ServerDecision::RollBack { cause: NamesAnother(..) }`");
    assert_eq!(
        row.values,
        [("cause".to_string(), "NamesAnother".to_string())]
    );
}

/// The arms of `fn name` in every `impl <enumeration>` under src/: each arm's variant
/// (every alternative of an `|` pattern) and the string it returns.
fn name_arms(dir: &Path, enumeration: &str, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).expect("src/ lists") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            name_arms(&path, enumeration, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let source = std::fs::read_to_string(&path).expect("readable");
            let file = syn::parse_file(&source).expect("parses");
            for item in &file.items {
                let Item::Impl(imp) = item else { continue };
                if type_name(&imp.self_ty) != enumeration || imp.trait_.is_some() {
                    continue;
                }
                for f in &imp.items {
                    if let ImplItem::Fn(f) = f
                        && f.sig.ident == "name"
                    {
                        match_arms(&f.block.stmts, out);
                    }
                }
            }
        }
    }
}

fn match_arms(stmts: &[syn::Stmt], out: &mut Vec<(String, String)>) {
    let Some(syn::Stmt::Expr(Expr::Match(m), None)) = stmts.last() else {
        panic!("`fn name` ends in no match");
    };
    for arm in &m.arms {
        let Expr::Lit(syn::ExprLit {
            lit: Lit::Str(name),
            ..
        }) = &*arm.body
        else {
            panic!("an arm of `fn name` returns no string literal");
        };
        for variant in pattern_variants(&arm.pat) {
            out.push((variant, name.value()));
        }
    }
}

/// The variants a pattern names: `A { .. }`, `A`, `A(..)`, `Enum::A`, `A | B`.
fn pattern_variants(pat: &Pat) -> Vec<String> {
    let last = |p: &syn::Path| p.segments.last().expect("a segment").ident.to_string();
    match pat {
        Pat::Struct(p) => vec![last(&p.path)],
        Pat::TupleStruct(p) => vec![last(&p.path)],
        Pat::Path(p) => vec![last(&p.path)],
        Pat::Ident(p) => vec![p.ident.to_string()],
        Pat::Or(p) => p.cases.iter().flat_map(pattern_variants).collect(),
        other => panic!("an arm of `fn name` matches {}", quote::quote!(#other)),
    }
}

#[test]
fn each_decision_s_name_is_its_variant_s() {
    let mut enums = BTreeMap::new();
    enums_in(&Path::new(ROOT).join("src"), &mut enums);
    for table in &TABLES {
        let mut arms = Vec::new();
        name_arms(&Path::new(ROOT).join("src"), table.enumeration, &mut arms);
        let wrong: Vec<_> = arms.iter().filter(|(v, n)| v != n).collect();
        assert!(
            wrong.is_empty(),
            "{}::name() misnames: {wrong:?}",
            table.enumeration
        );
        let named: BTreeSet<&str> = arms.iter().map(|(v, _)| v.as_str()).collect();
        let declared = &enums[table.enumeration];
        let declared: BTreeSet<&str> = declared.keys().map(String::as_str).collect();
        assert_eq!(named, declared, "{}::name()'s arms", table.enumeration);
    }
}
