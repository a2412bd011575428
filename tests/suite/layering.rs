//! The house rules the source tree keeps, read from the sources themselves: the workspace's
//! crates depend only on those below them, the engine's modules read top-down, no crate has an
//! import circle among its modules, and no source file holds more than 500 lines of code
//! besides its tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace's crates from the bottom up, with their folders: a crate may depend on those
/// below it, never on one above (Cargo refuses circles between crates, not a kernel crate that
/// reaches up to the studio).
const CRATES: &[(&str, &str)] = &[
    ("cubenet-kernels", "crates/kernels"),
    ("cubenet-engine", "crates/engine"),
    ("cubenet-run-file", "crates/run_file"),
    ("cubenet-studio", "crates/studio"),
    ("cubenet", "."),
];

/// The engine's top-level modules from the bottom up: a module may use those of its own layer
/// or below, never one above.
const LAYERS: &[&[&str]] = &[
    &["atomic_file", "error_line", "plot", "quiet_panic"],
    &["device"],
    &["data"],
    &["model"],
    &["train"],
    &["bench"],
];

/// The crates whose modules the circle check reads: all of them.
const CIRCLE_FREE_CRATES: &[&str] = &[
    "crates/kernels",
    "crates/engine",
    "crates/run_file",
    "crates/studio",
    ".",
];

/// The most lines of code a source file holds before its `#[cfg(test)]` module.
const MAX_CODE_LINES: usize = 500;

/// A module's path below the crate root, e.g. `["train", "fit", "watch"]`.
type ModulePath = Vec<String>;

/// Every module of the crate rooted at `src`, with its source text.
fn modules(src: &Path) -> BTreeMap<ModulePath, String> {
    let mut found = BTreeMap::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).unwrap().with_extension("");
        let mut path: ModulePath = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if path.first().is_some_and(|first| first == "bin") {
            continue;
        }
        if path
            .last()
            .is_some_and(|last| last == "mod" || last == "lib")
        {
            path.pop();
        }
        found.insert(path, std::fs::read_to_string(&file).unwrap());
    }
    found
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The text before a file's test module, without comments: what the rules are about.
fn code_of(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    code.lines()
        .map(|line| match line.trim_start().starts_with("//") {
            true => "",
            false => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path that `code` names from the crate root or relative to its module, with `use`
/// groups (`a::{b, c::d}`) expanded: `["crate", "train", "TrainError"]`.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i == 0
            || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_' || chars[i - 1] == ':');
        if starts_word {
            for root in ["crate::", "super::", "self::"] {
                let word: String = chars[i..chars.len().min(i + root.len())].iter().collect();
                if word == root {
                    let (expanded, end) = expand(&chars, i);
                    paths.extend(expanded);
                    i = end;
                    break;
                }
            }
        }
        i += 1;
    }
    paths
}

/// The paths of the path (or `use` tree) that starts at `start`, and where it ends.
fn expand(chars: &[char], start: usize) -> (Vec<Vec<String>>, usize) {
    let mut prefix = Vec::new();
    let mut segment = String::new();
    let mut i = start;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            segment.push(c);
            i += 1;
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            prefix.push(std::mem::take(&mut segment));
            i += 2;
        } else if c == '{' && segment.is_empty() {
            // A group: each comma-separated tree below the prefix.
            let mut paths = Vec::new();
            i += 1;
            loop {
                while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
                    i += 1;
                }
                if i >= chars.len() || chars[i] == '}' {
                    break;
                }
                let (inner, end) = expand(chars, i);
                paths.extend(
                    inner
                        .into_iter()
                        .map(|tail| [prefix.clone(), tail].concat()),
                );
                i = end;
                // Skip an `as alias`.
                while i < chars.len() && !matches!(chars[i], ',' | '}') {
                    i += 1;
                }
            }
            return (paths, i + 1);
        } else {
            break;
        }
    }
    if !segment.is_empty() {
        prefix.push(segment);
    }
    (vec![prefix], i)
}

/// `named` (as written in `module`) made absolute: `super::x` in `train::fit::run` is
/// `train::fit::x`.
fn absolute(module: &ModulePath, named: &[String]) -> Option<ModulePath> {
    let mut base = module.clone();
    let mut rest = named;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    Some([base, rest.to_vec()].concat())
}

