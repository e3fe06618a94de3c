//! The benchmark grid: round trips × conditions × workloads × stacks, and its report.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::run::{Condition, RunConfig, RunResult, run};
use crate::stack::StackKind;
use crate::workload::{Verdict, Workload};

/// Which part of the grid to run, and how long.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GridOptions {
    /// 5 s of traffic per run instead of 20 s, and 20 s robustness runs instead of 60 s.
    pub quick: bool,
    /// Seeds; every cell runs once per seed and aggregates.
    pub seeds: Vec<u64>,
    /// Stacks to run.
    pub stacks: Vec<StackKind>,
    /// Workloads to run.
    pub workloads: Vec<Workload>,
    /// Round trips to run.
    pub rtts: Vec<Duration>,
    /// Keep only conditions whose name contains one of these (all when empty). The loss-free
    /// baseline always runs, since the other rows are judged against it.
    pub conditions: Vec<String>,
    /// Whether to run the robustness rows (30 % loss and 10 % burst loss, long runs) for the
    /// targets table.
    pub robustness: bool,
    /// Bottleneck rate per direction, bytes per second.
    pub rate: u64,
    /// Bottleneck queue per direction, datagrams.
    pub queue: usize,
}

impl Default for GridOptions {
    /// The full grid, one seed.
    fn default() -> Self {
        Self {
            quick: false,
            seeds: vec![1],
            stacks: StackKind::ALL.to_vec(),
            workloads: Workload::ALL.to_vec(),
            rtts: [1, 30, 150].map(Duration::from_millis).to_vec(),
            conditions: Vec::new(),
            robustness: true,
            rate: 1_000_000,
            queue: 64,
        }
    }
}

impl GridOptions {
    /// The quick grid (5 s runs).
    pub fn quick() -> Self {
        Self {
            quick: true,
            ..Self::default()
        }
    }

    fn duration(&self) -> Duration {
        Duration::from_secs(if self.quick { 5 } else { 20 })
    }

    fn robustness_duration(&self) -> Duration {
        Duration::from_secs(if self.quick { 20 } else { 60 })
    }
}

/// The conditions of the grid, in report order.
pub fn grid_conditions() -> Vec<Condition> {
    let mut c: Vec<Condition> = [0.0, 0.01, 0.05, 0.10, 0.20]
        .into_iter()
        .map(Condition::loss)
        .collect();
    c.push(Condition::burst());
    c.push(Condition::reorder());
    c.push(Condition::duplicate());
    c
}

/// One cell: one stack, workload, round trip and condition, aggregated over seeds.
#[derive(Debug, Clone)]
pub struct Cell {
    /// The stack.
    pub stack: StackKind,
    /// The workload.
    pub workload: Workload,
    /// The round trip.
    pub rtt: Duration,
    /// The condition's name.
    pub condition: String,
    /// The condition's mean loss.
    pub mean_loss: f64,
    /// Simulated traffic time per run.
    pub duration: Duration,
    /// Mean goodput over seeds, bytes per simulated second.
    pub goodput: f64,
    /// Goodput over `(1 - loss) ×` the loss-free goodput of the same stack, workload and RTT.
    pub fraction_of_ideal: f64,
    /// Latency percentiles over all seeds' samples, in RTTs: p50, p99, max.
    pub latency_rtts: Option<[f64; 3]>,
    /// Resends per packet sent first (all seeds summed).
    pub resends_per_packet: f64,
    /// Runs whose session died (or never connected).
    pub deaths: usize,
    /// Message accounting summed over seeds.
    pub verdict: Verdict,
    /// Seeds of the runs that were not clean, with what went wrong.
    pub failures: Vec<String>,
    /// Runs aggregated.
    pub runs: usize,
}

