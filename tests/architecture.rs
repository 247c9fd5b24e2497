//! The layers of src/lib.rs, kept by a test: `api` ← `binding` ← `controllers` ←
//! `runtime`, and `apiserver` standing alone (only `runtime` starts it). Every file under
//! src/ is parsed; every path into the crate (`use crate::…`, an inline `crate::x::…`
//! anywhere, macro bodies and calls included, and `super::` chains that climb out of
//! their top module) must point down the layers or stay in its own layer.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use quote::ToTokens;
use syn::{Item, UseTree};

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Layer {
    /// src/lib.rs and src/main.rs: they assemble the layers and may use all of them.
    Root,
    Api,
    Binding,
    Controllers,
    Runtime,
    Apiserver,
}

impl Layer {
    /// The layer of a top-level module; `None` for a module no layer claims yet.
    fn of_module(name: &str) -> Option<Layer> {
        Some(match name {
            "api" => Layer::Api,
            "binding" => Layer::Binding,
            "controllers" => Layer::Controllers,
            "runtime" => Layer::Runtime,
            "apiserver" => Layer::Apiserver,
            _ => return None,
        })
    }

    /// The layers this one may use besides itself: only downward edges.
    fn may_use(self) -> &'static [Layer] {
        use Layer::*;
        match self {
            Root => &[Api, Binding, Controllers, Runtime, Apiserver],
            Api => &[],
            Binding => &[Api],
            Controllers => &[Api, Binding],
            // The process: `server-binder dev` and `apiserver` start the embedded server.
            Runtime => &[Api, Binding, Controllers, Apiserver],
            // A Kubernetes-compatible API server knows nothing of what runs against it.
            Apiserver => &[],
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = format!("{self:?}").to_lowercase();
        f.write_str(if *self == Layer::Root {
            "the crate root"
        } else {
            &name
        })
    }
}

/// One path from a module into the crate.
#[derive(Debug)]
struct Edge {
    file: PathBuf,
    /// The first line that spells the path up to the module it names, if one does (a
    /// path inside a `use` group does not).
    line: Option<usize>,
    from: Layer,
    /// `None`: the path names something at the crate root that is not a layer.
    to: Option<Layer>,
    path: String,
}

impl Edge {
    fn allowed(&self) -> bool {
        match self.to {
            Some(to) => to == self.from || self.from.may_use().contains(&to),
            None => self.from == Layer::Root,
        }
    }
}

impl fmt::Display for Edge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let to = self
            .to
            .map_or("the crate root".to_string(), |l| l.to_string());
        let allowed: Vec<String> = self.from.may_use().iter().map(|l| l.to_string()).collect();
        write!(
            f,
            "{}{}: {} uses {to} (`{}`); {} may use only {}",
            self.file.display(),
            self.line.map_or(String::new(), |l| format!(":{l}")),
            self.from,
            self.path,
            self.from,
            if allowed.is_empty() {
                "itself".to_string()
            } else {
                allowed.join(", ")
            }
        )
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under src/ (`binding/claim_decision.rs` is
/// `[binding, claim_decision]`, `runtime/leader/mod.rs` is `[runtime, leader]`, lib.rs
/// and main.rs are `[]`), and its layer.
fn module_of(relative: &Path) -> (Vec<String>, Layer) {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    let layer = match parts.first() {
        None => Layer::Root,
        Some(top) => Layer::of_module(top).unwrap_or_else(|| {
            panic!(
                "src/{} is in no layer: give its top module a place in tests/architecture.rs",
                relative.display()
            )
        }),
    };
    (parts, layer)
}

/// Where a path into the crate lands: the top module it names, resolved from `module`
/// (the module the path is written in). `None` for a path that does not leave the crate's
/// own module tree through `crate` or `super` (an external crate, `self::`, a local name).
fn target(module: &[String], segments: &[String]) -> Option<(Option<Layer>, String)> {
    let path = segments.join("::");
    let rest: Vec<String> = match segments.first().map(String::as_str) {
        Some("crate") => segments[1..].to_vec(),
        Some("super") => {
            let ups = segments.iter().take_while(|s| *s == "super").count();
            if ups < module.len() {
                // Still inside the file's own top module.
                return None;
            }
            segments[ups..].to_vec()
        }
        _ => return None,
    };
    let top = rest.first()?;
    Some((Layer::of_module(top), path))
}

/// Every full path of a `use` tree (`use crate::{a::X, b::*}` gives `crate::a::X` and
/// `crate::b::*`).
fn use_paths(tree: &UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(n) => out.push(with(prefix, &n.ident)),
        UseTree::Rename(r) => out.push(with(prefix, &r.ident)),
        UseTree::Glob(_) => {
            let mut path = prefix.clone();
            path.push("*".into());
            out.push(path);
        }
        UseTree::Group(g) => {
            for t in &g.items {
                use_paths(t, prefix, out);
            }
        }
    }
}