/// The module that `path` (absolute) lands in: its longest prefix that is a module, with
/// re-exports (`pub use a::b::Item` in that module) followed to where the item is defined.
fn target(
    path: &[String],
    modules: &BTreeMap<ModulePath, String>,
    reexports: &BTreeMap<(ModulePath, String), ModulePath>,
) -> ModulePath {
    let mut module: ModulePath = Vec::new();
    for (depth, segment) in path.iter().enumerate() {
        let mut next = module.clone();
        next.push(segment.clone());
        if modules.contains_key(&next) {
            module = next;
            continue;
        }
        if let Some(defined) = reexports.get(&(module.clone(), segment.clone())) {
            let mut rest = defined.clone();
            rest.extend(path[depth + 1..].iter().cloned());
            return target(&rest, modules, reexports);
        }
        break;
    }
    module
}

/// Each module's `pub use` of an item from another module: (module, name) → the path it
/// names.
fn reexports(modules: &BTreeMap<ModulePath, String>) -> BTreeMap<(ModulePath, String), ModulePath> {
    let mut found = BTreeMap::new();
    for (module, text) in modules {
        let code = code_of(text);
        for statement in code.split(';') {
            let statement = statement.trim();
            let Some(tree) = statement
                .strip_prefix("pub use ")
                .or_else(|| statement.strip_prefix("pub(crate) use "))
            else {
                continue;
            };
            let written = match tree.starts_with("crate::")
                || tree.starts_with("super::")
                || tree.starts_with("self::")
            {
                true => tree.to_string(),
                false => format!("self::{tree}"),
            };
            let chars: Vec<char> = written.chars().collect();
            for named in expand(&chars, 0).0 {
                let Some(path) = absolute(module, &named) else {
                    continue;
                };
                if let Some(name) = path.last() {
                    found.insert((module.clone(), name.clone()), path.clone());
                }
            }
        }
    }
    found
}

/// Which modules each module uses, apart from its own ancestors and descendants (a folder's
/// `mod.rs` and its files use each other by design).
fn uses(modules: &BTreeMap<ModulePath, String>) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let reexports = reexports(modules);
    let mut edges = BTreeMap::new();
    for (module, text) in modules {
        let mut used = BTreeSet::new();
        for named in named_paths(&code_of(text)) {
            let Some(path) = absolute(module, &named) else {
                continue;
            };
            let to = target(&path, modules, &reexports);
            let related = to.starts_with(module) || module.starts_with(&to);
            if !related && !to.is_empty() {
                used.insert(to);
            }
        }
        edges.insert(module.clone(), used);
    }
    edges
}

fn layer_of(module: &ModulePath) -> Option<usize> {
    let top = module.first()?;
    LAYERS
        .iter()
        .position(|layer| layer.contains(&top.as_str()))
}

fn name(module: &ModulePath) -> String {
    format!("crate::{}", module.join("::"))
}