impl Cell {
    fn from_runs(config: &RunConfig, results: &[RunResult]) -> Self {
        let mut lat: Vec<Duration> = results
            .iter()
            .flat_map(|r| r.latencies.iter().copied())
            .collect();
        lat.sort_unstable();
        let rtt = config.rtt.as_secs_f64().max(1e-9);
        let latency_rtts = (!lat.is_empty()).then(|| {
            [
                percentile(&lat, 0.50),
                percentile(&lat, 0.99),
                lat[lat.len() - 1],
            ]
            .map(|d| d.as_secs_f64() / rtt)
        });
        let sent: u64 = results.iter().map(|r| r.counters.packets_sent).sum();
        let resent: u64 = results.iter().map(|r| r.counters.packets_resent).sum();
        let mut verdict = Verdict::default();
        for r in results {
            verdict.add(&r.verdict);
        }
        let failures = results
            .iter()
            .filter(|r| !r.is_clean())
            .map(|r| {
                format!(
                    "seed {}: {}{:?}",
                    r.seed,
                    r.death
                        .as_deref()
                        .map_or(String::new(), |d| format!("{d}; ")),
                    r.verdict
                )
            })
            .collect();
        Self {
            stack: config.stack,
            workload: config.workload,
            rtt: config.rtt,
            condition: config.condition.name.clone(),
            mean_loss: config.condition.mean_loss(),
            duration: config.duration,
            goodput: results.iter().map(|r| r.goodput).sum::<f64>() / results.len().max(1) as f64,
            fraction_of_ideal: f64::NAN,
            latency_rtts,
            resends_per_packet: if sent == 0 {
                0.0
            } else {
                resent as f64 / sent as f64
            },
            deaths: results
                .iter()
                .filter(|r| r.death.is_some() || !r.connected)
                .count(),
            verdict,
            failures,
            runs: results.len(),
        }
    }

