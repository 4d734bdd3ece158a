//! The module graph of one crate, read from its source with `syn`: the
//! module tree (`mod x;` to `x.rs` or `x/mod.rs`, `#[path]` honoured, inline
//! modules kept as part of their file), every path into the crate a file
//! names (`use crate::…`, `use super::…`, `crate::a::b` in code and in macro
//! arguments), and the circles among siblings (see the test's doc comment
//! for why siblings).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// A module's path from the crate root, `["controller", "execute"]`.
pub type ModPath = Vec<String>;

/// One place a file names another module: where, and the source line.
#[derive(Clone, Debug)]
pub struct Evidence {
    pub file: String,
    pub line: usize,
    pub text: String,
}

/// A path a file names, made absolute from the crate root.
struct Reference {
    /// The module (file or inline) the path is written in.
    from: ModPath,
    path: ModPath,
    evidence: Evidence,
}

/// A crate's modules and the references between them.
pub struct Crate {
    /// Every module backed by a file, and that file.
    files: BTreeMap<ModPath, PathBuf>,
    /// Every module, file or inline, and the file module holding it.
    modules: BTreeMap<ModPath, ModPath>,
    /// The names each module brings in with `use` (any visibility: a
    /// child may name its parent's private imports), to the absolute path.
    imports: BTreeMap<ModPath, BTreeMap<String, ModPath>>,
    references: Vec<Reference>,
}

/// A circle: the sibling modules of one strongly connected component, a
/// cycle through them, and every edge between them with its evidence.
pub struct Circle {
    /// The sibling modules in it, sorted.
    pub members: Vec<String>,
    pub cycle: Vec<String>,
    pub edges: BTreeMap<(String, String), Vec<Evidence>>,
}

impl Crate {
    /// Reads the crate whose root file is `root` (`src/lib.rs` or
    /// `src/main.rs`); paths in evidence are shown relative to `shown_from`.
    pub fn read(root: &Path, shown_from: &Path) -> Result<Crate, String> {
        let mut krate = Crate {
            files: BTreeMap::new(),
            modules: BTreeMap::new(),
            imports: BTreeMap::new(),
            references: Vec::new(),
        };
        krate.read_file(Vec::new(), root, true, shown_from)?;
        Ok(krate)
    }

    fn read_file(
        &mut self,
        path: ModPath,
        file: &Path,
        is_dir_owner: bool,
        shown_from: &Path,
    ) -> Result<(), String> {
        let source = std::fs::read_to_string(file)
            .map_err(|e| format!("reading {}: {e}", file.display()))?;
        let ast =
            syn::parse_file(&source).map_err(|e| format!("parsing {}: {e}", file.display()))?;
        self.files.insert(path.clone(), file.to_path_buf());
        self.modules.insert(path.clone(), path.clone());
        let parent_dir = file.parent().unwrap_or(Path::new("."));
        // Where `mod x;` looks for x: beside a mod.rs/lib.rs/main.rs, or in
        // the folder named after any other file.
        let child_dir = if is_dir_owner {
            parent_dir.to_path_buf()
        } else {
            let stem = file.file_stem().unwrap_or_default();
            parent_dir.join(stem)
        };
        let shown = file
            .strip_prefix(shown_from)
            .unwrap_or(file)
            .display()
            .to_string();
        let lines: Vec<&str> = source.lines().collect();
        let mut collector = Collector {
            stack: vec![path.clone()],
            shown,
            lines: &lines,
            uses: Vec::new(),
            paths: Vec::new(),
            children: Vec::new(),
            inline: Vec::new(),
        };
        for item in &ast.items {
            collector.item(item, &child_dir, parent_dir);
        }
        let Collector {
            uses,
            paths,
            children,
            inline,
            ..
        } = collector;
        for module in inline {
            self.modules.insert(module, path.clone());
        }
        // Children first, so relative paths below can tell a child module
        // from an external crate.
        for (child, child_file, owner) in children {
            self.read_file(child, &child_file, owner, shown_from)?;
        }
        for (from, tree, evidence) in uses {
            let mut flat = Vec::new();
            flatten(&tree, Vec::new(), &mut flat);
            for (segments, name) in flat {
                let Some(absolute) = self.absolute(&from, &segments) else {
                    continue;
                };
                if let Some(name) = name {
                    self.imports
                        .entry(from.clone())
                        .or_default()
                        .insert(name, absolute.clone());
                }
                self.references.push(Reference {
                    from: from.clone(),
                    path: absolute,
                    evidence: evidence.clone(),
                });
            }
        }
        for (from, segments, evidence) in paths {
            if let Some(absolute) = self.absolute(&from, &segments) {
                self.references.push(Reference {
                    from,
                    path: absolute,
                    evidence,
                });
            }
        }
        Ok(())
    }

