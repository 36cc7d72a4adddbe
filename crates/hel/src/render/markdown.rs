//! Markdown of an answer shown on a terminal, a line at a time as it
//! arrives: headings, emphasis, inline code, lists, block quotes, rules,
//! code blocks (set apart, shown as written) and tables fitted to the
//! width. Only what reaches a terminal is rendered: piped or redirected,
//! stdout stays the model's bytes. The text it is given is already made
//! safe for a terminal; what it adds are its own styles.

/// The rendering state of one answer.
#[derive(Default)]
pub struct Markdown {
    /// Inside a fenced code block.
    fence: bool,
    /// Table rows held until the table ends.
    table: Vec<String>,
    /// Colours and bold (else only the layout).
    pub colour: bool,
    /// The terminal's width in columns.
    pub width: usize,
}

impl Markdown {
    pub fn new(colour: bool, width: usize) -> Markdown {
        Markdown {
            colour,
            width: width.max(20),
            ..Markdown::default()
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        crate::render::paint(self.colour, code, text)
    }

    /// One complete line (without its `\n`) as shown: its lines, each
    /// ending in `\n`, or nothing while a table is held.
    pub fn line(&mut self, line: &str) -> String {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            self.fence = !self.fence;
            let mut out = self.flush();
            out.push_str(&self.paint("2", line));
            out.push('\n');
            return out;
        }
        if self.fence {
            return format!("{}\n", self.paint("36", line));
        }
        if trimmed.starts_with('|') {
            self.table.push(line.to_owned());
            return String::new();
        }
        let mut out = self.flush();
        out.push_str(&self.block(line, trimmed));
        out.push('\n');
        out
    }

    /// A line outside code and tables.
    fn block(&self, line: &str, trimmed: &str) -> String {
        let indent = &line[..line.len() - trimmed.len()];
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
            let text = self.inline(trimmed[hashes..].trim());
            return self.paint(if hashes <= 2 { "1;4" } else { "1" }, &text);
        }
        if let Some(rest) = trimmed
            .strip_prefix("> ")
            .or(trimmed.strip_prefix('>').filter(|r| r.is_empty()))
        {
            return self.paint("2", &format!("{indent}│ {}", self.inline(rest)));
        }
        let rule: String = trimmed.chars().filter(|c| !c.is_whitespace()).collect();
        if rule.len() >= 3 && (rule.chars().all(|c| c == '-') || rule.chars().all(|c| c == '*')) {
            return self.paint("2", &"─".repeat(self.width.min(40)));
        }
        for bullet in ["- ", "* ", "+ "] {
            if let Some(rest) = trimmed.strip_prefix(bullet) {
                return format!("{indent}• {}", self.inline(rest));
            }
        }
        format!("{indent}{}", self.inline(trimmed))
    }

    /// Emphasis and inline code: `**bold**`, `*italic*` or `_italic_`,
    /// `` `code` ``; markers without their pair are shown as written.
    fn inline(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while !rest.is_empty() {
            let (marker, code) = if rest.starts_with("**") {
                ("**", "1")
            } else if rest.starts_with('`') {
                ("`", "36")
            } else if rest.starts_with('*') && !rest.starts_with("* ") {
                ("*", "3")
            } else {
                let c = rest.chars().next().unwrap_or(' ');
                out.push(c);
                rest = &rest[c.len_utf8()..];
                continue;
            };
            let after = &rest[marker.len()..];
            match after.find(marker) {
                Some(end) if end > 0 => {
                    let inner = &after[..end];
                    let shown = if code == "36" {
                        inner.to_owned()
                    } else {
                        self.inline(inner)
                    };
                    if self.colour {
                        out.push_str(&self.paint(code, &shown));
                    } else if code == "36" {
                        out.push_str(&format!("`{shown}`"));
                    } else {
                        out.push_str(&shown);
                    }
                    rest = &after[end + marker.len()..];
                }
                _ => {
                    out.push_str(marker);
                    rest = after;
                }
            }
        }
        out
    }

    /// What is held (a table), shown; the state goes on.
    pub fn flush(&mut self) -> String {
        if self.table.is_empty() {
            return String::new();
        }
        let rows = std::mem::take(&mut self.table);
        self.table_lines(&rows)
    }

    /// A table's rows, fitted to the width: cells cut with `…` where the
    /// widest columns must give way.
    fn table_lines(&self, rows: &[String]) -> String {
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                let r = r.trim();
                let r = r.strip_prefix('|').unwrap_or(r);
                let r = r.strip_suffix('|').unwrap_or(r);
                r.split('|').map(|c| self.inline(c.trim())).collect()
            })
            .collect();
        let separator = |row: &Vec<String>| {
            row.iter().all(|c| {
                let c = c.trim_matches(':');
                !c.is_empty() && c.chars().all(|ch| ch == '-')
            })
        };
        let body: Vec<&Vec<String>> = cells.iter().filter(|r| !separator(r)).collect();
        let columns = body.iter().map(|r| r.len()).max().unwrap_or(0);
        if columns == 0 {
            return String::new();
        }
        let len = |s: &str| visible_len(s);
        let mut widths = vec![0usize; columns];
        for row in &body {
            for (k, c) in row.iter().enumerate() {
                widths[k] = widths[k].max(len(c));
            }
        }
        let room = self.width.saturating_sub(3 * (columns - 1));
        while widths.iter().sum::<usize>() > room {
            let Some((k, w)) = widths.iter().copied().enumerate().max_by_key(|(_, w)| *w) else {
                break;
            };
            if w <= 3 {
                break;
            }
            widths[k] = w - 1;
        }
        let mut out = String::new();
        for (n, row) in body.iter().enumerate() {
            let line: Vec<String> = (0..columns)
                .map(|k| {
                    let c = row.get(k).map(String::as_str).unwrap_or("");
                    let shown = if len(c) > widths[k] {
                        crate::confirm::fit(&strip_styles(c), widths[k])
                    } else {
                        c.to_owned()
                    };
                    let pad = widths[k].saturating_sub(len(&shown));
                    format!("{shown}{}", " ".repeat(pad))
                })
                .collect();
            let line = line.join(" │ ");
            let line = line.trim_end().to_owned();
            if n == 0 && body.len() > 1 {
                out.push_str(&self.paint("1", &line));
            } else {
                out.push_str(&line);
            }
            out.push('\n');
        }
        out
    }
}

