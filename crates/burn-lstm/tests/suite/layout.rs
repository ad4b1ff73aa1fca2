//! The workspace's layering (docs/architecture.md), checked on its sources: in no crate
//! do two files import each other in a circle, and in this one neither `kernels/` nor
//! `op/` imports `module/`.
//!
//! An import is any `crate::`, `$crate::`, `super::` or `self::` path outside comments
//! (`use` items, `{..}` groups included), resolved to the deepest source file of its
//! module path. `mod` declarations are containment, not imports; `lib.rs` and `main.rs`
//! (which declare and re-export) and `bin/` (each file its own crate) are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path of a source file relative to `src/`: `kernels/flex/host.rs` →
/// `[kernels, flex, host]`, `op/mod.rs` → `[op]`.
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file");
    if last != "mod.rs" && last != "lib.rs" {
        parts.push(last.trim_end_matches(".rs").to_string());
    }
    parts
}

/// The source file of the deepest module of `path` that has one.
fn file_of(src: &Path, path: &[String]) -> Option<PathBuf> {
    (1..=path.len()).rev().find_map(|n| {
        let dir: PathBuf = path[..n].iter().collect();
        let file = src.join(&dir).with_extension("rs");
        let module = src.join(&dir).join("mod.rs");
        [file, module].into_iter().find(|f| f.is_file())
    })
}

/// The source without comments (line comments, doc comments and block comments).
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |n| &after[n..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |n| &after[n + 2..]);
        } else if rest.starts_with('"') {
            // Skip string literals (they may hold `//` or `crate::`).
            let end = rest[1..]
                .char_indices()
                .scan(false, |escaped, (i, c)| {
                    let done = !*escaped && c == '"';
                    *escaped = !*escaped && c == '\\';
                    Some((i, done))
                })
                .find(|&(_, done)| done)
                .map_or(rest.len(), |(i, _)| i + 2);
            out.push_str("\"\"");
            rest = &rest[end..];
        } else {
            let c = rest.chars().next().expect("not empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Expands the path at the start of `text` (after its root keyword) into full paths:
/// `a::b::{c, d::e}` → `[a,b,c]`, `[a,b,d,e]`.
fn expand(text: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    let mut rest = text;
    loop {
        let ident: String = rest.chars().take_while(|&c| is_ident(c)).collect();
        if !ident.is_empty() {
            rest = &rest[ident.len()..];
            if ident != "self" {
                path.push(ident);
            }
        }
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("::") {
            rest = after.trim_start();
            if let Some(group) = rest.strip_prefix('{') {
                let mut depth = 1;
                let mut item = String::new();
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    if depth == 0 || (depth == 1 && c == ',') {
                        expand(item.trim(), path.clone(), out);
                        item.clear();
                        if depth == 0 {
                            break;
                        }
                    } else {
                        item.push(c);
                    }
                }
                return;
            }
            continue;
        }
        out.push(path);
        return;
    }
}

/// Every file each source file imports.
fn imports(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable source directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut graph = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(src).expect("under src").to_path_buf();
        if relative == Path::new("lib.rs")
            || relative == Path::new("main.rs")
            || relative.starts_with("bin")
        {
            continue;
        }
        let module = module_of(&relative);
        let code = code_of(&std::fs::read_to_string(&file).expect("readable source"));
        let mut paths = Vec::new();
        for (at, _) in code.match_indices("::") {
            let root: String = code[..at]
                .chars()
                .rev()
                .take_while(|&c| is_ident(c) || c == '$')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let base = match root.as_str() {
                "crate" | "$crate" => Vec::new(),
                "self" => module.clone(),
                "super" => module[..module.len().saturating_sub(1)].to_vec(),
                _ => continue,
            };
            // `super::super::x` is resolved by its first `super` alone: not used here.
            expand(&code[at + 2..], base, &mut paths);
        }
        let targets = paths
            .iter()
            .filter_map(|p| file_of(src, p))
            .map(|f| f.strip_prefix(src).expect("under src").to_path_buf())
            .filter(|f| f != &relative && f != Path::new("lib.rs") && f != Path::new("main.rs"))
            .collect();
        graph.insert(relative, targets);
    }
    graph
}

