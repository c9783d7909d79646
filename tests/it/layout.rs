//! The workspace's layout keeps the flow one way, at two scales.
//!
//! - Between crates: the engine (`kube_gc`, `src/`) depends on neither the simulated cluster
//!   (`kube_gc_sim`, `sim/`) nor the command (`kube_gc_cli`, `cli/`) outside its
//!   dev-dependencies, and the simulated cluster does not depend on the command.
//! - Within each crate: every top-level module imports only modules below it (the engine's
//!   layers follow the data-flow diagram of docs/design.md, "How it is built"), so there is no
//!   import cycle and no arrow against the flow. Test code (from a file's first `#[cfg(test)]` on,
//!   and a whole `tests.rs`, which the crates declare only as `#[cfg(test)] mod tests;`) may reach
//!   further, to build its fixtures.

use std::collections::BTreeMap;
use std::path::Path;

/// One crate of the workspace: its source folder, each top-level module's layer (a module may
/// import only lower layers), and the files at the top that sit above every layer.
struct Crate {
    src: &'static str,
    layers: &'static [(&'static str, u8)],
    roots: &'static [&'static str],
}

const ENGINE: Crate = Crate {
    src: "src",
    layers: &[
        ("allocator", 0),
        ("sync", 0),
        ("rate", 0),
        ("duration", 0),
        ("feature_gates", 0),
        ("api", 1),
        ("graph", 2),
        ("leader", 2),
        ("event", 3),
        ("journal", 3),
        ("shard", 3),
        ("plan", 3),
        ("router", 4),
        ("queue", 4),
        ("recorder", 4),
        ("builder", 5),
        ("collector", 5),
        ("monitor", 5),
        ("audit", 5),
        ("migrator", 6),
        ("controller", 7),
        ("fuzzing", 8),
    ],
    roots: &["lib"],
};

/// The simulated cluster: the server's own modules, then the tools built on it.
const SIM: Crate = Crate {
    src: "sim/src",
    layers: &[
        ("calls", 0),
        ("crd", 0),
        ("defaults", 0),
        ("delete", 0),
        ("dry_run", 0),
        ("lifecycle", 0),
        ("limits", 0),
        ("meta", 0),
        ("pages", 0),
        ("patch", 0),
        ("persist", 0),
        ("status", 0),
        ("storage_version", 0),
        ("store", 0),
        ("strategy", 0),
        ("types", 0),
        ("watch", 0),
        ("managed", 1),
        ("validation", 1),
        ("http", 2),
        ("generate", 3),
        ("model", 3),
        ("simulate", 4),
        ("fuzzing", 4),
    ],
    roots: &["lib"],
};

/// The command: the endpoints and the tree below the subcommands that use them.
const CLI: Crate = Crate {
    src: "cli/src",
    layers: &[("server", 0), ("tree", 1), ("plan", 1), ("command", 2)],
    roots: &["lib", "main"],
};

const CRATES: [Crate; 3] = [ENGINE, SIM, CLI];

/// Each source file under `src` (its path relative to `src`) with its code lines: comments, test
/// files and everything from a file's first test-only item on left out.
fn code_lines(src: &Path) -> Vec<(std::path::PathBuf, Vec<String>)> {
    let mut files = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read the source folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read file");
            let test_file = path.file_name().is_some_and(|name| name == "tests.rs");
            let text = if test_file { "" } else { text.as_str() };
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            let code = code.split("#[cfg(all(test").next().unwrap_or_default();
            let lines = code.lines().filter(|l| !l.trim_start().starts_with("//"));
            let relative = path.strip_prefix(src).expect("under the source folder").to_path_buf();
            files.push((relative, lines.map(str::to_string).collect()));
        }
    }
    files
}

/// The top-level modules that each module's code names through `crate::`, with the file that
/// names them.
fn imports(src: &Path) -> BTreeMap<String, Vec<(String, String)>> {
    let mut found: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for (relative, lines) in code_lines(src) {
        let module = relative.components().next().expect("a component");
        let module = module.as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        for target in lines.iter().flat_map(|line| crate_paths(line)) {
            if target != module {
                let file = relative.display().to_string();
                found.entry(module.clone()).or_default().push((target, file));
            }
        }
    }
    found
}

