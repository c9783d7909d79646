//! The documentation's links stay true: in `README.md` and every `docs/*.md`, each relative link
//! names a file or directory that exists, and each `#anchor` on a Markdown target names a heading
//! of that file as GitHub slugs it. The README stays a landing page of at most
//! [`README_MAX_LINES`] lines, and links every page under `docs/`.
//!
//! Links are inline ones, `[text](target)` and `![alt](target)`, outside fenced code blocks and
//! inline code spans; `http://`, `https://` and `mailto:` targets are not followed.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

/// The most lines the README may have: the rest of the documentation lives in `docs/`.
const README_MAX_LINES: usize = 320;

/// The repository's root: the crate's manifest directory under cargo, else the current directory.
fn root() -> PathBuf {
    PathBuf::from(option_env!("CARGO_MANIFEST_DIR").unwrap_or("."))
}

/// `README.md`, then every `docs/*.md`, sorted.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ should be readable")
        .map(|entry| entry.expect("docs/ should list").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    let mut pages = vec![root.join("README.md")];
    pages.extend(docs);
    pages
}

/// A page's name as the failure messages give it: its path under the root.
fn display(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

/// For each line, whether it is prose: not a fence line (```` ``` ```` or `~~~`) nor inside one.
fn prose_lines(text: &str) -> Vec<(usize, &str, bool)> {
    let mut fence: Option<(char, usize)> = None;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
        match (fence, marker) {
            (None, Some(m)) if run >= 3 => {
                fence = Some((m, run));
                lines.push((index + 1, line, false));
            }
            (Some((m, open)), Some(c)) if c == m && run >= open && trimmed[run..].trim().is_empty() => {
                fence = None;
                lines.push((index + 1, line, false));
            }
            _ => lines.push((index + 1, line, fence.is_none())),
        }
    }
    lines
}

/// GitHub's anchor for a heading: lower case, every character but alphanumerics, spaces, `-` and
/// `_` removed, then each space turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings (ATX headings outside fences), a repeated one numbered `-1`,
/// `-2`, … as GitHub numbers them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut anchors = BTreeSet::new();
    for (_, line, prose) in prose_lines(text) {
        if !prose {
            continue;
        }
        let trimmed = line.trim_start();
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        let rest = &trimmed[hashes..];
        if line.len() - trimmed.len() > 3 || !(1..=6).contains(&hashes) || !(rest.is_empty() || rest.starts_with(' ')) {
            continue;
        }
        let text = rest.trim();
        let text = match text.trim_end_matches('#') {
            closed if closed.ends_with(' ') || closed.is_empty() => closed.trim_end(),
            _ => text,
        };
        let base = slug(text);
        let count = seen.entry(base.clone()).or_insert(0);
        anchors.insert(if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    anchors
}

/// A link's target and the line it is on.
#[derive(Debug, PartialEq)]
struct Link {
    line: usize,
    target: String,
}

/// The inline links of a page. Code spans may run over several lines of a paragraph, so the
/// prose is read a paragraph at a time (a blank line or a fence ends one).
fn links(text: &str) -> Vec<Link> {
    let mut links = Vec::new();
    let mut paragraph: Vec<(char, usize)> = Vec::new();
    for (number, line, prose) in prose_lines(text) {
        if !prose || line.trim().is_empty() {
            links.extend(paragraph_links(&mut paragraph));
            paragraph.clear();
            continue;
        }
        paragraph.extend(line.chars().map(|c| (c, number)));
        paragraph.push(('\n', number));
    }
    links.extend(paragraph_links(&mut paragraph));
    links
}

/// The links of one paragraph, once its code spans are blanked out.
fn paragraph_links(chars: &mut [(char, usize)]) -> Vec<Link> {
    blank_code_spans(chars);
    let mut links = Vec::new();
    let mut opened = false;
    let mut i = 0;
    while i < chars.len() {
        match chars[i].0 {
            '[' => opened = true,
            ']' if opened && chars.get(i + 1).is_some_and(|(c, _)| *c == '(') => {
                if let Some((target, end)) = link_target(chars, i + 2) {
                    links.push(Link {
                        line: chars[i + 2].1,
                        target,
                    });
                    opened = false;
                    i = end;
                }
            }
            _ => {}
        }
        i += 1;
    }
    links
}

/// The target of a link whose `(` ends before `start`, and the index of its closing `)`; `None`
/// when the parenthesis closes on no line of its own.
fn link_target(chars: &[(char, usize)], start: usize) -> Option<(String, usize)> {
    let mut depth = 0;
    let mut target = String::new();
    for (offset, (c, _)) in chars.get(start..)?.iter().enumerate() {
        match c {
            '\n' => return None,
            '(' => depth += 1,
            ')' if depth == 0 => {
                let target = target.trim().trim_start_matches('<');
                let target = target.split_whitespace().next().unwrap_or("").trim_end_matches('>');
                return Some((target.to_string(), start + offset));
            }
            ')' => depth -= 1,
            _ => {}
        }
        target.push(*c);
    }
    None
}

/// Replaces every code span (a run of backticks up to the next run of the same length) with
/// spaces; a run that no run of its length closes is a literal backtick.
fn blank_code_spans(chars: &mut [(char, usize)]) {
    let run_at = |chars: &[(char, usize)], i: usize| chars[i..].iter().take_while(|(c, _)| *c == '`').count();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].0 != '`' {
            i += 1;
            continue;
        }
        let open = run_at(chars, i);
        let mut j = i + open;
        let mut close = None;
        while j < chars.len() {
            if chars[j].0 == '`' {
                let run = run_at(chars, j);
                if run == open {
                    close = Some(j + run);
                    break;
                }
                j += run;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                for (c, _) in &mut chars[i..end] {
                    if *c != '\n' {
                        *c = ' ';
                    }
                }
                i = end;
            }
            None => i += open,
        }
    }
}

