//! The report: rows of figures, the table, the markdown page and the SVG chart of the ratios.

use std::fmt::Write as _;

/// What a row's figure is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    /// soe-protocol 2.3.0 on the same workload.
    Peer,
    /// The machine's own limit (bare sockets, a raw primitive).
    Limit,
    /// Nothing measured to compare with (the row only states our figure and target).
    None,
}

/// Whether a bigger figure is better (throughput) or a smaller one (latency, memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Throughput-like: more is better.
    Higher,
    /// Cost-like: less is better.
    Lower,
}

/// A target a row is held to.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// No target.
    None,
    /// ours / other must be at least this.
    RatioAtLeast(f64),
    /// ours / other must be at most this.
    RatioAtMost(f64),
    /// Our figure must be at least this, in the row's unit.
    AtLeast(f64),
    /// Our figure must be at most this, in the row's unit.
    AtMost(f64),
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Section heading the row belongs to (rows of one section are kept together).
    pub section: String,
    /// What was measured.
    pub name: String,
    /// Our figure.
    pub ours: f64,
    /// The figure compared with (the peer's or the limit's); `None` when not measured or
    /// when the peer failed the workload.
    pub other: Option<f64>,
    /// What `other` is.
    pub baseline: Baseline,
    /// Unit of both figures.
    pub unit: String,
    /// Which direction is better.
    pub better: Better,
    /// The target, if any.
    pub target: Target,
    /// A short note (e.g. "peer collapsed: 12 of 64 sessions closed").
    pub note: String,
}

impl Row {
    /// A row with no comparison, no target and no note.
    pub fn new(section: &str, name: &str, ours: f64, unit: &str, better: Better) -> Self {
        Self {
            section: section.to_owned(),
            name: name.to_owned(),
            ours,
            other: None,
            baseline: Baseline::None,
            unit: unit.to_owned(),
            better,
            target: Target::None,
            note: String::new(),
        }
    }

    /// Compares with the peer's figure.
    pub fn vs_peer(mut self, peer: Option<f64>) -> Self {
        self.other = peer;
        self.baseline = Baseline::Peer;
        self
    }

    /// Compares with a limit of the machine.
    pub fn vs_limit(mut self, limit: f64) -> Self {
        self.other = Some(limit);
        self.baseline = Baseline::Limit;
        self
    }

    /// Sets the target.
    pub fn with_target(mut self, target: Target) -> Self {
        self.target = target;
        self
    }

    /// Sets the note.
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }

    /// ours / other, when both are known and other is not zero.
    pub fn ratio(&self) -> Option<f64> {
        self.other.filter(|o| *o != 0.0).map(|o| self.ours / o)
    }

    /// Whether the target is met; `None` without a target or without the figure it needs.
    pub fn met(&self) -> Option<bool> {
        match self.target {
            Target::None => None,
            Target::RatioAtLeast(t) => self.ratio().map(|r| r >= t),
            Target::RatioAtMost(t) => self.ratio().map(|r| r <= t),
            Target::AtLeast(t) => Some(self.ours >= t),
            Target::AtMost(t) => Some(self.ours <= t),
        }
    }

    fn target_text(&self) -> String {
        let what = match self.baseline {
            Baseline::Peer => "peer",
            Baseline::Limit => "limit",
            Baseline::None => "other",
        };
        match self.target {
            Target::None => String::new(),
            Target::RatioAtLeast(t) => format!("≥ {} × {what}", fmt_num(t)),
            Target::RatioAtMost(t) => format!("≤ {} × {what}", fmt_num(t)),
            Target::AtLeast(t) => format!("≥ {} {}", fmt_num(t), self.unit),
            Target::AtMost(t) => format!("≤ {} {}", fmt_num(t), self.unit),
        }
    }
}

/// A figure with three significant digits and thousands separators.
pub fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        return "–".to_owned();
    }
    let a = x.abs();
    let decimals = if a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        3
    };
    let s = format!("{x:.decimals$}");
    let (int, frac) = s
        .split_once('.')
        .map_or((s.as_str(), None), |(i, f)| (i, Some(f)));
    let (sign, digits) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// The rows as one plain-text table (for the terminal).