    /// `segments` as written in module `from`, from the crate root; `None`
    /// for a path into another crate.
    fn absolute(&self, from: &ModPath, segments: &[String]) -> Option<ModPath> {
        let mut base = from.clone();
        let mut rest = segments;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            Some(first) => {
                let mut child = from.clone();
                child.push(first.to_string());
                if !self.modules.contains_key(&child) {
                    return None;
                }
            }
            None => return None,
        }
        base.extend(rest.iter().filter(|s| *s != "self").cloned());
        Some(base)
    }

    /// The file module an absolute path leads to, following `use` imports
    /// (so `super::Candidate`, brought in by the parent from a sibling,
    /// leads to that sibling).
    fn resolve(&self, path: &[String], depth: usize) -> ModPath {
        let mut current: ModPath = Vec::new();
        for (i, segment) in path.iter().enumerate() {
            let mut next = current.clone();
            next.push(segment.clone());
            if self.modules.contains_key(&next) {
                current = next;
                continue;
            }
            if depth < 8
                && let Some(target) = self.imports.get(&current).and_then(|m| m.get(segment))
            {
                let mut target = target.clone();
                target.extend(path[i + 1..].iter().cloned());
                return self.resolve(&target, depth + 1);
            }
            break;
        }
        self.modules[&current].clone()
    }

    /// The circles among sibling modules, each with its evidence.
    pub fn circles(&self) -> Vec<Circle> {
        let mut edges: BTreeMap<(String, String), Vec<Evidence>> = BTreeMap::new();
        for reference in &self.references {
            let from = self.modules[&reference.from].clone();
            let to = self.resolve(&reference.path, 0);
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            // A module naming its own ancestor or descendant is containment:
            // a folder is one unit to the modules outside it.
            if common == from.len() || common == to.len() {
                continue;
            }
            let a = from[..=common].join("::");
            let b = to[..=common].join("::");
            let evidence = edges.entry((a, b)).or_default();
            let e = &reference.evidence;
            // One line a `use` group spreads over several names is shown once.
            if !evidence
                .iter()
                .any(|x| x.file == e.file && x.line == e.line)
            {
                evidence.push(e.clone());
            }
        }
        let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (a, b) in edges.keys() {
            graph.entry(a).or_default().insert(b);
            graph.entry(b).or_default();
        }
        strongly_connected(&graph)
            .into_iter()
            .filter(|component| component.len() > 1)
            .map(|component| {
                let members: BTreeSet<&str> = component.iter().copied().collect();
                let inside = edges
                    .iter()
                    .filter(|((a, b), _)| {
                        members.contains(a.as_str()) && members.contains(b.as_str())
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                Circle {
                    members: component.iter().map(|m| m.to_string()).collect(),
                    cycle: shortest_cycle(&graph, component[0], &members),
                    edges: inside,
                }
            })
            .collect()
    }
}

/// The report of circles, one block each: the cycle, then every `use` (or
/// path) that makes an edge of it.
pub fn report(name: &str, circles: &[Circle]) -> String {
    let mut out = String::new();
    for circle in circles {
        let _ = writeln!(out, "{name}: module circle {}", circle.cycle.join(" -> "));
        for ((a, b), evidence) in &circle.edges {
            let _ = writeln!(out, "  {a} -> {b}:");
            for e in evidence {
                let _ = writeln!(out, "    {}:{}: {}", e.file, e.line, e.text);
            }
        }
    }
    out
}

type Uses = Vec<(ModPath, syn::UseTree, Evidence)>;
type Paths = Vec<(ModPath, Vec<String>, Evidence)>;

/// Walks one file: its `mod` declarations, its `use` items and the paths
/// into the crate its code and macro arguments name.
struct Collector<'a> {
    /// The module being walked (inline modules push onto it).
    stack: Vec<ModPath>,
    shown: String,
    lines: &'a [&'a str],
    uses: Uses,
    paths: Paths,
    /// (module, its file, whether that file owns its folder as mod.rs does)
    children: Vec<(ModPath, PathBuf, bool)>,
    inline: Vec<ModPath>,
}

