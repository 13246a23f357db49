//! Sibling modules depend in one direction (`ARCHITECTURE.md`, "The layering
//! rule"): in every crate of the workspace, the modules directly under one
//! parent form no cycle, so that each can be read, and changed, knowing only
//! those it builds on.
//!
//! The test reads each crate's `src/` tree as Rust (with `syn`, so that
//! comments, strings and doc links are never taken for code), follows `mod`
//! declarations to build the module tree, and records every path that names
//! a module of the same crate: `use` declarations, and paths in code
//! beginning with `crate::`, `super::`, `self::` or a name the module
//! imported or declared, in macro calls and attributes too. A path through
//! a re-export (`crate::Hub`, a glob) counts for the module that defines
//! the item. Code anywhere inside module `a` naming anything inside module
//! `b`, both children of one parent, makes `a` depend on `b`; the test fails
//! naming every cycle among siblings, with one path written for each step.
//! A module and its own children may use each other (a parent holds what
//! its children share).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// A module's path from its crate's root (empty for the root).
type ModPath = Vec<String>;

/// One crate's modules, as read from its `src/` tree.
#[derive(Default)]
struct Tree {
    /// Every module, with the file it is written in.
    modules: BTreeMap<ModPath, PathBuf>,
    /// Each module's own items (not those of the modules declared in it).
    items: BTreeMap<ModPath, Vec<syn::Item>>,
    /// The names each module's own items define.
    names: BTreeMap<ModPath, BTreeSet<String>>,
}

impl Tree {
    /// Reads the crate whose root file is `root`.
    fn read(root: &Path) -> Tree {
        let mut tree = Tree::default();
        let dir = root.parent().expect("a root file sits in src/").to_owned();
        tree.read_file(root, Vec::new(), &dir);
        tree
    }

    fn read_file(&mut self, file: &Path, path: ModPath, children_dir: &Path) {
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|error| panic!("read {}: {error}", file.display()));
        let parsed = syn::parse_file(&text)
            .unwrap_or_else(|error| panic!("parse {}: {error}", file.display()));
        self.read_items(file, path, children_dir, parsed.items);
    }

    fn read_items(
        &mut self,
        file: &Path,
        path: ModPath,
        children_dir: &Path,
        items: Vec<syn::Item>,
    ) {
        self.modules.insert(path.clone(), file.to_owned());
        let mut own = Vec::new();
        for item in items {
            let syn::Item::Mod(module) = item else {
                own.push(item);
                continue;
            };
            let name = module.ident.to_string();
            let mut child = path.clone();
            child.push(name.clone());
            match module.content {
                Some((_, items)) => self.read_items(file, child, &children_dir.join(&name), items),
                None => {
                    let flat = children_dir.join(format!("{name}.rs"));
                    let nested = children_dir.join(&name).join("mod.rs");
                    let found = if flat.is_file() { flat } else { nested };
                    self.read_file(&found, child, &children_dir.join(&name));
                }
            }
        }
        let names = own.iter().filter_map(defined_name).collect();
        self.names.insert(path.clone(), names);
        self.items.insert(path, own);
    }

    fn is_module(&self, path: &[String]) -> bool {
        self.modules.contains_key(path)
    }
}

/// A path as written in module `from`, by segment (`crate`, `super` and
/// `self` included); a glob import ends in `*`.
struct Written {
    from: ModPath,
    segments: Vec<String>,
    /// The name it brings into scope, for a `use` (its alias, or its last
    /// segment).
    imports: Option<String>,
}

/// Collects the paths a module's own items write.
struct Paths<'a> {
    from: &'a ModPath,
    found: Vec<Written>,
}

