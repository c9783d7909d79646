//! The layout of `src/` follows the data-flow diagram: every module imports only modules below it
//! (README, "How it is built"), so there is no import cycle and no arrow against the flow. Test
//! code (from a file's first `#[cfg(test)]` on, and a whole `tests.rs`, which this crate declares
//! only as `#[cfg(test)] mod tests;`) may reach further, to build its fixtures.

use std::collections::BTreeMap;
use std::path::Path;

/// Each top-level module of `src/` and its layer; a module may import only lower layers.
const LAYERS: &[(&str, u8)] = &[
    ("allocator", 0),
    ("sync", 0),
    ("rate", 0),
    ("duration", 0),
    ("feature_gates", 0),
    ("api", 1),
    ("graph", 2),
    ("sim", 2),
    ("leader", 2),
    ("generate", 2),
    ("model", 2),
    ("tree", 2),
    ("event", 3),
    ("journal", 3),
    ("shard", 3),
    ("router", 4),
    ("queue", 4),
    ("recorder", 4),
    ("builder", 5),
    ("collector", 5),
    ("monitor", 5),
    ("audit", 5),
    ("controller", 6),
    ("server", 7),
    ("simulate", 7),
    ("fuzzing", 7),
];

/// The top-level modules that `module`'s non-test code names through `crate::`.
fn imports(src: &Path) -> BTreeMap<String, Vec<(String, String)>> {
    let mut found: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let relative = path.strip_prefix(src).expect("under src");
            let module = relative.components().next().expect("a component");
            let module = module.as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
            let text = std::fs::read_to_string(&path).expect("read file");
            let test_file = path.file_name().is_some_and(|name| name == "tests.rs");
            let text = if test_file { "" } else { text.as_str() };
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            let code = code.split("#[cfg(all(test").next().unwrap_or_default();
            for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for target in crate_paths(line) {
                    if target != module {
                        let file = relative.display().to_string();
                        found.entry(module.clone()).or_default().push((target, file));
                    }
                }
            }
        }
    }
    found
}

/// The first segment after each `crate::` in `line`, and each name of a `use crate::{…}` list.
fn crate_paths(line: &str) -> Vec<String> {
    let ident = |s: &str| {
        s.chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect::<String>()
    };
    let mut out = Vec::new();
    for piece in line.split("crate::").skip(1) {
        if let Some(list) = piece.strip_prefix('{') {
            out.extend(list.split(',').map(|name| ident(name.trim())).filter(|n| !n.is_empty()));
        } else {
            out.push(ident(piece));
        }
    }
    out
}

#[test]
fn every_module_imports_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layer = |m: &str| LAYERS.iter().find(|(name, _)| *name == m).map(|(_, l)| *l);
    let mut against = Vec::new();
    for (module, targets) in imports(&src) {
        let Some(own) = layer(&module) else {
            // lib.rs, main.rs and the command line sit on top of everything.
            assert!(
                ["lib", "main", "cli"].contains(&module.as_str()),
                "{module} has no layer in LAYERS"
            );
            continue;
        };
        for (target, file) in targets {
            let theirs = layer(&target).unwrap_or_else(|| panic!("{file} imports crate::{target}, which has no layer"));
            if theirs >= own {
                against.push(format!(
                    "{file}: {module} (layer {own}) imports {target} (layer {theirs})"
                ));
            }
        }
    }
    against.sort();
    against.dedup();
    assert!(against.is_empty(), "imports against the flow:\n{}", against.join("\n"));
}

#[test]
fn the_reader_finds_every_module_in_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules: Vec<String> = std::fs::read_dir(&src)
        .expect("read src")
        .map(|e| {
            e.expect("entry")
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .filter(|m| !["lib", "main", "cli"].contains(&m.as_str()))
        .collect();
    modules.sort();
    let mut listed: Vec<String> = LAYERS.iter().map(|(m, _)| m.to_string()).collect();
    listed.sort();
    assert_eq!(modules, listed, "src/ and LAYERS name the same modules");
}