/// Where a path is written, found by its text up to the module it names (the parsed
/// tokens carry no lines).
fn line_of(source: &str, segments: &[String]) -> Option<usize> {
    let ups = segments.iter().take_while(|s| *s == "super").count();
    let text = segments[..(ups.max(1) + 1).min(segments.len())].join("::");
    source
        .lines()
        .position(|l| l.contains(&text))
        .map(|n| n + 1)
}

fn with(prefix: &[String], ident: &syn::Ident) -> Vec<String> {
    let mut path = prefix.to_vec();
    path.push(ident.to_string());
    path
}

/// Every `crate::x…`, `super::…::x…` and `server_binder::x…` path in a token stream,
/// macro bodies and calls included (they are tokens too).
fn token_paths(tokens: TokenStream, out: &mut Vec<Vec<String>>) {
    let flat: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < flat.len() {
        if let TokenTree::Group(g) = &flat[i] {
            token_paths(g.stream(), out);
        }
        let starts_path = matches!(&flat[i], TokenTree::Ident(id)
            if id == "crate" || id == "super" || id == "server_binder")
            && !(i >= 2 && is_path_sep(&flat[i - 2], &flat[i - 1]));
        if !starts_path {
            i += 1;
            continue;
        }
        // `server_binder::x` (the crate by its own name) is `crate::x`.
        let root = match flat[i].to_string().as_str() {
            "server_binder" => "crate".to_string(),
            other => other.to_string(),
        };
        let mut segments = vec![root];
        let mut j = i + 1;
        while j + 2 < flat.len() && is_path_sep(&flat[j], &flat[j + 1]) {
            match &flat[j + 2] {
                TokenTree::Ident(id) => segments.push(id.to_string()),
                TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {
                    // A block-level `use crate::{a::X, b}`: read the group as a use tree.
                    let text = format!("{}::{}", segments.join("::"), g);
                    let tree: UseTree = syn::parse_str(&text)
                        .unwrap_or_else(|e| panic!("`{text}` is no use tree: {e}"));
                    use_paths(&tree, &mut Vec::new(), out);
                    segments.clear();
                    j += 3;
                    break;
                }
                _ => break,
            }
            j += 3;
        }
        if segments.len() > 1 {
            out.push(segments);
        }
        i = j;
    }
}

fn is_path_sep(a: &TokenTree, b: &TokenTree) -> bool {
    matches!((a, b), (TokenTree::Punct(x), TokenTree::Punct(y))
        if x.as_char() == ':' && x.spacing() == Spacing::Joint && y.as_char() == ':')
}

/// The paths of a file's items, each with the module it is written in (inline `mod`s
/// nest), so a `super::` resolves from where it stands.
fn item_paths(items: &[Item], module: &[String], out: &mut Vec<(Vec<String>, Vec<String>)>) {
    for item in items {
        let mut found = Vec::new();
        match item {
            Item::Use(u) => use_paths(&u.tree, &mut Vec::new(), &mut found),
            Item::Mod(m) if m.content.is_some() => {
                let mut inner = module.to_vec();
                inner.push(m.ident.to_string());
                item_paths(&m.content.as_ref().unwrap().1, &inner, out);
                continue;
            }
            other => token_paths(other.to_token_stream(), &mut found),
        }
        out.extend(found.into_iter().map(|p| (module.to_vec(), p)));
    }
}