/// The circles of `edges`: each strongly connected group of more than one module.
fn circles(edges: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Vec<Vec<ModulePath>> {
    // Kosaraju: reachability both ways.
    let reach = |from: &ModulePath, forward: bool| {
        let mut seen = BTreeSet::from([from.clone()]);
        let mut pending = vec![from.clone()];
        while let Some(at) = pending.pop() {
            let next: Vec<ModulePath> = match forward {
                true => edges.get(&at).into_iter().flatten().cloned().collect(),
                false => edges
                    .iter()
                    .filter(|(_, to)| to.contains(&at))
                    .map(|(from, _)| from.clone())
                    .collect(),
            };
            for module in next {
                if seen.insert(module.clone()) {
                    pending.push(module);
                }
            }
        }
        seen
    };
    let mut grouped = BTreeSet::new();
    let mut found = Vec::new();
    for module in edges.keys() {
        if grouped.contains(module) {
            continue;
        }
        let forward = reach(module, true);
        let backward = reach(module, false);
        let group: Vec<ModulePath> = forward.intersection(&backward).cloned().collect();
        grouped.extend(group.iter().cloned());
        if group.len() > 1 {
            found.push(group);
        }
    }
    found
}

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The modules of the crate in `folder` (relative to the workspace's root).
fn crate_modules(folder: &str) -> BTreeMap<ModulePath, String> {
    modules(&workspace_root().join(folder).join("src"))
}

/// The workspace crates that the manifest in `folder` depends on, in any of its dependency
/// tables.
fn workspace_dependencies(folder: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(workspace_root().join(folder).join("Cargo.toml")).unwrap();
    let manifest: toml::Table = text.parse().unwrap();
    let mut tables: Vec<&toml::Table> = Vec::new();
    for key in ["dependencies", "dev-dependencies", "build-dependencies"] {
        tables.extend(manifest.get(key).and_then(toml::Value::as_table));
    }
    let targets = manifest.get("target").and_then(toml::Value::as_table);
    for target in targets.into_iter().flat_map(|t| t.values()) {
        for key in ["dependencies", "dev-dependencies"] {
            tables.extend(target.get(key).and_then(toml::Value::as_table));
        }
    }
    tables
        .iter()
        .flat_map(|table| table.keys())
        .filter(|name| CRATES.iter().any(|(krate, _)| krate == name))
        .cloned()
        .collect()
}

#[test]
fn crates_depend_only_on_the_crates_below_them() {
    let mut upward = Vec::new();
    for (position, (krate, folder)) in CRATES.iter().enumerate() {
        for used in workspace_dependencies(folder) {
            let below = CRATES[..position].iter().any(|(name, _)| *name == used);
            // A crate's tests may turn on its own test features.
            if !below && used != *krate {
                upward.push(format!("{krate} depends on {used}"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "crates that depend on a crate above them:\n{}",
        upward.join("\n")
    );
    let manifest = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
    for (_, folder) in &CRATES[..CRATES.len() - 1] {
        assert!(
            manifest.contains(&format!("\"{folder}\"")),
            "{folder} is not a member of the workspace"
        );
    }
}

#[test]
fn engine_modules_use_only_their_own_layer_or_lower_ones() {
    let modules = crate_modules("crates/engine");
    assert!(modules.len() > 50, "the sources were not found");
    let mut upward = Vec::new();
    for (module, used) in uses(&modules) {
        let Some(layer) = layer_of(&module) else {
            assert!(
                module.is_empty(),
                "{} is in no layer of LAYERS",
                name(&module)
            );
            continue;
        };
        for to in used {
            let to_layer = layer_of(&to).unwrap_or_else(|| panic!("{} is in no layer", name(&to)));
            if to_layer > layer {
                upward.push(format!("{} uses {}", name(&module), name(&to)));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "modules that use a higher layer:\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_module_is_part_of_an_import_circle() {
    let mut listed = Vec::new();
    for folder in CIRCLE_FREE_CRATES {
        let modules = crate_modules(folder);
        assert!(modules.len() > 3, "the sources of {folder} were not found");
        for group in circles(&uses(&modules)) {
            let members: Vec<String> = group.iter().map(name).collect();
            listed.push(format!("{folder}: {}", members.join(" ↔ ")));
        }
    }
    assert!(listed.is_empty(), "import circles:\n{}", listed.join("\n"));
}

#[test]
fn the_circle_check_finds_a_circle() {
    // Two sibling files that use each other, one of them through its parent's re-export.
    let modules = BTreeMap::from([
        (
            vec!["a".to_string()],
            "mod x;\nmod y;\npub use y::Why;\n".to_string(),
        ),
        (
            vec!["a".into(), "x".into()],
            "use crate::a::Why;\n".to_string(),
        ),
        (
            vec!["a".into(), "y".into()],
            "use super::x::{self, Ex};\n".to_string(),
        ),
    ]);
    let found = circles(&uses(&modules));
    assert_eq!(
        found,
        vec![vec![
            vec!["a".to_string(), "x".into()],
            vec!["a".into(), "y".into()]
        ]]
    );
}

#[test]
fn no_source_file_holds_more_than_500_lines_of_code() {
    let root = workspace_root();
    let mut long = Vec::new();
    let crate_sources = CRATES.iter().map(|(_, folder)| format!("{folder}/src"));
    let dirs: Vec<String> = crate_sources
        .chain(["ddp/src".into(), "examples".into()])
        .collect();
    for dir in &dirs {
        for file in rust_files(&root.join(dir)) {
            let text = std::fs::read_to_string(&file).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            let lines = code.lines().count();
            if lines > MAX_CODE_LINES {
                long.push(format!(
                    "{} ({lines} lines)",
                    file.strip_prefix(root).unwrap().display()
                ));
            }
        }
    }
    assert!(
        long.is_empty(),
        "files over {MAX_CODE_LINES} lines of code:\n{}",
        long.join("\n")
    );
}