impl Paths<'_> {
    fn push(&mut self, segments: Vec<String>, imports: Option<String>) {
        self.found.push(Written {
            from: self.from.clone(),
            segments,
            imports,
        });
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, absolute: bool) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree, absolute);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                let name = name.ident.to_string();
                let mut segments = prefix.clone();
                // `use a::b::{self, c}` imports `b`.
                let imported = if name == "self" {
                    prefix.last().cloned()
                } else {
                    segments.push(name.clone());
                    Some(name)
                };
                if !absolute {
                    self.push(segments, imported);
                }
            }
            syn::UseTree::Rename(rename) => {
                let mut segments = prefix.clone();
                if rename.ident != "self" {
                    segments.push(rename.ident.to_string());
                }
                if !absolute {
                    self.push(segments, Some(rename.rename.to_string()));
                }
            }
            syn::UseTree::Glob(_) => {
                let mut segments = prefix.clone();
                segments.push("*".to_owned());
                if !absolute {
                    self.push(segments, None);
                }
            }
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree, absolute);
                }
            }
        }
    }

    /// Paths inside a macro call's tokens: `crate::a::b`, `super::a`,
    /// `self::a`, and `name::a` for a name resolved later.
    fn tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut at = 0;
        while at < tokens.len() {
            match &tokens[at] {
                TokenTree::Group(group) => {
                    self.tokens(group.stream());
                    at += 1;
                }
                TokenTree::Ident(ident) => {
                    let preceded_by_dollar_or_colon = at > 0
                        && matches!(&tokens[at - 1], TokenTree::Punct(p) if p.as_char() == '$' || p.as_char() == ':');
                    let mut segments = vec![ident.to_string()];
                    let mut next = at + 1;
                    while next + 2 < tokens.len()
                        && matches!(&tokens[next], TokenTree::Punct(p) if p.as_char() == ':')
                        && matches!(&tokens[next + 1], TokenTree::Punct(p) if p.as_char() == ':')
                    {
                        match &tokens[next + 2] {
                            TokenTree::Ident(ident) => {
                                segments.push(ident.to_string());
                                next += 3;
                            }
                            _ => break,
                        }
                    }
                    if !preceded_by_dollar_or_colon && segments.len() > 1 {
                        self.push(segments, None);
                    }
                    at = next;
                }
                TokenTree::Punct(_) | TokenTree::Literal(_) => at += 1,
            }
        }
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {
        // A module of its own, read as such.
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree, item.leading_colon.is_some());
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            let segments = path
                .segments
                .iter()
                .map(|segment| segment.ident.to_string())
                .collect();
            self.push(segments, None);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_meta_list(&mut self, list: &'ast syn::MetaList) {
        // An attribute's arguments: `#[error("{}", super::x::Y)]`.
        self.tokens(list.tokens.clone());
        syn::visit::visit_meta_list(self, list);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }
}

/// Where names lead: each module's imports by the name they bring in.
struct Resolver<'a> {
    tree: &'a Tree,
    imports: BTreeMap<ModPath, BTreeMap<String, Vec<String>>>,
    /// Each module's glob imports (`use a::b::*`), without the `*`.
    globs: BTreeMap<ModPath, Vec<Vec<String>>>,
}

impl Resolver<'_> {
    /// `segments`, written in `from`, from the crate's root; `None` for a
    /// path outside the crate (another crate, a prelude name, a local item).
    fn absolute(&self, from: &[String], segments: &[String], depth: usize) -> Option<Vec<String>> {
        let (first, rest) = segments.split_first()?;
        match first.as_str() {
            "crate" => Some(rest.to_vec()),
            "self" => Some([from, rest].concat()),
            "super" => {
                let mut base = from.to_vec();
                let mut rest = rest;
                base.pop()?;
                while rest.first().is_some_and(|segment| segment == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                Some([&base[..], rest].concat())
            }
            _ => {
                let child = [from, std::slice::from_ref(first)].concat();
                if self.tree.is_module(&child) {
                    return Some([from, segments].concat());
                }
                if depth > 8 {
                    return None;
                }
                let imported = self.imports.get(from)?.get(first)?;
                let mut through = self.absolute(from, imported, depth + 1)?;
                through.extend_from_slice(rest);
                Some(through)
            }
        }
    }

    /// The module that defines what `absolute` names, following re-exports.
    fn target(&self, absolute: &[String], depth: usize) -> ModPath {
        let mut module: ModPath = Vec::new();
        for (at, segment) in absolute.iter().enumerate() {
            if segment == "*" {
                break;
            }
            let mut child = module.clone();
            child.push(segment.clone());
            if self.tree.is_module(&child) {
                module = child;
                continue;
            }
            if depth < 8 {
                let through = self
                    .imports
                    .get(&module)
                    .and_then(|names| names.get(segment))
                    .and_then(|imported| self.absolute(&module, imported, depth + 1));
                if let Some(mut through) = through {
                    through.extend_from_slice(&absolute[at + 1..]);
                    return self.target(&through, depth + 1);
                }
                // A name a glob brought in: the module it came from, if that
                // defines or imports it.
                let globbed = self
                    .globs
                    .get(&module)
                    .into_iter()
                    .flatten()
                    .find_map(|glob| {
                        let source = self.absolute(&module, glob, depth + 1)?;
                        let source = self.target(&source, depth + 1);
                        let has = self
                            .tree
                            .names
                            .get(&source)
                            .is_some_and(|names| names.contains(segment))
                            || self
                                .imports
                                .get(&source)
                                .is_some_and(|names| names.contains_key(segment));
                        has.then(|| [&source[..], &absolute[at..]].concat())
                    });
                if let Some(through) = globbed {
                    return self.target(&through, depth + 1);
                }
            }
            break;
        }
        module
    }
}

