//! The layers of src/lib.rs, kept by a test: `api` ← `binding` ← `controllers` ←
//! `runtime`, and `apiserver` standing alone (only `runtime` starts it). Every file under
//! src/ is parsed; every path into the crate (`use crate::…`, an inline `crate::x::…`
//! anywhere, macro bodies and calls included, and `super::` chains that climb out of
//! their top module) must point down the layers or stay in its own layer.
//!
//! Inside the layers, the same paths resolved to the file that defines what each names
//! (through re-exports) make a graph of files: outside src/apiserver it has no circles,
//! and no file takes an item from the mod.rs of a folder it is in.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use quote::ToTokens;
use syn::{Item, UseTree};

use crate::common::sources::rust_files;

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

/// The module path of a file under src/ (`binding/claim_decision.rs` is
/// `[binding, claim_decision]`, `runtime/leader/mod.rs` is `[runtime, leader]`, lib.rs
/// and main.rs are `[]`), and its layer.
fn module_of(relative: &Path) -> (Vec<String>, Layer) {
    let parts = module_path(relative);
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

/// The module path of a file under src/, as [`module_of`] gives it.
fn module_path(relative: &Path) -> Vec<String> {
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
    parts
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
    token_paths_from(tokens, &|_| false, out);
}

/// [`token_paths`], and also the paths that start with a name `in_scope` accepts (a
/// child module, a name a `use` brought in).
fn token_paths_from(
    tokens: TokenStream,
    in_scope: &dyn Fn(&str) -> bool,
    out: &mut Vec<Vec<String>>,
) {
    let flat: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < flat.len() {
        if let TokenTree::Group(g) = &flat[i] {
            token_paths_from(g.stream(), in_scope, out);
        }
        let starts_path = matches!(&flat[i], TokenTree::Ident(id)
            if id == "crate" || id == "super" || id == "server_binder"
                || in_scope(&id.to_string()))
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
    let mut files = rust_files(Path::new(SRC), &|_| false);
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

// The file graph: which file every path lands in. The layers above say which top
// modules may use which; inside them, files must not import each other in a circle,
// and no file may take an item from the mod.rs of a folder it is in: a mod.rs declares
// its folder's modules and re-exports their items, it is the folder's face, and an
// import from it runs back up (and, as soon as the mod.rs uses that file, round).

/// The embedded API server is left out of both rules for now: it still has circles, and
/// files that import from schema/mod.rs (issue 22 covers the rest of src/).
const EXEMPT: &str = "src/apiserver/";

/// A module, as far as resolving paths needs it.
#[derive(Debug, Default)]
struct Module {
    /// The file it is written in (`src/…`); an inline module shares its file's.
    file: PathBuf,
    /// The items it defines.
    defs: BTreeSet<String>,
    /// The names its `use` items bring in, each with the path it was written with.
    uses: BTreeMap<String, Vec<String>>,
    /// Its glob imports, without the `*`.
    globs: Vec<Vec<String>>,
    /// Its child modules, in files of their own or inline.
    children: BTreeSet<String>,
}

type Modules = BTreeMap<Vec<String>, Module>;

/// One path from a file to the file it lands in.
#[derive(Debug)]
struct FileEdge {
    from: PathBuf,
    to: PathBuf,
    /// The path as written.
    path: String,
    line: Option<usize>,
}

impl fmt::Display for FileEdge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = self.line.map_or(String::new(), |l| format!(":{l}"));
        write!(
            f,
            "{}{line} -> {}: `{}`",
            self.from.display(),
            self.to.display(),
            self.path
        )
    }
}

/// The name an item defines, if it is one that paths can name.
fn defined_name(item: &Item) -> Option<String> {
    let ident = match item {
        Item::Const(i) => &i.ident,
        Item::Enum(i) => &i.ident,
        Item::Fn(i) => &i.sig.ident,
        Item::Macro(i) => i.ident.as_ref()?,
        Item::Static(i) => &i.ident,
        Item::Struct(i) => &i.ident,
        Item::Trait(i) => &i.ident,
        Item::TraitAlias(i) => &i.ident,
        Item::Type(i) => &i.ident,
        Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// The names a `use` tree brings in (`use a::{self, B as C, d::*}` brings `a` and `C`,
/// and globs `a::d`).
fn use_bindings(tree: &UseTree, prefix: &mut Vec<String>, module: &mut Module) {
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_bindings(&p.tree, prefix, module);
            prefix.pop();
        }
        UseTree::Name(n) if n.ident == "self" => {
            if let Some(last) = prefix.last() {
                module.uses.insert(last.clone(), prefix.clone());
            }
        }
        UseTree::Name(n) => {
            module
                .uses
                .insert(n.ident.to_string(), with(prefix, &n.ident));
        }
        UseTree::Rename(r) if r.rename != "_" => {
            module
                .uses
                .insert(r.rename.to_string(), with(prefix, &r.ident));
        }
        UseTree::Rename(_) => {}
        UseTree::Glob(_) => module.globs.push(prefix.clone()),
        UseTree::Group(g) => {
            for t in &g.items {
                use_bindings(t, prefix, module);
            }
        }
    }
}

/// Records the module `path` written in `file` with these items, and its inline modules.
fn add_module(items: &[Item], path: Vec<String>, file: &Path, modules: &mut Modules) {
    let mut module = Module {
        file: file.to_path_buf(),
        ..Module::default()
    };
    for item in items {
        match item {
            Item::Mod(m) => {
                module.children.insert(m.ident.to_string());
                if let Some((_, inner)) = &m.content {
                    let mut inner_path = path.clone();
                    inner_path.push(m.ident.to_string());
                    add_module(inner, inner_path, file, modules);
                }
            }
            Item::Use(u) => use_bindings(&u.tree, &mut Vec::new(), &mut module),
            other => {
                module.defs.extend(defined_name(other));
            }
        }
    }
    modules.insert(path, module);
}

/// `path`, written in `module`, from the crate root; `None` for a path that leaves the
/// crate (`std::…`, `kube::…`) or names something local.
fn absolute(
    modules: &Modules,
    module: &[String],
    path: &[String],
    depth: usize,
) -> Option<Vec<String>> {
    let first = path.first()?.as_str();
    let scope = modules.get(module)?;
    let (base, rest): (Vec<String>, &[String]) = match first {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (module.to_vec(), &path[1..]),
        "super" => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            let base = module[..module.len().checked_sub(ups)?].to_vec();
            (base, &path[ups..])
        }
        _ if scope.children.contains(first) => (module.to_vec(), path),
        // A name a `use` brought in (`use super::meta;` then `meta::name`).
        _ if depth < 8 && scope.uses.contains_key(first) => {
            let base = absolute(modules, module, &scope.uses[first], depth + 1)?;
            (base, &path[1..])
        }
        _ => return None,
    };
    Some([base, rest.to_vec()].concat())
}