/// Why a link is broken, or `None` when it resolves.
fn broken(page: &Path, target: &str, anchors_of: &mut HashMap<PathBuf, BTreeSet<String>>) -> Option<String> {
    if ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| target.starts_with(scheme))
    {
        return None;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let resolved = if path.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().expect("a page lies in a folder").join(path)
    };
    if !resolved.exists() {
        return Some("no such file or directory".to_string());
    }
    let anchor = anchor.filter(|anchor| !anchor.is_empty())?;
    if resolved.extension().is_none_or(|ext| ext != "md") {
        return None;
    }
    let key = resolved.canonicalize().unwrap_or(resolved.clone());
    let known = anchors_of
        .entry(key)
        .or_insert_with(|| anchors(&fs::read_to_string(&resolved).expect("a linked Markdown file should be readable")));
    (!known.contains(anchor)).then(|| format!("no heading with the anchor #{anchor}"))
}

#[test]
fn every_relative_link_should_resolve_to_a_file_and_a_heading() {
    let root = root();
    let mut anchors_of = HashMap::new();
    let mut problems = Vec::new();
    for page in pages(&root) {
        let text = fs::read_to_string(&page).expect("a page should be readable");
        for link in links(&text) {
            if let Some(reason) = broken(&page, &link.target, &mut anchors_of) {
                problems.push(format!(
                    "{}:{}: {} ({reason})",
                    display(&root, &page),
                    link.line,
                    link.target
                ));
            }
        }
    }
    assert!(problems.is_empty(), "broken links:\n{}", problems.join("\n"));
}

#[test]
fn the_readme_should_stay_a_landing_page() {
    let root = root();
    let lines = fs::read_to_string(root.join("README.md"))
        .expect("README.md should be readable")
        .lines()
        .count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, at most {README_MAX_LINES}: move the detail into docs/"
    );
}

#[test]
fn every_docs_page_should_be_linked_from_the_readme() {
    let root = root();
    let readme = root.join("README.md");
    let text = fs::read_to_string(&readme).expect("README.md should be readable");
    let linked: BTreeSet<PathBuf> = links(&text)
        .iter()
        .filter_map(|link| {
            let path = link.target.split('#').next().unwrap_or("");
            (!path.is_empty() && !path.contains(':')).then(|| root.join(path))
        })
        .filter_map(|path| path.canonicalize().ok())
        .collect();
    let unlinked: Vec<String> = pages(&root)
        .into_iter()
        .skip(1)
        .filter(|page| !page.canonicalize().is_ok_and(|page| linked.contains(&page)))
        .map(|page| format!("{}: not linked from README.md", display(&root, &page)))
        .collect();
    assert!(unlinked.is_empty(), "{}", unlinked.join("\n"));
}

#[test]
fn slugs_should_be_githubs() {
    assert_eq!(slug("`kube-gc run`"), "kube-gc-run");
    assert_eq!(
        slug("`loadgen replay FILE --mode builder`"),
        "loadgen-replay-file---mode-builder"
    );
    assert_eq!(
        slug("Where a collected object's time goes"),
        "where-a-collected-objects-time-goes"
    );
    assert_eq!(slug("Churn, downtime and audit"), "churn-downtime-and-audit");
    assert_eq!(
        slug("10 000 objects in one namespace"),
        "10-000-objects-in-one-namespace"
    );
    let text = "# Title\n\n## Report\n\n```sh\n# not a heading\n```\n\n### Report\n";
    let expected: BTreeSet<String> = ["title", "report", "report-1"].map(String::from).into();
    assert_eq!(anchors(text), expected);
}

#[test]
fn links_should_be_found_outside_code_only() {
    let text = "\
See [a](a.md#x) and `[b](b.md)`, a ``code ` span [c](c.md)`` and [d
](d.md) and ![e](e.svg).

```md
[f](f.md)
```

A `span that runs
over a line [g](g.md)` then [h](https://example.com) and an unclosed ` [i](i.md).
";
    let links = links(text);
    let found: Vec<(usize, &str)> = links.iter().map(|link| (link.line, link.target.as_str())).collect();
    assert_eq!(
        found,
        vec![
            (1, "a.md#x"),
            (2, "d.md"),
            (2, "e.svg"),
            (9, "https://example.com"),
            (9, "i.md")
        ]
    );
}