/// One step of a cycle: sibling `from` depends on sibling `to`, for one
/// example reason.
#[derive(Clone)]
struct Dependency {
    file: PathBuf,
    written: String,
}

/// The cycles among sibling modules of the crate whose root file is `root`,
/// each as lines of text.
fn cycles(root: &Path) -> Vec<String> {
    let tree = Tree::read(root);
    let mut written = Vec::new();
    for (path, items) in &tree.items {
        let mut paths = Paths {
            from: path,
            found: Vec::new(),
        };
        for item in items {
            paths.visit_item(item);
        }
        written.extend(paths.found);
    }
    let mut imports: BTreeMap<ModPath, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for path in &written {
        if let Some(name) = &path.imports {
            imports
                .entry(path.from.clone())
                .or_default()
                .insert(name.clone(), path.segments.clone());
        }
    }
    let mut globs: BTreeMap<ModPath, Vec<Vec<String>>> = BTreeMap::new();
    for path in &written {
        if path.imports.is_none() && path.segments.last().is_some_and(|last| last == "*") {
            let mut segments = path.segments.clone();
            segments.pop();
            globs.entry(path.from.clone()).or_default().push(segments);
        }
    }
    let resolver = Resolver {
        tree: &tree,
        imports,
        globs,
    };
    // parent -> from -> to -> example
    let mut edges: BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, Dependency>>> =
        BTreeMap::new();
    for path in &written {
        let Some(absolute) = resolver.absolute(&path.from, &path.segments, 0) else {
            continue;
        };
        let target = resolver.target(&absolute, 0);
        let from = &path.from;
        let common = from.iter().zip(&target).take_while(|(a, b)| a == b).count();
        if common == from.len() || common == target.len() {
            continue;
        }
        edges
            .entry(from[..common].to_vec())
            .or_default()
            .entry(from[common].clone())
            .or_default()
            .entry(target[common].clone())
            .or_insert_with(|| Dependency {
                file: tree.modules[from].clone(),
                written: path.segments.join("::"),
            });
    }
    let mut found = Vec::new();
    for (parent, graph) in &edges {
        for component in strongly_connected(graph) {
            let name = |child: &str| {
                let mut path = parent.clone();
                path.push(child.to_owned());
                path.join("::")
            };
            let mut text = format!(
                "cycle among {}: {}",
                if parent.is_empty() {
                    "crate root's children".to_owned()
                } else {
                    parent.join("::")
                },
                component
                    .iter()
                    .map(|child| name(child))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            for from in &component {
                for (to, dependency) in &graph[from] {
                    if component.contains(to) {
                        text.push_str(&format!(
                            "\n    {} -> {}  ({}: {})",
                            name(from),
                            name(to),
                            dependency.file.display(),
                            dependency.written
                        ));
                    }
                }
            }
            found.push(text);
        }
    }
    found
}

/// The name an item defines, if it is one a path can name.
fn defined_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(item) => &item.ident,
        syn::Item::Enum(item) => &item.ident,
        syn::Item::Fn(item) => &item.sig.ident,
        syn::Item::Static(item) => &item.ident,
        syn::Item::Struct(item) => &item.ident,
        syn::Item::Trait(item) => &item.ident,
        syn::Item::Type(item) => &item.ident,
        syn::Item::Union(item) => &item.ident,
        syn::Item::Macro(item) => item.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

/// The strongly connected components of more than one module (Tarjan).
fn strongly_connected(graph: &BTreeMap<String, BTreeMap<String, Dependency>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeMap<String, Dependency>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a str) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        state.on_stack.insert(node);
        if let Some(targets) = state.graph.get(node) {
            for target in targets.keys() {
                let target = target.as_str();
                if !state.index.contains_key(target) {
                    visit(state, target);
                    let low = state.low[node].min(state.low[target]);
                    state.low.insert(node, low);
                } else if state.on_stack.contains(target) {
                    let low = state.low[node].min(state.index[target]);
                    state.low.insert(node, low);
                }
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                component.push(top.to_owned());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.found
}

/// The workspace's crates (its `members`), each a folder with `src/`.
fn members(workspace: &Path) -> Vec<PathBuf> {
    let manifest = std::fs::read_to_string(workspace.join("Cargo.toml"))
        .unwrap_or_else(|error| panic!("read the workspace's Cargo.toml: {error}"));
    let line = manifest
        .lines()
        .find(|line| line.trim_start().starts_with("members"))
        .expect("the workspace lists its members on one line");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(|member| workspace.join(member))
        .collect()
}

/// Each crate root of `member`: its library, its binary, its other binaries.
fn roots(member: &Path) -> Vec<PathBuf> {
    let src = member.join("src");
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .into_iter()
        .map(|file| src.join(file))
        .filter(|root| root.is_file())
        .collect();
    if let Ok(binaries) = std::fs::read_dir(src.join("bin")) {
        let mut binaries: Vec<PathBuf> = binaries
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|extension| extension == "rs"))
            .collect();
        binaries.sort();
        roots.extend(binaries);
    }
    roots
}