/// The file an absolute path lands in: the file that defines the item it names (through
/// any re-exports), or the file of the module it names. An item no module defines
/// (a derive's output, an enum's variant) lands in the file of the module it is named in.
fn landing(modules: &Modules, path: &[String], depth: usize) -> Option<PathBuf> {
    let mut current: Vec<String> = Vec::new();
    for (i, segment) in path.iter().enumerate() {
        let module = modules.get(&current)?;
        if segment == "*" || segment == "self" {
            return Some(module.file.clone());
        }
        if module.children.contains(segment) {
            current.push(segment.clone());
            continue;
        }
        if module.defs.contains(segment) || depth > 8 {
            return Some(module.file.clone());
        }
        let rest = &path[i + 1..];
        if let Some(used) = module.uses.get(segment) {
            // Re-exported or imported: where it comes from, unless from outside.
            let target = absolute(modules, &current, used, 0)?;
            return landing(modules, &[target, rest.to_vec()].concat(), depth + 1);
        }
        for glob in &module.globs {
            let Some(base) = absolute(modules, &current, glob, 0) else {
                continue;
            };
            let candidate = [base.clone(), path[i..].to_vec()].concat();
            if let Some(file) = landing(modules, &candidate, depth + 1)
                && file != modules[&base].file
            {
                return Some(file);
            }
        }
        return Some(module.file.clone());
    }
    modules.get(&current).map(|m| m.file.clone())
}

/// Every path in these items with the module it is written in: `use` paths, and paths
/// in code that start at `crate`, `super`, a child module or a name a `use` brought in.
fn scoped_paths(
    items: &[Item],
    module: &[String],
    modules: &Modules,
    out: &mut Vec<(Vec<String>, Vec<String>)>,
) {
    let Some(scope) = modules.get(module) else {
        return;
    };
    let in_scope = |id: &str| scope.children.contains(id) || scope.uses.contains_key(id);
    for item in items {
        let mut found = Vec::new();
        match item {
            Item::Use(u) => use_paths(&u.tree, &mut Vec::new(), &mut found),
            Item::Mod(m) if m.content.is_some() => {
                let mut inner = module.to_vec();
                inner.push(m.ident.to_string());
                scoped_paths(&m.content.as_ref().unwrap().1, &inner, modules, out);
                continue;
            }
            other => token_paths_from(other.to_token_stream(), &in_scope, &mut found),
        }
        out.extend(found.into_iter().map(|p| (module.to_vec(), p)));
    }
}