impl Collector<'_> {
    fn current(&self) -> ModPath {
        self.stack.last().cloned().unwrap_or_default()
    }

    fn evidence(&self, span: proc_macro2::Span) -> Evidence {
        let line = span.start().line;
        let text = self
            .lines
            .get(line.wrapping_sub(1))
            .map(|l| l.trim().to_string())
            .unwrap_or_default();
        Evidence {
            file: self.shown.clone(),
            line,
            text,
        }
    }

    fn item(&mut self, item: &syn::Item, child_dir: &Path, parent_dir: &Path) {
        match item {
            syn::Item::Mod(module) => {
                let mut path = self.current();
                path.push(module.ident.to_string());
                if let Some((_, items)) = &module.content {
                    self.inline.push(path.clone());
                    self.stack.push(path);
                    let dir = child_dir.join(module.ident.to_string());
                    for inner in items {
                        self.item(inner, &dir, &dir);
                    }
                    self.stack.pop();
                } else {
                    let name = module.ident.to_string();
                    let explicit = module.attrs.iter().find_map(|a| {
                        if !a.path().is_ident("path") {
                            return None;
                        }
                        let syn::Meta::NameValue(nv) = &a.meta else {
                            return None;
                        };
                        let syn::Expr::Lit(lit) = &nv.value else {
                            return None;
                        };
                        let syn::Lit::Str(s) = &lit.lit else {
                            return None;
                        };
                        Some(parent_dir.join(s.value()))
                    });
                    let (file, owner) = match explicit {
                        Some(file) => {
                            let owner = file.file_name().is_some_and(|n| n == "mod.rs");
                            (file, owner)
                        }
                        None if child_dir.join(format!("{name}.rs")).exists() => {
                            (child_dir.join(format!("{name}.rs")), false)
                        }
                        None => (child_dir.join(&name).join("mod.rs"), true),
                    };
                    self.children.push((path, file, owner));
                    // Attributes may name paths too (`#[cfg_attr(…)]`); the
                    // rest of a `mod x;` item names nothing.
                    for attr in &module.attrs {
                        self.visit_attribute(attr);
                    }
                }
            }
            syn::Item::Use(item_use) => {
                let evidence = self.evidence(item_use.use_token.span);
                self.uses
                    .push((self.current(), item_use.tree.clone(), evidence));
            }
            other => self.visit_item(other),
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        // Modules inside functions or blocks are rare; walk them as inline
        // modules of the file.
        let dir = PathBuf::new();
        self.item(&syn::Item::Mod(module.clone()), &dir, &dir);
    }

    fn visit_item_use(&mut self, item_use: &'ast syn::ItemUse) {
        // A `use` inside a function: the same as one at module level, except
        // that it imports nothing for other modules.
        let evidence = self.evidence(item_use.use_token.span);
        self.uses
            .push((self.current(), item_use.tree.clone(), evidence));
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none()
            && let Some(first) = path.segments.first()
            && matches!(first.ident.to_string().as_str(), "crate" | "super" | "self")
            && path.segments.len() > 1
        {
            let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
            let evidence = self.evidence(first.ident.span());
            self.paths.push((self.current(), segments, evidence));
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {
        // `pub(in crate::a)` names where an item is seen, not a dependency.
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }
}

impl Collector<'_> {
    /// Paths like `crate::a::b` inside a macro's tokens (`format!`,
    /// `tokio::select!`, `assert!`), which syn does not parse.
    fn tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            if let TokenTree::Group(group) = &tokens[i] {
                self.tokens(group.stream());
                i += 1;
                continue;
            }
            let start = match &tokens[i] {
                TokenTree::Ident(ident)
                    if matches!(ident.to_string().as_str(), "crate" | "super") =>
                {
                    ident.clone()
                }
                _ => {
                    i += 1;
                    continue;
                }
            };
            let preceded_by_colons =
                i > 0 && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == ':');
            let mut segments = vec![start.to_string()];
            let mut j = i + 1;
            loop {
                let colons = matches!(tokens.get(j), Some(TokenTree::Punct(p)) if p.as_char() == ':')
                    && matches!(tokens.get(j + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':');
                match (colons, tokens.get(j + 2)) {
                    (true, Some(TokenTree::Ident(next))) => {
                        segments.push(next.to_string());
                        j += 3;
                    }
                    _ => break,
                }
            }
            if !preceded_by_colons && segments.len() > 1 {
                let evidence = self.evidence(start.span());
                self.paths.push((self.current(), segments, evidence));
            }
            i = j.max(i + 1);
        }
    }
}