pub fn text_table(rows: &[Row]) -> String {
    let mut out = String::new();
    let mut section = "";
    for r in rows {
        if r.section != section {
            section = &r.section;
            let _ = writeln!(out, "\n== {section}");
            let _ = writeln!(
                out,
                "{:<46} {:>14} {:>14} {:>8} {:<10} {:<18} met",
                "workload", "ours", "peer/limit", "ratio", "unit", "target"
            );
        }
        let _ = writeln!(
            out,
            "{:<46} {:>14} {:>14} {:>8} {:<10} {:<18} {} {}",
            r.name,
            fmt_num(r.ours),
            r.other.map_or("–".to_owned(), fmt_num),
            r.ratio()
                .map_or("–".to_owned(), |x| format!("{}×", fmt_num(x))),
            r.unit,
            r.target_text(),
            met_text(r.met()),
            r.note
        );
    }
    out
}

fn met_text(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "",
    }
}

/// The rows as markdown tables, one per section.
pub fn markdown_table(rows: &[Row]) -> String {
    let mut out = String::new();
    let mut section = "";
    for r in rows {
        if r.section != section {
            section = &r.section;
            let _ = writeln!(out, "\n### {section}\n");
            let _ = writeln!(
                out,
                "| Workload | Ours | Peer / limit | Ratio | Unit | Target | Met | Note |"
            );
            let _ = writeln!(out, "|---|---:|---:|---:|---|---|---|---|");
        }
        let other = match (r.other, r.baseline) {
            (Some(o), Baseline::Peer) => format!("{} (peer)", fmt_num(o)),
            (Some(o), _) => format!("{} (limit)", fmt_num(o)),
            (None, Baseline::Peer) => "failed".to_owned(),
            (None, _) => "–".to_owned(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            r.name,
            fmt_num(r.ours),
            other,
            r.ratio()
                .map_or("–".to_owned(), |x| format!("{}×", fmt_num(x))),
            r.unit,
            r.target_text(),
            met_text(r.met()),
            r.note
        );
    }
    out
}

/// Everything `docs/performance.md` holds besides the rows.
#[derive(Debug, Clone, Default)]
pub struct PageInfo {
    /// The machine description (CPU, cores, kernel, rustc).
    pub machine: String,
    /// How the figures were produced (the command line, quick or full).
    pub how: String,
    /// File name of the SVG chart, relative to the markdown file (linked when not empty).
    pub chart: String,
    /// Extra markdown sections appended verbatim after ours (the hook for other reports,
    /// such as the virtual-time network emulator grid).
    pub extra_sections: Vec<String>,
}

/// The whole markdown page: machine, table, targets, chart link and the extra sections.
pub fn markdown_page(rows: &[Row], info: &PageInfo) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Performance report\n");
    let _ = writeln!(
        out,
        "Our stack, soe-protocol 2.3.0 (the peer) and the machine's own limits, measured on \
         identical workloads in one process and one run. Ratio = ours / the other figure; for \
         latency and memory rows lower is better. Regenerate with `cargo xtask bench --compare` \
         (which appends docs/performance-notes.md, the hand-written part).\n"
    );
    let _ = writeln!(out, "## Machine\n\n{}\n", info.machine);
    let _ = writeln!(out, "## How\n\n{}\n", info.how);
    let _ = writeln!(out, "## Figures");
    out.push_str(&markdown_table(rows));
    let _ = writeln!(out, "\n## Targets\n");
    let targets: Vec<&Row> = rows.iter().filter(|r| r.target != Target::None).collect();
    let met = targets.iter().filter(|r| r.met() == Some(true)).count();
    let _ = writeln!(out, "{met} of {} targets met.\n", targets.len());
    for r in targets {
        let _ = writeln!(
            out,
            "- {} — {}: {} {}",
            match r.met() {
                Some(true) => "**met**",
                Some(false) => "**missed**",
                None => "not measured",
            },
            r.name,
            r.target_text(),
            if r.note.is_empty() {
                String::new()
            } else {
                format!("({})", r.note)
            }
        );
    }
    if !info.chart.is_empty() {
        let _ = writeln!(
            out,
            "\n## Chart\n\n![ours / peer and ours / limit, log scale]({})\n",
            info.chart
        );
    }
    for extra in &info.extra_sections {
        out.push('\n');
        out.push_str(extra.trim_end());
        out.push('\n');
    }
    out
}

