//! No function in src/ outside src/apiserver runs over [`LIMIT`] lines (the project's
//! style: functions a reader takes in at once). Counted from the `fn` line to its closing
//! brace, skipping braces in strings, characters and comments; a function's own nested
//! items count towards it. src/apiserver stands alone and is held to its own tests.

use std::path::Path;

use crate::common::sources::rust_files;

const LIMIT: usize = 80;
const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");

/// Every `(file:line name, lines)` of a function longer than `limit` in `source`.
fn long_functions(source: &str, limit: usize) -> Vec<(usize, String, usize)> {
    let lines: Vec<String> = source.lines().map(code_only).collect();
    let mut out = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else {
            continue;
        };
        if let Some(end) = closing_line(&lines[start..]) {
            let length = end + 1;
            if length > limit {
                out.push((start + 1, name, length));
            }
        }
    }
    out
}

/// The name of the function a line opens, if it opens one.
fn fn_name(line: &str) -> Option<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "fn")?;
    let before_ok = words[..at].iter().all(|w| {
        matches!(
            *w,
            "pub" | "async" | "const" | "unsafe" | "extern" | "\"C\""
        ) || w.starts_with("pub(")
    });
    let name = words.get(at + 1)?;
    let name: String = name
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (before_ok && !name.is_empty()).then_some(name)
}

/// The index of the line that closes the body opened at or after `lines[0]`; `None`
/// for a declaration without a body.
fn closing_line(lines: &[String]) -> Option<usize> {
    let mut depth = 0usize;
    let mut opened = false;
    for (i, line) in lines.iter().enumerate() {
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth = depth.saturating_sub(1),
                ';' if !opened && depth == 0 => return None,
                _ => {}
            }
            if opened && depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// A line without its comment, strings and character literals.
fn code_only(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => break,
            '"' => {
                while let Some(s) = chars.next() {
                    match s {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            '\'' => {
                // A character literal ('x', '\n', '{'), not a lifetime ('a).
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') || rest.chars().nth(1) == Some('\'') {
                    for s in chars.by_ref() {
                        if s == '\'' {
                            break;
                        }
                    }
                    out.push_str("''");
                } else {
                    out.push(c);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

#[test]
fn no_function_outside_the_api_server_is_longer_than_the_limit() {
    let files = rust_files(Path::new(SRC), &|dir| dir.ends_with("apiserver"));
    let mut long = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("a source file");
        for (line, name, length) in long_functions(&source, LIMIT) {
            let file = file
                .strip_prefix(SRC)
                .unwrap_or(&file)
                .display()
                .to_string();
            long.push(format!("src/{file}:{line} fn {name}: {length} lines"));
        }
    }
    assert!(
        long.is_empty(),
        "functions over {LIMIT} lines (split them):\n{}",
        long.join("\n")
    );
}

/// The counter itself, on a function one line over the limit and one at it, with braces
/// in strings, characters and comments that must not count.
#[test]
fn the_counter_sees_a_long_function() {
    let body = |n: usize| "    let x = 1;\n".repeat(n);
    let source = format!(
        "fn at_limit() {{\n{}}}\n\npub(crate) async fn over() {{\n    let s = \"{{\"; // }}\n    let c = '}}';\n{}}}\nfn decl();\n",
        body(LIMIT - 2),
        body(LIMIT - 3),
    );
    let long = long_functions(&source, LIMIT);
    assert_eq!(long.len(), 1, "{long:?}");
    assert_eq!((long[0].1.as_str(), long[0].2), ("over", LIMIT + 1));
}