/// A use tree as flat paths, each with the name it brings in (none for a
/// glob or `_`).
fn flatten(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            let mut prefix = prefix;
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut path = prefix.clone();
            path.push(name.clone());
            let brought = if name == "self" {
                prefix.last().cloned()
            } else {
                Some(name)
            };
            out.push((path, brought));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix;
            path.push(r.ident.to_string());
            let alias = r.rename.to_string();
            out.push((path, (alias != "_").then_some(alias)));
        }
        syn::UseTree::Glob(_) => out.push((prefix, None)),
        syn::UseTree::Group(g) => {
            for tree in &g.items {
                flatten(tree, prefix.clone(), out);
            }
        }
    }
}

/// Tarjan's strongly connected components.
fn strongly_connected<'a>(graph: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<&'a str>>,
    }
    fn connect<'a>(node: &'a str, graph: &BTreeMap<&'a str, BTreeSet<&'a str>>, s: &mut State<'a>) {
        let n = s.index.len();
        s.index.insert(node, n);
        s.low.insert(node, n);
        s.stack.push(node);
        s.on_stack.insert(node);
        for &next in &graph[node] {
            if !s.index.contains_key(next) {
                connect(next, graph, s);
                let low = s.low[node].min(s.low[next]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(next) {
                let low = s.low[node].min(s.index[next]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut component = Vec::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                component.push(top);
                if top == node {
                    break;
                }
            }
            component.sort();
            s.out.push(component);
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for &node in graph.keys() {
        if !state.index.contains_key(node) {
            connect(node, graph, &mut state);
        }
    }
    state.out.sort();
    state.out
}

/// The shortest cycle from `start` back to it inside one component.
fn shortest_cycle(
    graph: &BTreeMap<&str, BTreeSet<&str>>,
    start: &str,
    members: &BTreeSet<&str>,
) -> Vec<String> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &next in &graph[node] {
            if !members.contains(next) {
                continue;
            }
            if next == start {
                let mut cycle = vec![start.to_string()];
                let mut at = node;
                while at != start {
                    cycle.push(at.to_string());
                    at = came_from[at];
                }
                cycle.push(start.to_string());
                cycle.reverse();
                return cycle;
            }
            if !came_from.contains_key(next) {
                came_from.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    vec![start.to_string()]
}