/// The edges between the files of a crate whose files are these (relative to src/,
/// with their source). main.rs is another crate: nothing imports it.
fn file_edges(sources: &[(PathBuf, String)]) -> Vec<FileEdge> {
    let parsed: Vec<(PathBuf, &str, syn::File)> = sources
        .iter()
        .filter(|(relative, _)| relative != Path::new("main.rs"))
        .map(|(relative, source)| {
            let file = syn::parse_file(source)
                .unwrap_or_else(|e| panic!("src/{} does not parse: {e}", relative.display()));
            (relative.clone(), source.as_str(), file)
        })
        .collect();
    let mut modules = Modules::new();
    for (relative, _, file) in &parsed {
        add_module(
            &file.items,
            module_path(relative),
            &Path::new("src").join(relative),
            &mut modules,
        );
    }
    let mut edges = Vec::new();
    for (relative, source, file) in &parsed {
        let from = Path::new("src").join(relative);
        let mut paths = Vec::new();
        scoped_paths(&file.items, &module_path(relative), &modules, &mut paths);
        for (written_in, segments) in paths {
            let Some(to) = absolute(&modules, &written_in, &segments, 0)
                .and_then(|a| landing(&modules, &a, 0))
            else {
                continue;
            };
            if to != from {
                let line = line_of(source, &segments);
                // `use a::b::{self}` names `a::b`.
                let named = match segments.split_last() {
                    Some((last, init)) if last == "self" => init,
                    _ => &segments[..],
                };
                let path = named.join("::");
                edges.push(FileEdge {
                    from: from.clone(),
                    to,
                    path,
                    line,
                });
            }
        }
    }
    edges
}

/// Every file under src/, relative to it, with its source.
fn sources() -> Vec<(PathBuf, String)> {
    let mut files = rust_files(Path::new(SRC), &|_| false);
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let source = std::fs::read_to_string(&file).expect("readable source");
            let relative = file.strip_prefix(SRC).expect("under src/").to_path_buf();
            (relative, source)
        })
        .collect()
}

/// Every circle among the files outside [`EXEMPT`]: per set of files that
/// reach each other, a shortest circle through its first file, and what ties the set.
fn circles(edges: &[FileEdge]) -> Vec<String> {
    let counted = |p: &Path| !p.starts_with(EXEMPT);
    let inside: Vec<&FileEdge> = edges
        .iter()
        .filter(|e| counted(&e.from) && counted(&e.to))
        .collect();
    let mut next: BTreeMap<&Path, BTreeSet<&Path>> = BTreeMap::new();
    for e in &inside {
        next.entry(&e.from).or_default().insert(&e.to);
    }
    let mut seen: BTreeSet<&Path> = BTreeSet::new();
    let mut found = Vec::new();
    for &start in next.keys() {
        let from_start = shortest_paths(&next, start);
        if seen.contains(start) || !from_start.contains_key(start) {
            continue;
        }
        let set: BTreeSet<&Path> = from_start
            .keys()
            .copied()
            .filter(|&f| shortest_paths(&next, f).contains_key(start))
            .collect();
        seen.extend(set.iter().copied());
        // The search reached `start` again on a shortest way round: walk it back.
        let mut back = Vec::new();
        let mut at = from_start[start];
        while at != start {
            back.push(at);
            at = from_start[at];
        }
        let circle = std::iter::once(start)
            .chain(back.into_iter().rev())
            .chain(std::iter::once(start));
        let names: Vec<String> = circle.map(|p| p.display().to_string()).collect();
        found.push(format!(
            "{} ({} files reach each other):\n{}",
            names.join(" -> "),
            set.len(),
            ties(&inside, &set)
        ));
    }
    found
}

/// What ties a set of files: per pair, the paths from one to the other (each once, at
/// its first line).
fn ties(edges: &[&FileEdge], set: &BTreeSet<&Path>) -> String {
    let mut by_pair: BTreeMap<(&Path, &Path), Vec<String>> = BTreeMap::new();
    for e in edges {
        if set.contains(e.from.as_path()) && set.contains(e.to.as_path()) {
            let line = e.line.map_or(String::new(), |l| format!(" (line {l})"));
            let named = by_pair.entry((&e.from, &e.to)).or_default();
            let path = format!("`{}`{line}", e.path);
            if !named.contains(&path) {
                named.push(path);
            }
        }
    }
    let lines: Vec<String> = by_pair
        .iter()
        .map(|((from, to), paths)| {
            let (from, to) = (from.display(), to.display());
            format!("    {from} -> {to}: {}", paths.join(", "))
        })
        .collect();
    lines.join("\n")
}

