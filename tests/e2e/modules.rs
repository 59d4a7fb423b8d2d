//! No import circles between the modules of a crate: a module never imports, directly or through
//! other modules, a module that imports it back (STYLE.md: registry on top, vocabulary at the
//! bottom). And no file module over [`MAX_FILE_LINES`] lines before its `#[cfg(test)]` module,
//! no function over [`MAX_FN_LINES`]: past those, a file holds several things and a function
//! several steps, and each gets a name of its own.
//!
//! The graph is read from the sources: every `use` declaration (`pub use` re-exports included)
//! and every qualified path that starts at `crate`, `super`, `self` or a child module, resolved
//! to the file module that defines it. Inline modules (`mod tests { .. }`) belong to their file,
//! but paths inside them resolve from where they are (`super::*` in a test module is the file
//! itself).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::workspace_root;

/// Lines a file module may have before its `#[cfg(test)]` module.
const MAX_FILE_LINES: usize = 900;

/// Lines a function may have, from its `fn` line to its closing brace.
const MAX_FN_LINES: usize = 150;

/// A module path inside a crate (`["plan"]`, `["python", "selection"]`; the root is empty).
type ModPath = Vec<String>;

/// One reference from a module to a path, with the line it is on.
struct Reference {
    from: ModPath,
    line: usize,
    path: Vec<String>,
}

/// The file modules of a crate, by path, found from its root file's `mod` declarations.
fn file_modules(root_file: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut out = BTreeMap::new();
    let mut queue = vec![(Vec::new(), root_file.to_path_buf())];
    while let Some((path, file)) = queue.pop() {
        let text = strip(&std::fs::read_to_string(&file).unwrap_or_default());
        // Children of `a.rs` live in `a/`, of `a/mod.rs` and of the root in `a/` beside it.
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let dir = if path.is_empty() || stem == "mod" {
            file.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            file.with_extension("")
        };
        for child in declared_file_modules(&text) {
            let candidates = [
                dir.join(format!("{child}.rs")),
                dir.join(&child).join("mod.rs"),
            ];
            if let Some(found) = candidates.into_iter().find(|c| c.is_file()) {
                let mut child_path = path.clone();
                child_path.push(child);
                queue.push((child_path, found));
            }
        }
        out.insert(path, file);
    }
    out
}

/// Names of `mod name;` declarations (modules in files of their own) in stripped source.
fn declared_file_modules(text: &str) -> Vec<String> {
    let tokens = tokens(text);
    let mut out = Vec::new();
    for (i, (_, token)) in tokens.iter().enumerate() {
        if token == "mod"
            && let (Some((_, name)), Some((_, end))) = (tokens.get(i + 1), tokens.get(i + 2))
            && end == ";"
            && is_ident(name)
        {
            out.push(name.clone());
        }
    }
    out
}

fn is_ident(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
}