#[test]
fn no_two_sibling_modules_depend_on_each_other() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace");
    let mut crates = 0;
    let mut found = Vec::new();
    for member in members(workspace) {
        for root in roots(&member) {
            crates += 1;
            let shown = root
                .strip_prefix(workspace)
                .unwrap_or(&root)
                .display()
                .to_string();
            let prefix = format!("{}/", workspace.display());
            found.extend(
                cycles(&root)
                    .into_iter()
                    .map(|cycle| format!("{shown}: {}", cycle.replace(&prefix, ""))),
            );
        }
    }
    assert!(crates >= 6, "only {crates} crate roots found");
    assert!(
        found.is_empty(),
        "sibling modules that depend on each other (move what they share to a lower module or to their parent):\n{}",
        found.join("\n")
    );
}

/// A crate written to a temporary folder, removed on drop.
struct Fixture(PathBuf);

impl Fixture {
    fn new(name: &str, files: &[(&str, &str)]) -> Self {
        let dir = std::env::temp_dir().join(format!("layering-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, text) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().expect("a folder")).expect("create the fixture");
            std::fs::write(&path, text).expect("write the fixture");
        }
        Self(dir)
    }

    fn cycles(&self) -> Vec<String> {
        cycles(&self.0.join("lib.rs"))
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_scan_sees_each_way_a_module_names_another() {
    // `use crate::…` one way, a path in code the other (a comment and a
    // string naming the first do not count).
    let plain = Fixture::new(
        "plain",
        &[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "use crate::b::B;\npub struct A(B);\n"),
            (
                "b.rs",
                "// crate::a::A\npub struct B;\nfn f() -> &'static str { let _ = crate::a::A; \"crate::a::A\" }\n",
            ),
        ],
    );
    let found = plain.cycles();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("a -> b") && found[0].contains("b -> a"),
        "{found:?}"
    );

    // Through the parent's re-export, in an attribute, in a nested folder,
    // inside an inline module, as a chain of three.
    let hidden = Fixture::new(
        "hidden",
        &[
            ("lib.rs", "pub mod x;\n"),
            ("x/mod.rs", "mod a;\nmod b;\nmod c;\npub use a::A;\n"),
            (
                "x/a.rs",
                "pub struct A;\nmod inner { fn f() { super::super::b::g(); } }\n",
            ),
            (
                "x/b.rs",
                "#[derive(Debug, thiserror::Error)]\n#[error(\"{}\", super::c::C)]\npub struct E;\npub fn g() {}\n",
            ),
            ("x/c.rs", "pub struct C(crate::x::A);\n"),
        ],
    );
    let found = hidden.cycles();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("x::a, x::b, x::c"), "{found:?}");

    // One way only, and a parent and its child both ways: no cycle.
    let fine = Fixture::new(
        "fine",
        &[
            ("lib.rs", "mod a;\nmod b;\npub struct Root;\n"),
            (
                "a.rs",
                "use crate::b::B;\nmod child;\nuse child::C;\npub struct A(B, C);\n",
            ),
            ("a/child.rs", "pub struct C(Box<super::A>, crate::Root);\n"),
            ("b.rs", "pub struct B;\n"),
        ],
    );
    assert_eq!(fine.cycles(), Vec::<String>::new());
}