/// Breadth first from `start`: each file reached, with the file it was reached from
/// (`start` itself only if a circle leads back to it).
fn shortest_paths<'a>(
    next: &BTreeMap<&'a Path, BTreeSet<&'a Path>>,
    start: &'a Path,
) -> BTreeMap<&'a Path, &'a Path> {
    let mut before: BTreeMap<&Path, &Path> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(at) = queue.pop_front() {
        for &to in next.get(at).into_iter().flatten() {
            if !before.contains_key(to) {
                before.insert(to, at);
                queue.push_back(to);
            }
        }
    }
    before
}

/// The edges from a file into the mod.rs (or lib.rs) of a folder it is in.
fn imports_from_a_face(edges: &[FileEdge]) -> Vec<&FileEdge> {
    let is_face = |p: &Path| {
        p.file_name()
            .is_some_and(|n| n == "mod.rs" || n == "lib.rs")
    };
    edges
        .iter()
        .filter(|e| is_face(&e.to) && e.to.parent().is_some_and(|dir| e.from.starts_with(dir)))
        .collect()
}

#[test]
fn no_files_import_each_other_in_a_circle() {
    let edges = file_edges(&sources());
    // The scan must resolve what the crate is built on, or it checks nothing: a
    // plain import, one through a re-export in a mod.rs, one through a child module
    // named in an attribute.
    for (from, to) in [
        (
            "src/binding/protocol/claim_decision.rs",
            "src/binding/world/view.rs",
        ),
        ("src/runtime/explain/claim.rs", "src/binding/meta.rs"),
        (
            "src/runtime/bench/mod.rs",
            "src/runtime/bench/bind/fleet.rs",
        ),
    ] {
        assert!(
            edges
                .iter()
                .any(|e| e.from == Path::new(from) && e.to == Path::new(to)),
            "the scan found no path from {from} to {to}: it is no longer resolving the source"
        );
    }
    let found = circles(&edges);
    assert!(
        found.is_empty(),
        "{} import circle(s) among the files of src/ (outside {EXEMPT}); move \
         what ties them into a file below them:\n  {}",
        found.len(),
        found.join("\n  ")
    );
}

#[test]
fn no_file_imports_from_the_mod_rs_of_its_folder() {
    let edges = file_edges(&sources());
    let wrong: BTreeSet<String> = imports_from_a_face(&edges)
        .iter()
        .filter(|e| !e.from.starts_with(EXEMPT))
        .map(|e| e.to_string())
        .collect();
    let wrong: Vec<String> = wrong.into_iter().collect();
    assert!(
        wrong.is_empty(),
        "{} path(s) take an item from the mod.rs of their own folder; a mod.rs only \
         declares and re-exports, so give the item a file of its own:\n  {}",
        wrong.len(),
        wrong.join("\n  ")
    );
}

/// The file graph itself, on a crate written to break both rules once: `b.rs` takes `A`
/// through the re-export in mod.rs (so from `a.rs`, which calls into `b.rs`: a circle)
/// and `K`, which mod.rs defines.
#[test]
fn the_file_graph_sees_through_re_exports() {
    let crate_files = [
        ("lib.rs", "pub mod binding;"),
        (
            "binding/mod.rs",
            "mod a; mod b; pub use a::A; pub const K: u8 = 1;",
        ),
        (
            "binding/a.rs",
            "use super::b; pub struct A; fn f() { b::g(); }",
        ),
        (
            "binding/b.rs",
            "pub fn g() { let _ = super::A; let _ = crate::binding::K; }\n\
             mod tests { use super::*; }",
        ),
    ];
    let sources: Vec<(PathBuf, String)> = crate_files
        .iter()
        .map(|(f, s)| (PathBuf::from(f), s.to_string()))
        .collect();
    let edges = file_edges(&sources);
    let shown: BTreeSet<String> = edges.iter().map(|e| e.to_string()).collect();
    let expected: BTreeSet<String> = [
        "src/binding/mod.rs:1 -> src/binding/a.rs: `a::A`",
        "src/binding/a.rs:1 -> src/binding/b.rs: `super::b`",
        "src/binding/a.rs:1 -> src/binding/b.rs: `b::g`",
        "src/binding/b.rs:1 -> src/binding/a.rs: `super::A`",
        "src/binding/b.rs:1 -> src/binding/mod.rs: `crate::binding::K`",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(shown, expected);
    let found = circles(&edges);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("src/binding/a.rs -> src/binding/b.rs -> src/binding/a.rs"),
        "{}",
        found[0]
    );
    let faces: Vec<String> = imports_from_a_face(&edges)
        .iter()
        .map(|e| e.path.clone())
        .collect();
    assert_eq!(faces, ["crate::binding::K"]);
}

