//! Every relative link in README.md and docs/*.md resolves: to a file or directory of the
//! repository, and, with a `#fragment` on a markdown file, to one of its headings by
//! GitHub's slug. Absolute links (http, https, mailto) are not followed: nothing leaves the
//! machine. The README links to no docs.rs page: the crates are not published yet.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The markdown files whose links are checked: the README and every page under docs/.
fn checked_files() -> Vec<PathBuf> {
    let root = root();
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The lines of `text` outside fenced code blocks, each with its number (from 1).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut in_fence = false;
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence {
            lines.push((n + 1, line));
        }
    }
    lines
}

/// `line` without its inline code spans (a link inside backticks is no link).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// The targets of the inline links and images of one line: the `(...)` after `](`.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut targets = Vec::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].trim();
        // An optional title: `(path "title")`.
        let target = target.split_whitespace().next().unwrap_or("");
        let target = target.trim_start_matches('<').trim_end_matches('>');
        targets.push(target.to_owned());
        rest = &rest[end..];
    }
    targets
}

/// GitHub's anchor for a heading's text: markup dropped, lowercased, spaces to hyphens,
/// every character but letters, digits, `-` and `_` removed.
fn slug(heading: &str) -> String {
    // Links keep their text: `[text](url)` -> `text`.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match (after.find("]("), after.find(')')) {
            (Some(close), Some(paren)) if close < paren => {
                text.push_str(&after[..close]);
                rest = &after[paren + 1..];
            }
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.chars()
        .filter(|c| *c != '`' && *c != '*')
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown file's headings, with GitHub's `-1`, `-2` for repeats.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#').trim());
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// What is wrong with one link of `file`, if anything.
fn check(file: &Path, target: &str) -> Option<String> {
    if target.starts_with("http://")
        || target.starts_with("https://")
        || target.starts_with("mailto:")
    {
        return None;
    }
    if target.is_empty() {
        return Some("an empty link".to_owned());
    }
    let (path, fragment) = match target.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (target, None),
    };
    let resolved = if path.is_empty() {
        file.to_path_buf()
    } else {
        file.parent().expect("a file has a parent").join(path)
    };
    if !resolved.exists() {
        return Some(format!("`{target}`: no such file or directory"));
    }
    let fragment = fragment?;
    if resolved.extension().is_none_or(|ext| ext != "md") {
        return Some(format!(
            "`{target}`: an anchor on a file that is not markdown"
        ));
    }
    let text = fs::read_to_string(&resolved).expect("a linked markdown file is readable");
    if anchors(&text).contains(fragment) {
        None
    } else {
        Some(format!(
            "`{target}`: no heading with the anchor `#{fragment}`"
        ))
    }
}

#[test]
fn relative_links_resolve() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in checked_files() {
        let text = fs::read_to_string(&file).expect("a checked file is readable");
        let name = file
            .strip_prefix(root())
            .unwrap_or(&file)
            .display()
            .to_string();
        for (n, line) in prose_lines(&text) {
            for target in link_targets(line) {
                checked += 1;
                if let Some(problem) = check(&file, &target) {
                    broken.push(format!("{name}:{n}: {problem}"));
                }
            }
        }
    }
    assert!(checked > 0, "no link found: the extraction is broken");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn readme_links_no_docs_rs() {
    let readme = fs::read_to_string(root().join("README.md")).expect("README.md is readable");
    let hits: Vec<_> = readme
        .lines()
        .filter(|line| line.contains("docs.rs"))
        .collect();
    assert!(
        hits.is_empty(),
        "docs.rs in README.md (the crates are not published):\n{}",
        hits.join("\n")
    );
}

#[test]
fn slugs_follow_github() {
    assert_eq!(
        slug("Async calls and deadlines"),
        "async-calls-and-deadlines"
    );
    assert_eq!(
        slug("The fleet bench (`crates/lazybreaker-fleet/benches/fleet.rs`)"),
        "the-fleet-bench-crateslazybreaker-fleetbenchesfleetrs"
    );
    assert_eq!(
        slug("What a breaker saves: the outage lab"),
        "what-a-breaker-saves-the-outage-lab"
    );
    assert_eq!(
        slug("A pool: node isolation and outlier detection"),
        "a-pool-node-isolation-and-outlier-detection"
    );
    assert_eq!(
        slug("Many instances, one dependency: the fleet-wide breaker"),
        "many-instances-one-dependency-the-fleet-wide-breaker"
    );
    assert_eq!(
        slug("On 16 and 64 cores (on paper: this machine has two)"),
        "on-16-and-64-cores-on-paper-this-machine-has-two"
    );
    let repeated = anchors("# A\n## A\n```\n# not a heading\n```\n## B\n");
    assert!(repeated.contains("a") && repeated.contains("a-1") && repeated.contains("b"));
    assert!(!repeated.contains("not-a-heading"));
}

#[test]
fn links_are_found_in_prose_only() {
    assert_eq!(
        link_targets("see [a](docs/a.md#x) and ![b](b.png \"t\")"),
        ["docs/a.md#x", "b.png"]
    );
    assert!(link_targets("`[not](a link)`").is_empty());
    assert_eq!(prose_lines("a\n```\n[x](y)\n```\nb"), [(1, "a"), (5, "b")]);
}