/// Every path into the crate from every file under src/.
fn edges() -> Vec<Edge> {
    let mut files = Vec::new();
    rust_files(Path::new(SRC), &mut files);
    files.sort();
    let mut edges = Vec::new();
    for file in files {
        let relative = file.strip_prefix(SRC).expect("under src/").to_path_buf();
        let (module, from) = module_of(&relative);
        let source = std::fs::read_to_string(&file).expect("readable source");
        let parsed = syn::parse_file(&source)
            .unwrap_or_else(|e| panic!("src/{} does not parse: {e}", relative.display()));
        let mut paths = Vec::new();
        item_paths(&parsed.items, &module, &mut paths);
        for (written_in, segments) in paths {
            if let Some((to, path)) = target(&written_in, &segments) {
                let file = Path::new("src").join(&relative);
                let line = line_of(&source, &segments);
                edges.push(Edge {
                    file,
                    line,
                    from,
                    to,
                    path,
                });
            }
        }
    }
    edges
}

#[test]
fn every_use_points_down_the_layers() {
    let edges = edges();
    let seen: BTreeSet<(Layer, Option<Layer>)> = edges.iter().map(|e| (e.from, e.to)).collect();
    // The scan must see the edges the crate is built on, or it checks nothing.
    for expected in [
        (Layer::Binding, Some(Layer::Api)),
        (Layer::Controllers, Some(Layer::Binding)),
        (Layer::Runtime, Some(Layer::Controllers)),
        (Layer::Runtime, Some(Layer::Apiserver)),
    ] {
        assert!(
            seen.contains(&expected),
            "the scan found no path from {} to {}: it is no longer reading the source",
            expected.0,
            expected.1.unwrap()
        );
    }
    let wrong: Vec<String> = edges
        .iter()
        .filter(|e| !e.allowed())
        .map(|e| e.to_string())
        .collect();
    assert!(
        wrong.is_empty(),
        "{} path(s) cross the layers the wrong way (api ← binding ← controllers ← runtime; \
         apiserver stands alone, used only by runtime):\n  {}",
        wrong.len(),
        wrong.join("\n  ")
    );
}

/// The scanner itself, on source written to break each rule once.
#[test]
fn the_scanner_sees_every_way_of_naming_a_module() {
    let source = r#"
        use crate::{api::Server, controllers::{self, Options}};
        use super::super::runtime::cli;
        fn f() { let _ = crate::apiserver::ApiServer::start; }
        macro_rules! m { () => { crate::runtime::run() }; }
        mod inner { use super::super::super::binding::*; }
        fn k() { use crate::{api, controllers::Y}; }
        pub(crate) fn g() {}
        pub(super) fn h() {}
    "#;
    let parsed = syn::parse_file(source).expect("parses");
    let module = vec!["binding".to_string(), "claim_plan".to_string()];
    let mut paths = Vec::new();
    item_paths(&parsed.items, &module, &mut paths);
    let targets: Vec<(Option<Layer>, String)> =
        paths.iter().filter_map(|(m, p)| target(m, p)).collect();
    let expected = [
        (Some(Layer::Api), "crate::api::Server"),
        (Some(Layer::Controllers), "crate::controllers::self"),
        (Some(Layer::Controllers), "crate::controllers::Options"),
        (Some(Layer::Runtime), "super::super::runtime::cli"),
        (Some(Layer::Apiserver), "crate::apiserver::ApiServer::start"),
        (Some(Layer::Runtime), "crate::runtime::run"),
        (Some(Layer::Binding), "super::super::super::binding::*"),
        (Some(Layer::Api), "crate::api"),
        (Some(Layer::Controllers), "crate::controllers::Y"),
    ];
    let expected: Vec<(Option<Layer>, String)> =
        expected.iter().map(|(l, p)| (*l, p.to_string())).collect();
    assert_eq!(targets, expected);
}