/// The ways into an object's metadata for its labels or annotations, spaces removed.
const INTO_METADATA: [&str; 6] = [
    "meta().labels",
    "meta().annotations",
    "meta_mut().labels",
    "meta_mut().annotations",
    "ResourceExt::labels",
    "ResourceExt::annotations",
];

/// The lines of `source` that reach for labels or annotations through an object's
/// metadata.
fn reaches_into_metadata(source: &str) -> Vec<usize> {
    let squeezed = |line: &str| line.split_whitespace().collect::<String>();
    let lines: Vec<String> = source.lines().map(squeezed).collect();
    (0..lines.len())
        .filter(|&i| {
            // A call chain may break its line after `meta()`.
            let joined = lines[i].clone() + lines.get(i + 1).map_or("", String::as_str);
            let here = |w: &&str| lines[i].contains(*w);
            let broken = |w: &&str| !here(w) && joined.contains(*w) && lines[i].ends_with(')');
            INTO_METADATA.iter().any(|w| here(w) || broken(w))
        })
        .map(|i| i + 1)
        .collect()
}

/// A cached server's or claim's metadata holds no labels or annotations: they are the
/// lean object's own (src/api/cached.rs), and a read of them through its metadata (as
/// kube's `Resource` offers) would find none. So outside that file and the embedded API
/// server (which keeps whole objects), no code and no pure test reaches for them there;
/// the few other kinds' labels are read through `metadata` or the lean object's methods.
#[test]
fn labels_and_annotations_are_never_read_through_a_lean_objects_metadata() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = rust_files(Path::new(SRC), &|p| p.ends_with("apiserver"));
    files.extend(rust_files(&root.join("tests/binding"), &|_| false));
    let mut wrong = Vec::new();
    for file in files.iter().filter(|f| !f.ends_with("api/cached.rs")) {
        let source = std::fs::read_to_string(file).expect("a source file");
        for line in reaches_into_metadata(&source) {
            let relative = file.strip_prefix(root).unwrap_or(file);
            wrong.push(format!("{}:{line}", relative.display()));
        }
    }
    assert!(files.len() > 50, "found the sources: {}", files.len());
    assert!(
        wrong.is_empty(),
        "labels or annotations read through an object's metadata, where a lean object \
         has none; use `labels()` and `annotations()` on the object:\n  {}",
        wrong.join("\n  ")
    );
    let sample = "fn f(o: &impl Resource) {\n    o.meta()\n        .annotations\n        .get(k);\n    o.meta_mut().labels = None;\n    o.labels();\n}";
    assert_eq!(reaches_into_metadata(sample), [2, 5]);
}

/// The rooms of src/binding, from the ground up: a file may import files of its own room
/// and of the rooms below it, never above (docs/binding.md, "Where the code is"). The
/// ground holds the small files every room reads; the binder, which runs the steps, is
/// the top.
const BINDING_ROOMS: &[&[&str]] = &[
    &[
        "meta.rs",
        "bounded.rs",
        "selector.rs",
        "effects.rs",
        "reasons.rs",
        "few.rs",
    ],
    &["state"],
    &["claim_side"],
    &["placement"],
    &["world"],
    &["wakeups.rs"],
    &["protocol"],
    &["steps"],
    &["binder.rs", "binder"],
    &["mod.rs"],
];

/// The floor of a file under src/binding in [`BINDING_ROOMS`].
fn binding_room(file: &Path) -> Option<usize> {
    let inside = file.strip_prefix("src/binding").ok()?;
    let first = inside.components().next()?.as_os_str().to_str()?;
    let room = BINDING_ROOMS.iter().position(|r| r.contains(&first));
    Some(room.unwrap_or_else(|| {
        panic!("src/binding/{first} is in no room: give it one in tests/architecture.rs")
    }))
}

#[test]
fn the_rooms_of_binding_import_only_downward() {
    let edges = file_edges(&sources());
    let upward: Vec<String> = edges
        .iter()
        .filter(|e| match (binding_room(&e.from), binding_room(&e.to)) {
            (Some(from), Some(to)) => to > from,
            _ => false,
        })
        .map(|e| e.to_string())
        .collect();
    assert!(
        upward.is_empty(),
        "{} path(s) in src/binding import from a room above their own (rooms from the \
         ground up: {BINDING_ROOMS:?}):\n  {}",
        upward.len(),
        upward.join("\n  ")
    );
}