    fn violations(&self) -> u64 {
        let v = &self.verdict;
        v.lost + v.duplicated + v.reordered + v.corrupted
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let n = sorted.len();
    let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
    sorted[rank - 1]
}

/// One line of the targets table.
#[derive(Debug, Clone)]
pub struct Target {
    /// The stack.
    pub stack: StackKind,
    /// The workload.
    pub workload: Workload,
    /// The round trip.
    pub rtt: Duration,
    /// What is required.
    pub requirement: String,
    /// What was measured.
    pub measured: String,
    /// Whether it holds.
    pub met: bool,
}

/// The grid's results.
#[derive(Debug, Clone)]
pub struct GridReport {
    /// The options it ran with.
    pub options: GridOptions,
    /// Every cell of the main grid.
    pub cells: Vec<Cell>,
    /// The robustness cells (30 % loss, 10 % burst loss, long runs).
    pub robustness: Vec<Cell>,
    /// The targets, each met or missed.
    pub targets: Vec<Target>,
    /// Wall time the grid took.
    pub wall_time: Duration,
}

/// Runs the grid.
pub fn run_grid(opts: &GridOptions) -> GridReport {
    let started = Instant::now();
    let conditions: Vec<Condition> = grid_conditions()
        .into_iter()
        .filter(|c| {
            c.loss == 0.0 && c.burst.is_none() && c.reorder == 0.0 && c.duplicate == 0.0
                || opts.conditions.is_empty()
                || opts.conditions.iter().any(|f| c.name.contains(f.as_str()))
        })
        .collect();
    let run_cell = |stack, workload, rtt, condition: &Condition, duration| {
        let configs: Vec<RunConfig> = opts
            .seeds
            .iter()
            .map(|&seed| RunConfig {
                rate: opts.rate,
                queue: opts.queue,
                ..RunConfig::new(stack, workload, rtt, condition.clone(), seed)
                    .with_duration(duration)
            })
            .collect();
        let results: Vec<RunResult> = configs.iter().map(run).collect();
        Cell::from_runs(&configs[0], &results)
    };
    let mut cells = Vec::new();
    for &workload in &opts.workloads {
        for &rtt in &opts.rtts {
            for condition in &conditions {
                for &stack in &opts.stacks {
                    cells.push(run_cell(stack, workload, rtt, condition, opts.duration()));
                }
            }
        }
    }
    // Judge each cell against the loss-free one of its stack, workload and RTT.
    let baselines: Vec<(StackKind, Workload, Duration, f64)> = cells
        .iter()
        .filter(|c| c.condition == Condition::loss(0.0).name)
        .map(|c| (c.stack, c.workload, c.rtt, c.goodput))
        .collect();
    for c in &mut cells {
        if let Some(&(_, _, _, base)) = baselines
            .iter()
            .find(|b| (b.0, b.1, b.2) == (c.stack, c.workload, c.rtt))
        {
            c.fraction_of_ideal = c.goodput / ((1.0 - c.mean_loss) * base).max(1e-9);
        }
    }
    let mut robustness = Vec::new();
    if opts.robustness {
        for &workload in &opts.workloads {
            for &rtt in &opts.rtts {
                for condition in [Condition::loss(0.30), Condition::burst()] {
                    for &stack in &opts.stacks {
                        if stack == StackKind::SoeProtocol {
                            continue;
                        }
                        robustness.push(run_cell(
                            stack,
                            workload,
                            rtt,
                            &condition,
                            opts.robustness_duration(),
                        ));
                    }
                }
            }
        }
    }
    let targets = targets(&cells, &robustness);
    GridReport {
        options: opts.clone(),
        cells,
        robustness,
        targets,
        wall_time: started.elapsed(),
    }
}

fn targets(cells: &[Cell], robustness: &[Cell]) -> Vec<Target> {
    let mut out = Vec::new();
    let loss1 = Condition::loss(0.01).name;
    let loss10 = Condition::loss(0.10).name;
    for c in cells {
        let base = Target {
            stack: c.stack,
            workload: c.workload,
            rtt: c.rtt,
            requirement: String::new(),
            measured: String::new(),
            met: false,
        };
        // The tick workload offers a fixed load: every stack that delivers it scores about 100 %
        // of its own loss-free run, so a goodput target there cannot fail. Its targets are the
        // latency and, in the robustness rows, that every update arrives.
        let goodput_counts = c.workload != Workload::Tick;
        if c.condition == loss1 && goodput_counts {
            out.push(Target {
                requirement: "1% loss: goodput >= 70% of ideal".into(),
                measured: format!("{:.0}%", c.fraction_of_ideal * 100.0),
                met: c.fraction_of_ideal >= 0.70,
                ..base.clone()
            });
        }
        if c.condition == loss1 {
            // Bulk latency is the sender's own queue: no target for it.
            if c.workload != Workload::Bulk {
                let rtt = c.rtt.as_secs_f64();
                let bound = 4.0 + c.stack.peer_ack_delay().as_secs_f64() / rtt;
                let p99 = c.latency_rtts.map_or(f64::INFINITY, |l| l[1]);
                out.push(Target {
                    requirement: format!(
                        "1% loss: p99 <= 4 RTT + {} ms ack delay ({bound:.1} RTT)",
                        c.stack.peer_ack_delay().as_millis()
                    ),
                    measured: format!("{p99:.2} RTT"),
                    met: p99 <= bound,
                    ..base.clone()
                });
            }
        }
        if c.condition == loss10 && goodput_counts {
            out.push(Target {
                requirement: "10% loss: goodput >= 40% of ideal".into(),
                measured: format!("{:.0}%", c.fraction_of_ideal * 100.0),
                met: c.fraction_of_ideal >= 0.40,
                ..base
            });
        }
    }
    for c in robustness {
        out.push(Target {
            stack: c.stack,
            workload: c.workload,
            rtt: c.rtt,
            requirement: format!(
                "{} over {} s: no death, nothing lost/duplicated/reordered",
                c.condition,
                c.duration.as_secs()
            ),
            measured: format!(
                "{} deaths, {} bad messages{}",
                c.deaths,
                c.violations(),
                if c.failures.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", c.failures.join("; "))
                }
            ),
            met: c.deaths == 0 && c.violations() == 0,
        });
    }
    out
}

