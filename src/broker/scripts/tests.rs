//! Header checks of the Lua scripts: every registered script opens with a
//! comment header that names its file and documents its `KEYS[n]`,
//! `ARGV[n]` and `Returns`; these tests hold each header to the body that
//! follows it, so a header cannot drift from the code it describes. Where
//! a Rust call site builds its invocation in one chain (`scripts::X.key(..)
//! .arg(..).invoke_async(..)`), the number of keys and args it passes is
//! checked against the header too; call sites that build it in steps
//! (`prepare_invoke`, loops) are left to the integration tests.
//!
//! Header forms understood (one documented item per line, starting
//! `-- KEYS[` or `-- ARGV[`; further items may follow on the same line):
//! `KEYS[3]` one index; `ARGV[3] .. ARGV[11]` a range; `KEYS[14..]`,
//! `KEYS[1..n]`, `ARGV[12] ..`, `ARGV[4] .. ARGV[3+W]` and
//! `ARGV[2], ARGV[3], ...` every index from the first on (variadic).

use std::collections::BTreeSet;

use super::all;

/// Which indices of `KEYS` or `ARGV` a header documents.
#[derive(Debug, Default)]
struct Documented {
    fixed: BTreeSet<usize>,
    /// Every index from this one on (a variable number of items).
    from: Option<usize>,
}

impl Documented {
    fn covers(&self, i: usize) -> bool {
        self.fixed.contains(&i) || self.from.is_some_and(|f| i >= f)
    }
}

/// How a body reads `KEYS` or `ARGV`.
#[derive(Debug, Default)]
struct Used {
    /// Indices read as literals (`ARGV[2]`).
    literal: BTreeSet<usize>,
    /// Read with a computed index, by length or as a whole table
    /// (`KEYS[i]`, `#ARGV`, `ipairs(KEYS)`, `f(ARGV, 4)`).
    dynamic: bool,
}

/// Occurrences of `name` as a word in `text`: (byte offset, what follows).
fn occurrences<'a>(text: &'a str, name: &str) -> Vec<(usize, &'a str)> {
    let mut out = Vec::new();
    let mut start = 0;
    while let Some(pos) = text[start..].find(name) {
        let at = start + pos;
        let before = text[..at].chars().next_back();
        let after = &text[at + name.len()..];
        let word_before = before.is_some_and(|c| c.is_alphanumeric() || c == '_');
        let word_after = after
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !word_before && !word_after {
            out.push((at, after));
        }
        start = at + name.len();
    }
    out
}

/// `[3]...` → (3, the text after `]`); `[14..]`/`[1..n]` → (14, `None`
/// marks variadic); anything else → `None`.
fn bracket(after: &str) -> Option<(usize, Option<&str>)> {
    let inner = after.strip_prefix('[')?;
    let close = inner.find(']')?;
    let (index, rest) = (&inner[..close], &inner[close + 1..]);
    if let Ok(i) = index.parse() {
        return Some((i, Some(rest)));
    }
    let (first, _) = index.split_once("..")?;
    Some((first.trim().parse().ok()?, None))
}

/// What the header lines document for `name` (`KEYS` or `ARGV`).
fn documented(header: &[&str], name: &str) -> Documented {
    let mut doc = Documented::default();
    for line in header {
        let text = line.trim_start_matches('-').trim_start();
        if !text.starts_with("KEYS[") && !text.starts_with("ARGV[") {
            continue;
        }
        let mut skip_to = 0;
        for (at, after) in occurrences(text, name) {
            if at < skip_to {
                continue;
            }
            let Some((i, rest)) = bracket(after) else {
                continue;
            };
            let Some(rest) = rest else {
                doc.from = Some(doc.from.map_or(i, |f| f.min(i)));
                continue;
            };
            let trimmed = rest.trim_start();
            if let Some(range) = trimmed.strip_prefix("..") {
                let range = range.trim_start();
                match range.strip_prefix(name).and_then(bracket) {
                    Some((end, Some(_))) => {
                        doc.fixed.extend(i..=end);
                        skip_to = text.len() - range.len() + 1;
                    }
                    _ => {
                        doc.from = Some(doc.from.map_or(i, |f| f.min(i)));
                        skip_to = text.len();
                    }
                }
            } else if trimmed.starts_with(',') && trimmed.contains("...") {
                doc.from = Some(doc.from.map_or(i, |f| f.min(i)));
                skip_to = text.len();
            } else {
                doc.fixed.insert(i);
            }
        }
    }
    doc
}

