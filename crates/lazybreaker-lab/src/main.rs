//! `cargo run -p lazybreaker-lab --release -- [--short] [--rate N] [--replicas N]
//! [--deadline-ms N] [--strategies a,b] [--out DIR] [SCENARIO ...]`
//!
//! Runs each scenario (all by default, about 60 min; `--short`: four short ones, as CI does,
//! about 5 min; both plus the first release build, about 2 min) against each strategy,
//! prints the table, and writes `results.md`, `results.json` and `lab.html` in `--out`
//! (default `target/lab`), naming each on stderr (`wrote PATH`) once written. The replicas
//! are this binary too: `upstream --node N --port P --seed S [--mode M]` and
//! `blackhole --port P`, started by the lab itself. Durations in `results.json`:
//! `docs/integrations.md`, "Durations in JSON".

use std::path::PathBuf;
use std::time::Duration;

use lazybreaker::human;
use lazybreaker_lab::report::{self, Row};
use lazybreaker_lab::run::{self, Setup};
use lazybreaker_lab::scenario::{self, Scenario, Timeline};
use lazybreaker_lab::strategy::{HaProxy, NAMES, VARIANTS};
use lazybreaker_lab::{plot, upstream};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.first().map(String::as_str) {
        Some("upstream") => serve(&args[1..]),
        Some("blackhole") => value(&args[1..], "--port")
            .and_then(|p| p.parse().map_err(|e| format!("--port: {e}")))
            .and_then(|port| upstream::blackhole(port).map_err(|e| e.to_string())),
        _ => lab(&args),
    };
    if let Err(e) = outcome {
        eprintln!("lazybreaker-lab: {e}");
        std::process::exit(2);
    }
}

/// The value after `flag` in `args`.
fn value(args: &[String], flag: &str) -> Result<String, String> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .ok_or_else(|| format!("{flag} is required"))
}

fn serve(args: &[String]) -> Result<(), String> {
    let number = |flag: &str| -> Result<u64, String> {
        value(args, flag)?
            .parse()
            .map_err(|e| format!("{flag}: {e}"))
    };
    let port = u16::try_from(number("--port")?).map_err(|e| format!("--port: {e}"))?;
    let mode = match value(args, "--mode") {
        Ok(name) => upstream::Mode::parse(&name).ok_or_else(|| format!("--mode: {name:?}"))?,
        Err(_) => upstream::Mode::Healthy,
    };
    upstream::serve(number("--node")? as usize, port, number("--seed")?, mode)
        .map_err(|e| e.to_string())
}

/// What the command line asked for.
struct Options {
    short: bool,
    rate: u32,
    replicas: usize,
    deadline: Duration,
    strategies: Vec<String>,
    out: PathBuf,
    scenarios: Vec<&'static Scenario>,
}