impl GridReport {
    /// The report as Markdown: one table per workload, then the robustness rows and the
    /// targets.
    pub fn to_markdown(&self) -> String {
        let o = &self.options;
        let mut s = String::new();
        let _ = writeln!(s, "# SOE network emulation grid\n");
        let _ = writeln!(
            s,
            "{} s of traffic per run ({}), seeds {:?}; bottleneck {} kB/s with a {}-datagram \
             drop-tail queue each way; the handshake crosses an unimpaired path. Goodput is \
             application bytes delivered (both directions) per simulated second, as a fraction \
             of (1 - loss) x the loss-free goodput of the same stack, workload and RTT (an \
             application-limited workload can exceed 100%; the tick workload offers a fixed load, so \
             its goodput is shown but not counted as a target). Latency is from send() to delivery, \
             in RTTs (echo: the round trip). Resends are per reliable packet sent (ours: session \
             stats; soe-protocol: sequences seen again on the wire). Deaths: runs whose session \
             ended; bad: messages lost, duplicated, reordered or corrupted (must be 0).\n",
            o.duration().as_secs(),
            if o.quick { "quick" } else { "full" },
            o.seeds,
            o.rate / 1000,
            o.queue,
        );
        let _ = writeln!(s, "Wall time: {:.1} s.\n", self.wall_time.as_secs_f64());
        for &workload in &o.workloads {
            let _ = writeln!(s, "## {}\n", workload_title(workload));
            table(
                &mut s,
                &o.stacks,
                self.cells.iter().filter(|c| c.workload == workload),
            );
            s.push('\n');
        }
        if !self.robustness.is_empty() {
            let _ = writeln!(
                s,
                "## Robustness ({} s runs)\n",
                o.robustness_duration().as_secs()
            );
            let stacks: Vec<StackKind> = o
                .stacks
                .iter()
                .copied()
                .filter(|&k| k != StackKind::SoeProtocol)
                .collect();
            for &workload in &o.workloads {
                let _ = writeln!(s, "### {}\n", workload.name());
                table(
                    &mut s,
                    &stacks,
                    self.robustness.iter().filter(|c| c.workload == workload),
                );
                s.push('\n');
            }
        }
        let _ = writeln!(s, "## Targets\n");
        let met = self.targets.iter().filter(|t| t.met).count();
        let _ = writeln!(s, "{met} of {} met.\n", self.targets.len());
        let _ = writeln!(s, "| stack | workload | RTT | target | measured | |");
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for t in &self.targets {
            let _ = writeln!(
                s,
                "| {} | {} | {} ms | {} | {} | {} |",
                t.stack.name(),
                t.workload.name(),
                t.rtt.as_millis(),
                t.requirement,
                t.measured,
                if t.met { "met" } else { "**missed**" }
            );
        }
        s
    }
}

fn workload_title(w: Workload) -> &'static str {
    match w {
        Workload::Echo => "echo (8 outstanding, 64 B; latency = round trip)",
        Workload::Bulk => "bulk (4 KiB messages, client to server)",
        Workload::Tick => "tick (20 Hz: 200 B state down, 32 B input up; latency = state)",
    }
}

fn table<'a>(s: &mut String, stacks: &[StackKind], cells: impl Iterator<Item = &'a Cell>) {
    let cells: Vec<&Cell> = cells.collect();
    let _ = write!(s, "| RTT | condition |");
    for k in stacks {
        let _ = write!(
            s,
            " {0} goodput | {0} p50/p99/max RTT | {0} resends | {0} deaths/bad |",
            k.name()
        );
    }
    let _ = writeln!(s);
    let _ = write!(s, "|---|---|");
    for _ in stacks {
        let _ = write!(s, "---|---|---|---|");
    }
    let _ = writeln!(s);
    let mut rows: Vec<(Duration, String)> = Vec::new();
    for c in &cells {
        if !rows.iter().any(|r| r.0 == c.rtt && r.1 == c.condition) {
            rows.push((c.rtt, c.condition.clone()));
        }
    }
    for (rtt, condition) in rows {
        let _ = write!(s, "| {} ms | {} |", rtt.as_millis(), condition);
        for &k in stacks {
            match cells
                .iter()
                .find(|c| c.stack == k && c.rtt == rtt && c.condition == condition)
            {
                Some(c) => {
                    let goodput = if c.fraction_of_ideal.is_nan() {
                        format!("{:.0} kB/s", c.goodput / 1000.0)
                    } else {
                        format!(
                            "{:.0}% ({:.0} kB/s)",
                            c.fraction_of_ideal * 100.0,
                            c.goodput / 1000.0
                        )
                    };
                    let lat = c.latency_rtts.map_or("-".to_string(), |l| {
                        format!("{:.2}/{:.2}/{:.1}", l[0], l[1], l[2])
                    });
                    let _ = write!(
                        s,
                        " {goodput} | {lat} | {:.3} | {}/{} |",
                        c.resends_per_packet,
                        c.deaths,
                        c.violations()
                    );
                }
                None => {
                    let _ = write!(s, " | | | |");
                }
            }
        }
        let _ = writeln!(s);
    }
}
