//! `lazybreaker-replay`: replays a recorded trace through candidate settings and prints a
//! table, one row per candidate; writes the reports as JSON and as an HTML page with a plot
//! per candidate when asked.
//!
//! ```text
//! cargo run --release -p lazybreaker-replay -- \
//!     --trace trace.csv --candidates candidates.toml [--json report.json] [--html report.html]
//! ```
//!
//! The trace is CSV (`start_ms,latency_ms,outcome[,key]`, see `replay::Trace::from_csv`);
//! the candidates a TOML file of named breakers in the crate's configuration format, one
//! table per candidate. The table goes to stdout; on stderr, a progress bar when it is a
//! terminal and the trace is large, then `wrote PATH` for each file written (the path as
//! given). Exits with 2 on a bad argument or input, naming the file and where in it.
//! Durations in the JSON: `docs/integrations.md`, "Durations in JSON".

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use clap::{Arg, ArgAction, Command};
use indicatif::{ProgressBar, ProgressStyle};
use lazybreaker::config::SettingsMap;
use lazybreaker::human;
use lazybreaker_replay::{self as replay, Report, Trace};
use serde::Serialize;

/// A trace with at least this many calls gets a progress bar (on a terminal).
const LARGE: u64 = 200_000;

fn command() -> Command {
    Command::new("lazybreaker-replay")
        .about(
            "Replays a recorded trace through candidate breaker settings, exactly as live \
             breakers would decide, and prints one row per candidate.",
        )
        .arg(
            Arg::new("trace")
                .long("trace")
                .value_name("T.csv")
                .required(true)
                .value_parser(clap::value_parser!(PathBuf))
                .help("The trace: CSV with the header start_ms,latency_ms,outcome[,key]"),
        )
        .arg(
            Arg::new("candidates")
                .long("candidates")
                .value_name("C.toml")
                .required(true)
                .value_parser(clap::value_parser!(PathBuf))
                .help("The candidates: a TOML file of named breaker settings, a table each"),
        )
        .arg(
            Arg::new("json")
                .long("json")
                .value_name("R.json")
                .value_parser(clap::value_parser!(PathBuf))
                .help("Also write the reports as JSON here (named on stderr once written)"),
        )
        .arg(
            Arg::new("html")
                .long("html")
                .value_name("R.html")
                .value_parser(clap::value_parser!(PathBuf))
                .help("Also write an HTML page with a plot per candidate here (named on stderr once written)"),
        )
        .arg(
            Arg::new("quiet")
                .long("quiet")
                .short('q')
                .action(ArgAction::SetTrue)
                .help("No progress bar, even on a terminal"),
        )
}

/// What the JSON file holds.
#[derive(Serialize)]
struct Output<'a> {
    trace: TraceSummary,
    candidates: &'a [Report],
}

/// Durations in whole milliseconds, to the nearest (`docs/integrations.md`, "Durations in
/// JSON").
#[derive(Serialize)]
struct TraceSummary {
    calls: u64,
    keys: u64,
    span_ms: u64,
}

fn main() -> ExitCode {
    let args = command().get_matches();
    let path = |name: &str| args.get_one::<PathBuf>(name).cloned();
    let quiet = args.get_flag("quiet");
    match run(
        &path("trace").unwrap_or_default(),
        &path("candidates").unwrap_or_default(),
        path("json").as_deref(),
        path("html").as_deref(),
        quiet,
    ) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("lazybreaker-replay: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(
    trace_path: &Path,
    candidates_path: &Path,
    json: Option<&Path>,
    html: Option<&Path>,
    quiet: bool,
) -> Result<(), String> {
    let shown = |p: &Path| p.display().to_string();
    let candidates = std::fs::read_to_string(candidates_path)
        .map_err(|e| format!("{}: {e}", shown(candidates_path)))?;
    let candidates: SettingsMap =
        toml::from_str(&candidates).map_err(|e| format!("{}: {e}", shown(candidates_path)))?;
    if candidates.is_empty() {
        return Err(format!(
            "{}: no candidate (a table per candidate: [name])",
            shown(candidates_path)
        ));
    }

    let file = File::open(trace_path).map_err(|e| format!("{}: {e}", shown(trace_path)))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    // About 20 bytes a call: a bar for reading only when the file is large.
    let reading = bar(
        quiet || size / 20 < LARGE,
        size,
        "reading",
        "{bytes}/{total_bytes}",
    );
    let trace = Trace::from_csv(reading.wrap_read(file))
        .map_err(|e| format!("{}: {e}", shown(trace_path)))?;
    reading.finish_and_clear();

    let total = trace.len() as u64 * candidates.len() as u64;
    let replaying = bar(
        quiet || (trace.len() as u64) < LARGE,
        total,
        "replaying",
        "{human_pos}/{human_len} calls",
    );
    let done = AtomicU64::new(0);
    let started = Instant::now();
    let reports = replay::replay_all_with_progress(&trace, &candidates, &|n| {
        let now = done.fetch_add(n, Ordering::Relaxed) + n;
        replaying.set_position(now);
    })
    .map_err(|e| format!("{}: {e}", shown(candidates_path)))?;
    replaying.finish_and_clear();
    let took = started.elapsed();

    let mut out = io::stdout().lock();
    let _ = write!(out, "{}", replay::table(&reports));
    let _ = write!(out, "\n{}", replay::legend(&reports));
    let _ = writeln!(
        out,
        "\n{} calls x {} candidate(s) replayed in {}",
        trace.len(),
        reports.len(),
        human::span(took)
    );

    if let Some(path) = json {
        let output = Output {
            trace: TraceSummary {
                calls: trace.len() as u64,
                keys: trace.keys().count() as u64,
                span_ms: human::span_ms(trace.span()),
            },
            candidates: &reports,
        };
        let file = File::create(path).map_err(|e| format!("{}: {e}", shown(path)))?;
        let mut w = BufWriter::new(file);
        serde_json::to_writer_pretty(&mut w, &output)
            .map_err(|e| format!("{}: {e}", shown(path)))?;
        w.flush().map_err(|e| format!("{}: {e}", shown(path)))?;
        eprintln!("wrote {}", shown(path));
    }
    if let Some(path) = html {
        std::fs::write(path, replay::html(&trace, &reports))
            .map_err(|e| format!("{}: {e}", shown(path)))?;
        eprintln!("wrote {}", shown(path));
    }
    Ok(())
}

/// A progress bar on stderr (which indicatif hides when stderr is not a terminal), or a
/// hidden one when `hidden`.
fn bar(hidden: bool, len: u64, what: &str, counts: &str) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    let template = format!("{what} [{{bar:40}}] {counts} {{eta}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}