fn options(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        short: false,
        rate: 300,
        replicas: 3,
        deadline: Duration::from_millis(300),
        strategies: NAMES.iter().map(|s| (*s).to_owned()).collect(),
        out: PathBuf::from("target/lab"),
        scenarios: Vec::new(),
    };
    let mut rate = None;
    let mut i = 0;
    while i < args.len() {
        let next = |i: usize| {
            args.get(i + 1)
                .cloned()
                .ok_or_else(|| format!("{} needs a value", args[i]))
        };
        match args[i].as_str() {
            "--short" => o.short = true,
            "--rate" => {
                rate = Some(next(i)?.parse().map_err(|e| format!("--rate: {e}"))?);
                i += 1;
            }
            "--replicas" => {
                o.replicas = next(i)?.parse().map_err(|e| format!("--replicas: {e}"))?;
                i += 1;
            }
            "--deadline-ms" => {
                o.deadline = Duration::from_millis(
                    next(i)?
                        .parse()
                        .map_err(|e| format!("--deadline-ms: {e}"))?,
                );
                i += 1;
            }
            "--strategies" => {
                o.strategies = next(i)?.split(',').map(|s| s.trim().to_owned()).collect();
                i += 1;
            }
            "--out" => {
                o.out = PathBuf::from(next(i)?);
                i += 1;
            }
            name => o.scenarios.push(scenario::named(name).ok_or_else(|| {
                let known: Vec<_> = scenario::ALL.iter().map(|s| s.name).collect();
                format!("unknown scenario {name:?}: one of {}", known.join(", "))
            })?),
        }
        i += 1;
    }
    if o.replicas < 2 {
        return Err("--replicas: at least 2 (one sick, one to fall back on)".into());
    }
    for s in &o.strategies {
        if !NAMES.contains(&s.as_str()) && !VARIANTS.contains(&s.as_str()) {
            return Err(format!(
                "unknown strategy {s:?}: one of {}, {}",
                NAMES.join(", "),
                VARIANTS.join(", ")
            ));
        }
    }
    if o.scenarios.is_empty() {
        o.scenarios = if o.short {
            scenario::SHORT
                .iter()
                .filter_map(|n| scenario::named(n))
                .collect()
        } else {
            scenario::ALL.iter().collect()
        };
    }
    o.rate = rate.unwrap_or(if o.short { 200 } else { 300 });
    Ok(o)
}

fn lab(args: &[String]) -> Result<(), String> {
    let o = options(args)?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let timeline = if o.short {
        Timeline::SHORT
    } else {
        Timeline::FULL
    };
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let setup = Setup {
        exe,
        replicas: o.replicas,
        rate: o.rate,
        deadline: o.deadline,
        timeline,
        seed: 7,
        dir: o.out.clone(),
    };
    let strategies: Vec<String> = o
        .strategies
        .iter()
        .filter(|s| {
            let here = !HaProxy::NAMES.contains(&s.as_str()) || HaProxy::available();
            if !here {
                eprintln!("haproxy is not installed: its runs are left out");
            }
            here
        })
        .cloned()
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut rows: Vec<Row> = Vec::new();
    let mut sections = Vec::new();
    for scenario in &o.scenarios {
        let mut runs = Vec::new();
        for strategy in &strategies {
            eprintln!("{} / {strategy}", scenario.name);
            let run = runtime
                .block_on(run::run(&setup, scenario, strategy))
                .map_err(|e| format!("{} / {strategy}: {e}", scenario.name))?;
            rows.push(report::row(
                strategy,
                scenario,
                timeline,
                &run.samples,
                &run.attempts,
            ));
            runs.push((strategy.as_str(), run.samples));
        }
        sections.push((*scenario, plot::scenario_svgs(scenario, timeline, &runs)?));
    }
    let command = format!(
        "cargo run -p lazybreaker-lab --release --{}",
        args.iter().map(|a| format!(" {a}")).collect::<String>()
    );
    let mut table = format!(
        "{}\nPhase by phase (before the fault · during it · after the recovery; attempts counted at the replicas):\n\n{}",
        report::table(&rows),
        report::phase_table(&rows)
    );
    let focus = report::focus_table(&rows);
    if !focus.is_empty() {
        table.push_str(&format!(
            "\nThe span each scenario's goal is judged on (cold-start: from the restart to the end of the warm-up):\n\n{focus}"
        ));
    }
    let header = format!(
        "{} replicas, {} calls/s open loop, {} deadline; fault from {} to {}, run {}.\n\n",
        setup.replicas,
        setup.rate,
        human::span(setup.deadline),
        human::span(timeline.fault_at),
        human::span(timeline.recover_at),
        human::span(timeline.end)
    );
    print!("{header}{table}");
    let write = |name: &str, text: &str| {
        let path = o.out.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
        Ok::<(), String>(())
    };
    write("results.md", &format!("`{command}`\n\n{header}{table}"))?;
    write(
        "results.json",
        &serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?,
    )?;
    write("lab.html", &plot::page(&command, &rows, &sections))?;
    Ok(())
}