/// The first segment after each `crate::` in `line`, and each name of a `use crate::{…}` list,
/// when it names a module: an item of the crate's root (`crate::SimCluster`) is the crate's own.
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
    out.retain(|n| !n.is_empty());
    out
}

#[test]
fn every_module_imports_only_the_layers_below_it() {
    let mut against = Vec::new();
    for krate in &CRATES {
        let src = crate::support::repository().join(krate.src);
        let layer = |m: &str| krate.layers.iter().find(|(name, _)| *name == m).map(|(_, l)| *l);
        for (module, targets) in imports(&src) {
            let Some(own) = layer(&module) else {
                assert!(
                    krate.roots.contains(&module.as_str()),
                    "{}/{module} has no layer",
                    krate.src
                );
                continue;
            };
            for (target, file) in targets {
                let theirs = layer(&target)
                    .unwrap_or_else(|| panic!("{}/{file} imports crate::{target}, which has no layer", krate.src));
                if theirs >= own {
                    against.push(format!(
                        "{}/{file}: {module} (layer {own}) imports {target} (layer {theirs})",
                        krate.src
                    ));
                }
            }
        }
    }
    against.sort();
    against.dedup();
    assert!(against.is_empty(), "imports against the flow:\n{}", against.join("\n"));
}

#[test]
fn the_reader_finds_every_module_in_the_layers() {
    for krate in &CRATES {
        let src = crate::support::repository().join(krate.src);
        let mut modules: Vec<String> = std::fs::read_dir(&src)
            .expect("read the source folder")
            .map(|e| {
                let name = e.expect("entry").file_name();
                name.to_string_lossy().trim_end_matches(".rs").to_string()
            })
            .filter(|m| !krate.roots.contains(&m.as_str()) && m != "tests")
            .collect();
        modules.sort();
        let mut listed: Vec<String> = krate.layers.iter().map(|(m, _)| m.to_string()).collect();
        listed.sort();
        assert_eq!(modules, listed, "{} and its layers name the same modules", krate.src);
    }
}

/// The packages named in the normal (not dev) dependency tables of a manifest.
fn normal_dependencies(manifest: &str) -> Vec<String> {
    let text = std::fs::read_to_string(crate::support::repository().join(manifest)).expect("read the manifest");
    let mut normal = false;
    let mut names = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            normal = line.ends_with("dependencies]") && !line.contains("dev-dependencies");
        } else if normal {
            if let Some((name, _)) = line.split_once('=').filter(|_| !line.starts_with('#')) {
                names.push(name.trim().to_string());
            }
        }
    }
    names
}

#[test]
fn the_engine_should_depend_on_neither_the_simulator_nor_the_command() {
    let engine = normal_dependencies("Cargo.toml");
    assert!(engine.contains(&"kube".to_string()), "the manifest is read: {engine:?}");
    for tool in [
        "kube-gc-sim",
        "kube-gc-cli",
        "axum",
        "protobuf",
        "k8s-rs-pb",
        "serde_yaml_ng",
        "rcgen",
    ] {
        assert!(!engine.contains(&tool.to_string()), "the engine depends on {tool}");
    }
    let sim = normal_dependencies("sim/Cargo.toml");
    assert!(sim.contains(&"kube-gc".to_string()), "the manifest is read: {sim:?}");
    assert!(
        !sim.contains(&"kube-gc-cli".to_string()),
        "the simulated cluster depends on the command"
    );
    // Nor does the engine's code name them (its doc-tests may, through the dev-dependency).
    let src = crate::support::repository().join(ENGINE.src);
    for (file, lines) in code_lines(&src) {
        let named: Vec<&String> = lines
            .iter()
            .filter(|l| l.contains("kube_gc_sim") || l.contains("kube_gc_cli"))
            .collect();
        assert!(
            named.is_empty(),
            "src/{} names another crate of the workspace: {named:?}",
            file.display()
        );
    }
}