/// `s` without the SGR sequences this module adds.
fn strip_styles(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Characters `s` takes on screen (its styles take none).
fn visible_len(s: &str) -> usize {
    strip_styles(s).chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(colour: bool, width: usize, text: &str) -> String {
        let mut md = Markdown::new(colour, width);
        let mut out: String = text.lines().map(|l| md.line(l)).collect();
        out.push_str(&md.flush());
        out
    }

    #[test]
    fn headings_emphasis_lists_quotes_and_code() {
        let text = "## Overview\nThis is **tiny** and *small*, see `a.rs`.\n- one\n> said\n```rust\nlet x = **1**;\n```\n---";
        assert_eq!(
            render(false, 80, text),
            "Overview\nThis is tiny and small, see `a.rs`.\n• one\n│ said\n```rust\nlet x = **1**;\n```\n────────────────────────────────────────\n"
        );
        let coloured = render(true, 80, "## Overview\n**b** `c`");
        assert_eq!(
            coloured,
            "\x1b[1;4mOverview\x1b[0m\n\x1b[1mb\x1b[0m \x1b[36mc\x1b[0m\n"
        );
        // A lone marker stays as written.
        assert_eq!(
            render(false, 80, "2 * 3 = 6, a ** b"),
            "2 * 3 = 6, a ** b\n"
        );
    }

    #[test]
    fn tables_fit_the_width() {
        let table = "| change | why |\n|---|---|\n| renamed the port variable everywhere | clearer |\n| x | y |";
        assert_eq!(
            render(false, 80, table),
            "change                               │ why\nrenamed the port variable everywhere │ clearer\nx                                    │ y\n"
        );
        let narrow = render(false, 30, table);
        for line in narrow.lines() {
            assert!(line.chars().count() <= 30, "{line:?}");
        }
        assert!(narrow.contains('…'), "{narrow}");
        // A table ends at the first line that is not a row.
        assert_eq!(render(false, 80, "| a |\nafter"), "a\nafter\n");
    }
}