/// Every circle of the graph, each as the files along it.
fn circles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    fn visit(
        node: &PathBuf,
        graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        stack: &mut Vec<PathBuf>,
        done: &mut BTreeSet<PathBuf>,
        found: &mut Vec<Vec<PathBuf>>,
    ) {
        if let Some(at) = stack.iter().position(|n| n == node) {
            found.push(stack[at..].to_vec());
            return;
        }
        if done.contains(node) {
            return;
        }
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            visit(next, graph, stack, done, found);
        }
        stack.pop();
        done.insert(node.clone());
    }
    let (mut done, mut found) = (BTreeSet::new(), Vec::new());
    for node in graph.keys() {
        visit(node, graph, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

fn source_graph() -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    imports(&src)
}

#[test]
fn no_two_files_import_each_other_in_a_circle() {
    let graph = source_graph();
    let edges: usize = graph.values().map(BTreeSet::len).sum();
    assert!(
        graph.len() > 30 && edges > 60,
        "the scan found {} files and {edges} imports: it no longer reads the sources",
        graph.len()
    );
    let found = circles(&graph);
    assert!(found.is_empty(), "import circles: {found:#?}");
}

/// The `src/` of every other crate of the workspace.
fn other_crates() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    [
        "crates/lstm-cpu",
        "crates/cudnn-rnn",
        "benchmarks/lstm-bench",
        "examples",
    ]
    .iter()
    .map(|dir| root.join(dir).join("src"))
    .collect()
}

#[test]
fn no_crate_of_the_workspace_has_an_import_circle() {
    for src in other_crates() {
        let graph = imports(&src);
        let edges: usize = graph.values().map(BTreeSet::len).sum();
        assert!(
            graph.len() >= 4 && edges >= 4,
            "{}: the scan found {} files and {edges} imports",
            src.display(),
            graph.len()
        );
        let found = circles(&graph);
        assert!(
            found.is_empty(),
            "{}: import circles: {found:#?}",
            src.display()
        );
    }
}

#[test]
fn kernels_and_the_op_do_not_import_the_module_layer() {
    let graph = source_graph();
    let upward: Vec<(&PathBuf, &PathBuf)> = graph
        .iter()
        .filter(|(file, _)| file.starts_with("kernels") || file.starts_with("op"))
        .flat_map(|(file, targets)| targets.iter().map(move |t| (file, t)))
        .filter(|(_, target)| target.starts_with("module"))
        .collect();
    assert!(upward.is_empty(), "imports of module/: {upward:#?}");
}

#[test]
fn the_scan_sees_a_circle_and_an_upward_import() {
    // The checks above pass on an empty graph too: make sure the parser finds imports.
    let code = code_of(
        "use crate::a::{b::{self, C}, d}; // crate::x::y\n let s = \"crate::z\"; super::e(1);",
    );
    let mut paths = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        expand(&code[at + 7..], Vec::new(), &mut paths);
    }
    assert_eq!(
        paths,
        vec![
            vec!["a".to_string(), "b".into()],
            vec!["a".into(), "b".into(), "C".into()],
            vec!["a".into(), "d".into()],
        ]
    );
    let graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = [
        ("a.rs", vec!["b.rs"]),
        ("b.rs", vec!["c.rs"]),
        ("c.rs", vec!["a.rs"]),
    ]
    .into_iter()
    .map(|(f, t)| (f.into(), t.into_iter().map(PathBuf::from).collect()))
    .collect();
    assert_eq!(circles(&graph).len(), 1);
    let graph = source_graph();
    let module_lstm = graph
        .get(Path::new("module/lstm.rs"))
        .expect("module/lstm.rs is scanned");
    assert!(module_lstm.contains(Path::new("op/contract.rs")));
    assert!(module_lstm.contains(Path::new("module/validate.rs")));
}