/// Source text with comments, string literals and character literals blanked out (lines kept).
fn strip(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && next == Some('r')))
            && !chars
                .get(i.wrapping_sub(1))
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
            && {
                let start = if c == 'b' { i + 2 } else { i + 1 };
                let hashes = chars[start.min(chars.len())..]
                    .iter()
                    .take_while(|h| **h == '#')
                    .count();
                chars.get(start + hashes) == Some(&'"')
            }
        {
            // A raw string: r"..", r#".."#, br#".."#.
            let start = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = chars[start..].iter().take_while(|h| **h == '#').count();
            let closing: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let body = start + hashes + 1;
            let rest: String = chars[body..].iter().collect();
            let len = rest.find(&closing).map_or(rest.len(), |at| {
                rest[..at].chars().count() + closing.chars().count()
            });
            for ch in &chars[i..(body + len).min(chars.len())] {
                blank(&mut out, *ch);
            }
            i = body + len;
        } else if c == '"' {
            blank(&mut out, c);
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
            if i < chars.len() {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            let literal_len = match next {
                Some('\\') => chars[i + 3..]
                    .iter()
                    .position(|ch| *ch == '\'')
                    .map(|p| p + 4),
                Some(_) if chars.get(i + 2) == Some(&'\'') => Some(3),
                _ => None,
            };
            match literal_len {
                Some(len) => {
                    for ch in &chars[i..(i + len).min(chars.len())] {
                        blank(&mut out, *ch);
                    }
                    i += len;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Identifiers (with `$crate`), `::` and single punctuation, each with its line.
fn tokens(text: &str) -> Vec<(usize, String)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' || c == '$' {
            let start = i;
            i += 1;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((line, chars[start..i].iter().collect()));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push((line, "::".to_string()));
            i += 2;
        } else {
            out.push((line, c.to_string()));
            i += 1;
        }
    }
    out
}

/// The paths a `use` tree names, from the tokens after `use` up to the `;`.
fn use_paths(tokens: &[(usize, String)]) -> Vec<Vec<String>> {
    fn tree(
        tokens: &[(usize, String)],
        at: &mut usize,
        prefix: &[String],
        out: &mut Vec<Vec<String>>,
    ) {
        let mut path = prefix.to_vec();
        while let Some((_, token)) = tokens.get(*at) {
            match token.as_str() {
                "::" => *at += 1,
                "{" => {
                    *at += 1;
                    loop {
                        tree(tokens, at, &path, out);
                        match tokens.get(*at).map(|(_, t)| t.as_str()) {
                            Some(",") => *at += 1,
                            Some("}") => {
                                *at += 1;
                                break;
                            }
                            _ => break,
                        }
                    }
                    return;
                }
                "," | "}" | ";" => break,
                "as" => {
                    *at += 2;
                    break;
                }
                "*" => {
                    *at += 1;
                    break;
                }
                "self" if path.len() > prefix.len() || !prefix.is_empty() => *at += 1,
                _ => {
                    path.push(token.clone());
                    *at += 1;
                }
            }
        }
        out.push(path);
    }
    let mut out = Vec::new();
    let mut at = 0;
    tree(tokens, &mut at, &[], &mut out);
    out
}

/// Every reference in one file module to a path inside the crate.
fn references(module: &ModPath, text: &str, children: &BTreeSet<String>) -> Vec<Reference> {
    let tokens = tokens(text);
    let mut out = Vec::new();
    // Inline modules open at a brace depth and close with it.
    let mut inline: Vec<(usize, String)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let (line, token) = (&tokens[i].0, tokens[i].1.as_str());
        let here: ModPath = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(_, name)| name.clone()))
            .collect();
        match token {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(d, _)| *d == depth) {
                    inline.pop();
                }
            }
            "mod" if tokens.get(i + 2).is_some_and(|(_, t)| t == "{") => {
                inline.push((depth, tokens[i + 1].1.clone()));
                depth += 1;
                i += 3;
                continue;
            }
            "use" => {
                let end = tokens[i..]
                    .iter()
                    .position(|(_, t)| t == ";")
                    .map_or(tokens.len(), |p| i + p);
                for path in use_paths(&tokens[i + 1..end]) {
                    out.push(Reference {
                        from: here.clone(),
                        line: *line,
                        path,
                    });
                }
                i = end + 1;
                continue;
            }
            _ => {}
        }
        let starts_path = matches!(token, "crate" | "$crate" | "super" | "self")
            || (children.contains(token) && inline.is_empty());
        let after_separator = i > 0 && tokens[i - 1].1 == "::";
        if starts_path && !after_separator && tokens.get(i + 1).is_some_and(|(_, t)| t == "::") {
            let mut path = vec![token.to_string()];
            let mut j = i + 1;
            while tokens.get(j).is_some_and(|(_, t)| t == "::")
                && tokens.get(j + 1).is_some_and(|(_, t)| is_ident(t))
            {
                path.push(tokens[j + 1].1.clone());
                j += 2;
            }
            out.push(Reference {
                from: here,
                line: *line,
                path,
            });
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// The file module a reference from `from` resolves to, when it is inside the crate.
fn resolve(
    from: &ModPath,
    path: &[String],
    modules: &BTreeMap<ModPath, PathBuf>,
) -> Option<ModPath> {
    let mut segments = path.iter().peekable();
    let mut base: ModPath = match segments.peek().map(|s| s.as_str()) {
        Some("crate" | "$crate") => {
            segments.next();
            Vec::new()
        }
        Some("super" | "self") => {
            let mut base = from.clone();
            while let Some(s) = segments.peek() {
                match s.as_str() {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                segments.next();
            }
            base
        }
        // A child module named without `self::` (2018 paths).
        Some(first) => {
            let mut child = from.clone();
            child.push(first.to_string());
            if !modules.contains_key(&child) {
                return None;
            }
            from.clone()
        }
        None => return None,
    };
    base.extend(segments.cloned());
    // The longest prefix that is a file module.
    while !modules.contains_key(&base) {
        base.pop()?;
    }
    Some(base)
}

/// Import circles of one crate: each strongly connected set of two or more file modules, with
/// the references that join them.
fn circles(crate_dir: &Path) -> Vec<String> {
    let src = crate_dir.join("src");
    let root = ["lib.rs", "main.rs"]
        .into_iter()
        .map(|f| src.join(f))
        .find(|f| f.is_file())
        .unwrap_or_else(|| panic!("no lib.rs or main.rs in {}", src.display()));
    let modules = file_modules(&root);
    let mut edges: BTreeMap<ModPath, BTreeMap<ModPath, String>> = BTreeMap::new();
    for (module, file) in &modules {
        let text = strip(&std::fs::read_to_string(file).unwrap_or_default());
        let children: BTreeSet<String> = modules
            .keys()
            .filter(|k| k.len() == module.len() + 1 && k.starts_with(module))
            .filter_map(|k| k.last().cloned())
            .collect();
        for reference in references(module, &text, &children) {
            let Some(target) = resolve(&reference.from, &reference.path, &modules) else {
                continue;
            };
            // The file's own items, reached from its inline modules, are no edge.
            if &target == module {
                continue;
            }
            let shown = format!(
                "{}:{} {}",
                file.strip_prefix(crate_dir).unwrap_or(file).display(),
                reference.line,
                reference.path.join("::")
            );
            edges
                .entry(module.clone())
                .or_default()
                .entry(target)
                .or_insert(shown);
        }
    }
    let name = |m: &ModPath| {
        if m.is_empty() {
            "crate".to_string()
        } else {
            m.join("::")
        }
    };
    strongly_connected(&modules.keys().cloned().collect::<Vec<_>>(), &edges)
        .into_iter()
        .filter(|set| set.len() > 1)
        .map(|set| {
            let members: BTreeSet<&ModPath> = set.iter().collect();
            let mut joins = Vec::new();
            for from in &set {
                for (to, shown) in edges.get(from).into_iter().flatten() {
                    if members.contains(to) {
                        joins.push(format!("    {} -> {}: {shown}", name(from), name(to)));
                    }
                }
            }
            format!(
                "{}: {}\n{}",
                crate_dir.file_name().unwrap_or_default().to_string_lossy(),
                set.iter().map(name).collect::<Vec<_>>().join(", "),
                joins.join("\n")
            )
        })
        .collect()
}

/// Tarjan's strongly connected components.
fn strongly_connected(
    nodes: &[ModPath],
    edges: &BTreeMap<ModPath, BTreeMap<ModPath, String>>,
) -> Vec<Vec<ModPath>> {
    struct State<'a> {
        edges: &'a BTreeMap<ModPath, BTreeMap<ModPath, String>>,
        index: BTreeMap<ModPath, usize>,
        low: BTreeMap<ModPath, usize>,
        stack: Vec<ModPath>,
        on_stack: BTreeSet<ModPath>,
        out: Vec<Vec<ModPath>>,
    }
    fn visit(state: &mut State<'_>, node: &ModPath) {
        let n = state.index.len();
        state.index.insert(node.clone(), n);
        state.low.insert(node.clone(), n);
        state.stack.push(node.clone());
        state.on_stack.insert(node.clone());
        let targets: Vec<ModPath> = state
            .edges
            .get(node)
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default();
        for target in targets {
            if !state.index.contains_key(&target) {
                visit(state, &target);
                let low = state.low[node].min(state.low[&target]);
                state.low.insert(node.clone(), low);
            } else if state.on_stack.contains(&target) {
                let low = state.low[node].min(state.index[&target]);
                state.low.insert(node.clone(), low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut set = Vec::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(&top);
                let done = &top == node;
                set.push(top);
                if done {
                    break;
                }
            }
            set.sort();
            state.out.push(set);
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for node in nodes {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.out
}

/// The files of a crate over [`MAX_FILE_LINES`] before their tests, and the functions over
/// [`MAX_FN_LINES`] in that part, each as `path:line: what (n lines)`.
fn oversized(crate_dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut files: Vec<PathBuf> = file_modules(&crate_dir.join("src/lib.rs"))
        .into_values()
        .chain(file_modules(&crate_dir.join("src/main.rs")).into_values())
        .collect();
    files.sort();
    files.dedup();
    for file in files {
        let Ok(source) = std::fs::read_to_string(&file) else {
            continue;
        };
        let shown = file.strip_prefix(crate_dir).unwrap_or(&file).display();
        let lines: Vec<&str> = source.lines().collect();
        let before_tests = lines
            .iter()
            .position(|l| l.trim() == "#[cfg(test)]")
            .unwrap_or(lines.len());
        if before_tests > MAX_FILE_LINES {
            found.push(format!(
                "{shown}: {before_tests} lines before its tests (at most {MAX_FILE_LINES})"
            ));
        }
        let text = strip(&lines[..before_tests].join("\n"));
        for (line, name, length) in function_lengths(&tokens(&text)) {
            if length > MAX_FN_LINES {
                found.push(format!(
                    "{shown}:{line}: fn {name} has {length} lines (at most {MAX_FN_LINES})"
                ));
            }
        }
    }
    found
}

/// Every function with a body: its line, name and length in lines (its `fn` line to its
/// closing brace). A function inside another counts in both.
fn function_lengths(tokens: &[(usize, String)]) -> Vec<(usize, String, usize)> {
    let mut out = Vec::new();
    for (at, (line, token)) in tokens.iter().enumerate() {
        // `fn name`, not the `fn(..)` of a function pointer type.
        let Some((_, name)) = tokens.get(at + 1).filter(|_| token == "fn") else {
            continue;
        };
        if !is_ident(name) {
            continue;
        }
        // The body opens at the first `{` outside the signature's parentheses; a `;` there
        // ends a declaration without one.
        let mut parens = 0usize;
        let mut open = None;
        for (i, (_, t)) in tokens.iter().enumerate().skip(at + 2) {
            match t.as_str() {
                "(" | "[" => parens += 1,
                ")" | "]" => parens = parens.saturating_sub(1),
                "{" if parens == 0 => {
                    open = Some(i);
                    break;
                }
                ";" if parens == 0 => break,
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let mut depth = 0usize;
        for (end_line, t) in &tokens[open..] {
            match t.as_str() {
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if depth == 0 {
                        out.push((*line, name.clone(), end_line - line + 1));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

#[test]
fn no_file_or_function_is_over_its_size() {
    let crates = workspace_root().join("crates");
    let mut found = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(&crates).unwrap().flatten() {
        if !entry.path().join("src").is_dir() {
            continue;
        }
        checked += 1;
        found.extend(
            oversized(&entry.path())
                .into_iter()
                .map(|f| format!("{}/{f}", entry.file_name().to_string_lossy())),
        );
    }
    assert!(checked >= 12, "crates not found under {}", crates.display());
    assert!(
        found.is_empty(),
        "too long; cut into named modules or steps:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_size_check_counts_lines_before_the_tests_and_whole_function_bodies() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("demo/src");
    std::fs::create_dir_all(&src).unwrap();
    let body = |n: usize| "    let _ = 1;\n".repeat(n);
    // 148 body lines: 150 with the `fn` line and the brace, the most there may be. A string
    // with braces, a comment with braces and a function pointer type do not confuse it.
    let short = format!(
        "pub fn short(f: fn(u8) -> u8) -> u8 {{\n    let _ = \"}}}}\"; // }}\n{}    f(1)\n}}\n",
        body(146)
    );
    let long = format!("pub fn long() {{\n{}}}\n", body(150));
    std::fs::write(
        src.join("lib.rs"),
        format!("mod big;\n{short}pub trait T {{\n    fn declared(&self);\n}}\n"),
    )
    .unwrap();
    // 902 lines before the tests, 800 after them (which do not count).
    let filler = "// filler\n".repeat(902 - 152);
    let tests = format!("#[cfg(test)]\nmod tests {{\n{}}}\n", body(800));
    std::fs::write(src.join("big.rs"), format!("{long}{filler}{tests}")).unwrap();
    let found = oversized(&tmp.path().join("demo"));
    assert_eq!(
        found,
        [
            "src/big.rs: 902 lines before its tests (at most 900)",
            "src/big.rs:1: fn long has 152 lines (at most 150)",
        ]
    );
    // The tests alone, however long, are not counted.
    std::fs::write(src.join("big.rs"), &tests).unwrap();
    assert_eq!(oversized(&tmp.path().join("demo")), Vec::<String>::new());
}

#[test]
fn no_crate_has_an_import_circle() {
    let crates = workspace_root().join("crates");
    let mut found = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(&crates).unwrap().flatten() {
        if !entry.path().join("src").is_dir() {
            continue;
        }
        checked += 1;
        found.extend(circles(&entry.path()));
    }
    assert!(checked >= 12, "crates not found under {}", crates.display());
    assert!(
        found.is_empty(),
        "modules that import each other (directly or through others):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checker_sees_circles_through_uses_paths_and_re_exports() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("demo/src");
    std::fs::create_dir_all(src.join("eco")).unwrap();
    let write = |name: &str, text: &str| std::fs::write(src.join(name), text).unwrap();
    // lib re-exports plan; plan's registry calls eco; eco imports plan's helper back.
    write(
        "lib.rs",
        "pub mod plan;\npub mod eco;\npub mod leaf;\npub use plan::Plan;\n",
    );
    write(
        "plan.rs",
        "pub struct Plan;\npub fn choose() { crate::eco::plan(); }\npub fn helper() {}\n",
    );
    write(
        "eco/mod.rs",
        "mod detect;\nuse super::plan::{helper, Plan};\n// crate::leaf::x in a comment is no reference\npub fn plan() { helper(); let _ = \"crate::lib\"; detect::run(); }\n",
    );
    write(
        "eco/detect.rs",
        "pub fn run() { crate::leaf::quote(); }\n#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn t() { run(); }\n}\n",
    );
    write("leaf.rs", "pub fn quote() {}\n");
    let found = circles(&tmp.path().join("demo"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("demo: eco, plan\n"), "{}", found[0]);
    assert!(found[0].contains("eco -> plan: src/eco/mod.rs:2 super::plan::helper"));
    assert!(found[0].contains("plan -> eco: src/plan.rs:2 crate::eco::plan"));
    // Without the call back, there is no circle: leaf, detect and the test module are below.
    write("plan.rs", "pub struct Plan;\npub fn helper() {}\n");
    assert_eq!(circles(&tmp.path().join("demo")), Vec::<String>::new());
    // A parent that re-exports its child, while the child uses the parent's own item.
    write(
        "leaf.rs",
        "pub use inner::X;\npub fn quote() {}\nmod inner;\n",
    );
    std::fs::create_dir_all(src.join("leaf")).unwrap();
    write(
        "leaf/inner.rs",
        "pub struct X;\nfn f() { super::quote(); }\n",
    );
    let found = circles(&tmp.path().join("demo"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("demo: leaf, leaf::inner\n"),
        "{}",
        found[0]
    );
}