/// A horizontal bar chart of every row's ratio on a log scale, as a standalone SVG document.
/// Throughput ratios are drawn as they are; for lower-is-better rows the bar shows other / ours,
/// so a bar right of the 1× line always means "ours is better".
pub fn svg_chart(rows: &[Row]) -> String {
    use svg::Document;
    use svg::node::element::{Line, Rectangle, Text};

    let bars: Vec<(&Row, f64)> = rows
        .iter()
        .filter_map(|r| {
            let x = r.ratio()?;
            let adv = match r.better {
                Better::Higher => x,
                Better::Lower => 1.0 / x,
            };
            (adv.is_finite() && adv > 0.0).then_some((r, adv))
        })
        .collect();
    let (label_w, plot_w, bar_h, top) = (420.0, 460.0, 18.0, 40.0);
    let height = top + bar_h * 1.4 * bars.len() as f64 + 40.0;
    let width = label_w + plot_w + 90.0;
    let (lo, hi) = (-2.0f64, 3.0f64); // 0.01× .. 1000×
    let x_of = |v: f64| label_w + (v.log10().clamp(lo, hi) - lo) / (hi - lo) * plot_w;
    let mut doc = Document::new()
        .set("width", width)
        .set("height", height)
        .set("font-family", "sans-serif")
        .set("font-size", 12)
        .add(
            Rectangle::new()
                .set("width", "100%")
                .set("height", "100%")
                .set("fill", "white"),
        )
        .add(
            Text::new(
                "Advantage of ours (× the peer in blue, × the machine limit in orange; log \
                 scale, right of 1× = ours better)",
            )
            .set("x", 10)
            .set("y", 20)
            .set("font-size", 14),
        );
    for d in lo as i32..=hi as i32 {
        let x = x_of(10f64.powi(d));
        doc = doc
            .add(
                Line::new()
                    .set("x1", x)
                    .set("y1", top)
                    .set("x2", x)
                    .set("y2", height - 30.0)
                    .set("stroke", if d == 0 { "#000" } else { "#ccc" }),
            )
            .add(
                Text::new(format!("{}×", fmt_num(10f64.powi(d))))
                    .set("x", x)
                    .set("y", height - 15.0)
                    .set("text-anchor", "middle"),
            );
    }
    for (i, (r, adv)) in bars.iter().enumerate() {
        let y = top + 4.0 + bar_h * 1.4 * i as f64;
        let x1 = x_of(1.0);
        let x2 = x_of(*adv);
        let (x, w) = if x2 >= x1 {
            (x1, x2 - x1)
        } else {
            (x2, x1 - x2)
        };
        let colour = if r.baseline == Baseline::Peer {
            "#3b6fb6"
        } else {
            "#e08a2c"
        };
        doc = doc
            .add(
                Text::new(format!("{}: {}", r.section, r.name))
                    .set("x", label_w - 6.0)
                    .set("y", y + bar_h * 0.75)
                    .set("text-anchor", "end"),
            )
            .add(
                Rectangle::new()
                    .set("x", x)
                    .set("y", y)
                    .set("width", w.max(1.0))
                    .set("height", bar_h)
                    .set("fill", colour),
            )
            .add(
                Text::new(format!("{}×", fmt_num(*adv)))
                    .set("x", x2.max(x1) + 4.0)
                    .set("y", y + bar_h * 0.75),
            );
    }
    let mut out = doc.to_string();
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_targets() {
        assert_eq!(fmt_num(465_000.0), "465,000");
        assert_eq!(fmt_num(25.54), "25.5");
        assert_eq!(fmt_num(0.5), "0.500");
        let r = Row::new("s", "n", 10.0, "µs", Better::Lower)
            .vs_limit(8.0)
            .with_target(Target::RatioAtMost(1.5));
        assert_eq!(r.met(), Some(true));
        assert!(markdown_page(std::slice::from_ref(&r), &PageInfo::default()).contains("**met**"));
        let chart = svg_chart(&[r]);
        assert!(chart.starts_with("<svg"), "{chart}");
        assert!(chart.contains("s: n"), "the bar label: {chart}");
        // Labels are escaped by the svg crate.
        let odd = Row::new("a<b", "c&d", 2.0, "x", Better::Higher).vs_limit(1.0);
        let chart = svg_chart(&[odd]);
        assert!(chart.contains("a&lt;b: c&amp;d"), "{chart}");
    }
}