/// The body without its comments (`--` to the end of the line).
fn code_of(body: &[&str]) -> String {
    body.iter()
        .map(|l| l.find("--").map_or(*l, |p| &l[..p]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// How `code` reads `name`.
fn used(code: &str, name: &str) -> Used {
    let mut u = Used::default();
    for (_, after) in occurrences(code, name) {
        match bracket(after) {
            Some((i, Some(_))) => {
                u.literal.insert(i);
            }
            _ => u.dynamic = true,
        }
    }
    u
}

/// A file's opening comment block and the lines after it.
fn split_header(text: &str) -> (Vec<&str>, Vec<&str>) {
    let lines: Vec<&str> = text.lines().collect();
    let n = lines
        .iter()
        .position(|l| !l.starts_with("--"))
        .unwrap_or(lines.len());
    (lines[..n].to_vec(), lines[n..].to_vec())
}

/// Every script's header names its file, documents what it returns, and
/// documents exactly the KEYS and ARGV its body reads: no literal index
/// beyond the documented ones, every documented index read (unless the
/// body reads the table by a computed index or whole), and a documented
/// variable number of items read by a computed index.
#[test]
fn every_header_matches_its_script() {
    let mut problems = Vec::new();
    for reg in all() {
        let (file, text) = *reg.files.last().expect("a script has files");
        assert!(!file.starts_with("lib/"), "{}: own file last", reg.name);
        let (header, body) = split_header(text);
        let op = file.rsplit('/').next().unwrap_or(file);
        if !header
            .first()
            .is_some_and(|l| l.starts_with(&format!("-- {op}:")))
        {
            problems.push(format!("{file}.lua: header does not open with `-- {op}:`"));
        }
        if !header.iter().any(|l| {
            l.trim_start_matches('-')
                .trim_start()
                .starts_with("Returns")
        }) {
            problems.push(format!("{file}.lua: header documents no `Returns`"));
        }
        let code = code_of(&body);
        for name in ["KEYS", "ARGV"] {
            let doc = documented(&header, name);
            let use_ = used(&code, name);
            for i in &use_.literal {
                if !doc.covers(*i) {
                    problems.push(format!(
                        "{file}.lua: {name}[{i}] is read but not documented"
                    ));
                }
            }
            if !use_.dynamic {
                for i in doc.fixed.iter().filter(|i| !use_.literal.contains(i)) {
                    problems.push(format!(
                        "{file}.lua: {name}[{i}] is documented but never read"
                    ));
                }
                if let Some(f) = doc.from {
                    problems.push(format!(
                        "{file}: {name}[{f}..] documented as a variable number of items, \
                         but the body reads only literal indices"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `lib/` files define functions only: they read no KEYS or ARGV (callers
/// pass what they need), and each opens with `-- lib/<name>:`.
#[test]
fn lib_files_take_everything_as_parameters() {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for reg in all() {
        for (file, text) in &reg.files[..reg.files.len() - 1] {
            assert!(
                file.starts_with("lib/"),
                "{}: {file} is not a lib file",
                reg.name
            );
            if !seen.insert(*file) {
                continue;
            }
            let (header, body) = split_header(text);
            if !header
                .first()
                .is_some_and(|l| l.starts_with(&format!("-- {file}:")))
            {
                problems.push(format!(
                    "{file}.lua: header does not open with `-- {file}:`"
                ));
            }
            let code = code_of(&body);
            for name in ["KEYS", "ARGV"] {
                if !occurrences(&code, name).is_empty() {
                    problems.push(format!("{file}.lua: reads {name}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every `.lua` file under `src/broker/scripts/` is registered (as an
/// operation or a lib file), no operation file is registered twice and no
/// two scripts are the same code.
#[test]
fn every_lua_file_is_registered() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/src/broker/scripts");
    let mut on_disk = BTreeSet::new();
    for dir in ["", "lib/"] {
        for entry in std::fs::read_dir(format!("{root}/{dir}")).expect("scripts dir") {
            let name = entry.expect("dir entry").file_name();
            let name = name.to_string_lossy();
            if let Some(stem) = name.strip_suffix(".lua") {
                on_disk.insert(format!("{dir}{stem}"));
            }
        }
    }
    let mut registered = BTreeSet::new();
    let mut ops = BTreeSet::new();
    let mut hashes = BTreeSet::new();
    for reg in all() {
        let (own, _) = reg.files.last().expect("a script has files");
        assert!(ops.insert(*own), "{own} is registered twice");
        assert!(
            hashes.insert(reg.script.get_hash()),
            "{}: same code as another",
            reg.name
        );
        registered.extend(reg.files.iter().map(|(f, _)| f.to_string()));
    }
    let unregistered: Vec<_> = on_disk.difference(&registered).collect();
    assert!(unregistered.is_empty(), "not registered: {unregistered:?}");
}

/// The parser reads each header form it documents.
#[test]
fn header_forms() {
    let header = [
        "-- x: y",
        "-- KEYS[1] a",
        "-- KEYS[14..] b",
        "-- ARGV[1] c; ARGV[3] .. ARGV[5] d",
        "-- ARGV[7] .. ARGV[6+W] e",
        "-- not a doc line: KEYS[9]",
    ];
    let keys = documented(&header, "KEYS");
    assert_eq!(keys.fixed, BTreeSet::from([1]));
    assert_eq!(keys.from, Some(14));
    let argv = documented(&header, "ARGV");
    assert_eq!(argv.fixed, BTreeSet::from([1, 3, 4, 5]));
    assert_eq!(argv.from, Some(7));
    let pairs = documented(&["-- ARGV[3], ARGV[4], ... pairs"], "ARGV");
    assert_eq!((pairs.fixed.len(), pairs.from), (0, Some(3)));
    let open = documented(&["-- ARGV[12] .. one per queue"], "ARGV");
    assert_eq!(open.from, Some(12));
    let u = used(
        &code_of(&["local a = ARGV[2] .. KEYS[i] -- ARGV[9]"]),
        "ARGV",
    );
    assert_eq!((u.literal, u.dynamic), (BTreeSet::from([2]), false));
    assert!(used("for _, k in ipairs(KEYS) do", "KEYS").dynamic);
    assert!(used("f(ARGV, 4)", "ARGV").dynamic);
}

/// The `.key(..)` and `.arg(..)` calls of the method chain that starts at
/// the beginning of `rest` (just after `scripts::NAME`), up to
/// `.invoke_async(..)`: `None` when the chain holds anything else.
fn chain_counts(rest: &str) -> Option<(usize, usize)> {
    let (mut keys, mut args) = (0, 0);
    let mut s = rest;
    loop {
        s = s.trim_start().strip_prefix('.')?;
        let name_len = s
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        let (method, after) = s.split_at(name_len);
        let after = after.strip_prefix('(')?;
        // Skip to the matching parenthesis (string literals included).
        let (mut depth, mut in_str, mut end) = (1, false, None);
        let mut chars = after.char_indices();
        while let Some((i, c)) = chars.next() {
            match (in_str, c) {
                (true, '\\') => {
                    chars.next();
                }
                (_, '"') => in_str = !in_str,
                (false, '(') => depth += 1,
                (false, ')') => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        s = &after[end? + 1..];
        match method {
            "key" => keys += 1,
            "arg" => args += 1,
            "invoke_async" => return Some((keys, args)),
            _ => return None,
        }
    }
}

/// Rust sources under `dir`, recursively: (path, text).
fn rust_sources(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).expect("source dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("source file");
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
            let shown = path.strip_prefix(root).unwrap_or(&path).display();
            out.push((shown.to_string(), text));
        }
    }
}

/// Every call site that passes a script's keys and args in one chain
/// passes as many as its header documents (at least the fixed ones before
/// a variable part).
#[test]
fn call_sites_pass_the_documented_keys_and_args() {
    let mut sources = Vec::new();
    rust_sources(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src")),
        &mut sources,
    );
    let mut problems = Vec::new();
    let mut checked = 0;
    for reg in all() {
        let (file, text) = *reg.files.last().expect("a script has files");
        let (header, _) = split_header(text);
        let expected = |name: &str| {
            let doc = documented(&header, name);
            let fixed = doc.fixed.len();
            assert_eq!(
                doc.fixed.iter().copied().collect::<Vec<_>>(),
                (1..=fixed).collect::<Vec<_>>(),
                "{file}.lua: {name} documented with gaps"
            );
            (fixed, doc.from.is_some())
        };
        let (keys, argv) = (expected("KEYS"), expected("ARGV"));
        let needle = format!("scripts::{}", reg.name);
        for (path, source) in &sources {
            for (at, rest) in occurrences(source, &needle) {
                let Some((k, a)) = chain_counts(rest) else {
                    continue;
                };
                checked += 1;
                let line = source[..at].lines().count();
                for (what, (want, open), got) in [("keys", keys, k), ("args", argv, a)] {
                    if (open && got < want) || (!open && got != want) {
                        problems.push(format!(
                            "{path}:{line}: {} passes {got} {what}, {file}.lua documents {want}{}",
                            reg.name,
                            if open { " and more" } else { "" }
                        ));
                    }
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} call sites found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Commands our scripts call that never write.
const READ_COMMANDS: [&str; 20] = [
    "EXISTS",
    "GET",
    "HGET",
    "HMGET",
    "HSTRLEN",
    "LINDEX",
    "LLEN",
    "LRANGE",
    "MEMORY",
    "MGET",
    "SCARD",
    "SMEMBERS",
    "SSCAN",
    "TYPE",
    "ZCARD",
    "ZRANGE",
    "ZRANGEBYSCORE",
    "ZREVRANGE",
    "ZREVRANGEBYSCORE",
    "ZSCORE",
];

/// The commands a script's text calls by name (`redis.call("X"` and
/// `redis.pcall("X"`), and whether it calls one through a variable.
fn called(text: &str) -> (BTreeSet<String>, bool) {
    let mut names = BTreeSet::new();
    let mut by_variable = false;
    for call in ["redis.call(", "redis.pcall("] {
        for (at, _) in text.match_indices(call) {
            let rest = &text[at + call.len()..];
            match rest.strip_prefix('"') {
                Some(r) => {
                    names.insert(r[..r.find('"').unwrap()].to_string());
                }
                // lib/memory_usage reads with `redis.call(range, ...)`,
                // `range` being "ZRANGE" or "LRANGE".
                None if rest.starts_with("range,") => {
                    names.insert("ZRANGE".into());
                }
                None => by_variable = true,
            }
        }
    }
    (names, by_variable)
}

/// A script marked `read_only` (strict form `#!lua flags=no-writes`) calls
/// read commands only; every other script writes. Redis refuses a write
/// from a `no-writes` script, and refuses an unmarked script under OOM, so
/// the marks must follow the code.
#[test]
fn read_only_marks_follow_the_commands() {
    for reg in all() {
        let text: String = reg.files.iter().map(|(_, t)| *t).collect();
        let (names, by_variable) = called(&text);
        let writes: Vec<_> = names
            .iter()
            .filter(|n| !READ_COMMANDS.contains(&n.as_str()))
            .collect();
        let reads_only = writes.is_empty() && !by_variable;
        assert_eq!(
            reg.read_only, reads_only,
            "{}: marked read_only {} but calls {names:?} (variable: {by_variable})",
            reg.name, reg.read_only
        );
        let strict = reg.script.strict();
        let code = &text;
        let expected_first = if reg.read_only {
            "#!lua flags=no-writes"
        } else {
            "#!lua"
        };
        assert_ne!(strict.get_hash(), redis::Script::new(code).get_hash());
        assert_eq!(
            strict.get_hash(),
            redis::Script::new(&format!("{expected_first}\n{code}")).get_hash(),
            "{}",
            reg.name
        );
    }
}
