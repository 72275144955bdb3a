//! What a dashboard shows: the breakers it was given (one by one, in registries, in pools),
//! read into [`Row`]s, each with its recent changes from the [`History`] its observer keeps;
//! and the pools' own figures, read into [`PoolLine`]s.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use lazybreaker::door::contain::end;
use lazybreaker::door::contain::{self, FirstPanic};
use lazybreaker::door::BreakerSeam;
use lazybreaker::observe::Origin;
use lazybreaker::observe::{History, Observer, Recorded, Transition};
use lazybreaker::policy::TripPolicy;
use lazybreaker::pool::{Pool, PoolSummary};
use lazybreaker::Breaker;
use lazybreaker::Registry;
use lazybreaker::Snapshot;
use lazybreaker::State;

/// A manual control, as the dashboard's routes name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Control {
    ForceOpen,
    ForceClosed,
    Release,
}

impl Control {
    /// The last segment of its route.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::ForceOpen => "force_open",
            Self::ForceClosed => "force_closed",
            Self::Release => "release",
        }
    }
}

/// One breaker, whatever its policy and observer.
pub(super) trait Panel: Send + Sync {
    fn name(&self) -> &str;
    /// Its snapshot, keeping a panic of its policy's gauges in `panics`.
    fn snapshot(&self, panics: &mut FirstPanic) -> Snapshot;
    fn history(&self) -> Option<&History>;
    fn control(&self, control: Control);
}

impl<P: TripPolicy + Send, O: Observer + Send + Sync> Panel for Breaker<P, O> {
    fn name(&self) -> &str {
        Breaker::name(self)
    }

    fn snapshot(&self, panics: &mut FirstPanic) -> Snapshot {
        self.snapshot_keeping(panics)
    }

    fn history(&self) -> Option<&History> {
        self.observer().history()
    }

    fn control(&self, control: Control) {
        match control {
            Control::ForceOpen => self.force_open(),
            Control::ForceClosed => self.force_closed(),
            Control::Release => self.release(),
        }
    }
}

/// Where breakers come from: runs `f` on each breaker it has now, with the name of the pool
/// it belongs to, if any.
pub(super) type Source = Box<dyn Fn(&mut dyn FnMut(&dyn Panel, Option<&str>)) + Send + Sync>;

/// A single breaker.
pub(super) fn breaker<P, O>(breaker: Arc<Breaker<P, O>>) -> Source
where
    P: TripPolicy + Send + 'static,
    O: Observer + Send + Sync + 'static,
{
    Box::new(move |f| f(&*breaker, None))
}

/// Every breaker a registry holds at the time.
pub(super) fn registry<K, P, O, S>(registry: Arc<Registry<K, P, O, S>>) -> Source
where
    K: std::hash::Hash + Eq + Send + Sync + 'static,
    P: TripPolicy + Send + 'static,
    O: Observer + Send + Sync + 'static,
    S: std::hash::BuildHasher + Clone + Send + Sync + 'static,
{
    Box::new(move |f| registry.for_each(|b| f(b, None)))
}

/// Every endpoint's breaker of a pool, named after its pool.
pub(super) fn pool<K, P, O>(pool: Arc<Pool<K, P, O>>) -> Source
where
    K: Send + Sync + 'static,
    P: TripPolicy + Send + 'static,
    O: Observer + Send + Sync + 'static,
{
    Box::new(move |f| {
        let name = pool.name().to_owned();
        pool.for_each(|b| f(b, Some(&name)));
    })
}

/// One pool's own figures, whatever its keys, policy and observer.
pub(super) trait PoolPanel: Send + Sync {
    fn name(&self) -> &str;
    /// Its [`Pool::summary`]: user code (its breakers' clock) that may panic.
    fn summary(&self) -> PoolSummary;
}

impl<K, P, O> PoolPanel for Pool<K, P, O>
where
    K: Send + Sync,
    P: TripPolicy + Send,
    O: Observer + Send + Sync,
{
    fn name(&self) -> &str {
        Pool::name(self)
    }

    fn summary(&self) -> PoolSummary {
        Pool::summary(self)
    }
}

/// A pool whose own figures a dashboard shows.
pub(super) type PoolSource = Arc<dyn PoolPanel>;

/// A pool's own figures, type-erased.
pub(super) fn pool_figures<K, P, O>(pool: Arc<Pool<K, P, O>>) -> PoolSource
where
    K: Send + Sync + 'static,
    P: TripPolicy + Send + 'static,
    O: Observer + Send + Sync + 'static,
{
    pool
}

/// One pool as the page and the JSON show it.
#[derive(Debug)]
pub(super) struct PoolLine {
    /// Its name ([`Pool::named`]), untrusted text; empty if unnamed.
    pub(super) name: String,
    /// Its figures; `None` if its user code (a clock) panicked while they were read.
    pub(super) summary: Option<PoolSummary>,
}

/// Reads every pool of `pools` (each once, however many times it was given), in the order
/// given. A pool whose user code panics costs that pool its figures, not the page: the panic
/// ends here.
pub(super) fn read_pools(pools: &[PoolSource]) -> Vec<PoolLine> {
    let mut seen = HashSet::new();
    let mut lines = Vec::with_capacity(pools.len());
    for pool in pools {
        if !seen.insert(Arc::as_ptr(pool).cast::<()>()) {
            continue;
        }
        let summary = contain::catch(|| pool.summary()).map_err(|payload| {
            let mut panics = FirstPanic::default();
            panics.keep(payload);
            end(panics);
        });
        lines.push(PoolLine {
            name: pool.name().to_owned(),
            summary: summary.ok(),
        });
    }
    lines
}

/// One breaker as the page and the JSON show it.
#[derive(Debug)]
pub(super) struct Row {
    pub(super) snapshot: Snapshot,
    /// The pool it is an endpoint of, if any.
    pub(super) pool: Option<String>,
    /// Its recent changes, oldest first.
    pub(super) history: Vec<Recorded>,
    /// Whether its policy's figures panicked while read (the row has those read before).
    pub(super) panicked: bool,
    /// How many breakers of the page have its name, itself included: 1 but where two
    /// breakers share a name (a registry's key named like a breaker given by hand, say).
    /// Every one is shown, flagged, and the controls refuse the name.
    pub(super) namesakes: usize,
}

/// Everything a page shows at one instant.
#[derive(Debug, Default)]
pub(super) struct Board {
    /// Open and half-open first, then by name.
    pub(super) rows: Vec<Row>,
    /// Breakers that could not be read at all (their clock panicked).
    pub(super) unreadable: usize,
    /// The recent changes of every breaker, newest first.
    pub(super) recent: Vec<Recorded>,
    /// The pools' own figures, in the order the pools were given.
    pub(super) pools: Vec<PoolLine>,
}

/// How many changes the page's list of recent changes shows.
pub(super) const RECENT: usize = 50;

/// Reads every breaker of `sources` (each once, however many sources give it; two breakers
/// with one name are both read, each told how many share it) and the histories their
/// observers keep, plus `extra` histories. A breaker's user code that panics (its clock,
/// its policy's figures) costs that breaker its row or its figures, not the page: the panic
/// ends here (as a scrape's does, see [`lazybreaker::prometheus`]). With the pools' own
/// figures ([`read_pools`]).
pub(super) fn read(sources: &[Source], pools: &[PoolSource], extra: &[Arc<History>]) -> Board {
    let mut board = Board {
        pools: read_pools(pools),
        ..Board::default()
    };
    let mut seen = HashSet::new();
    // Each history once, however many breakers share it.
    let mut kept: HashMap<*const History, Vec<Recorded>> = HashMap::new();
    let mut owner: Vec<Option<*const History>> = Vec::new();
    for source in sources {
        source(&mut |panel, pool| {
            if !seen.insert(identity(panel)) {
                return;
            }
            let mut panics = FirstPanic::default();
            let taken = contain::catch(|| panel.snapshot(&mut panics));
            let panicked = panics.is_some();
            end(panics);
            let Ok(snapshot) = taken.map_err(|payload| {
                let mut panics = FirstPanic::default();
                panics.keep(payload);
                end(panics);
            }) else {
                board.unreadable += 1;
                return;
            };
            let history = panel.history().map(|h| h as *const History);
            if let Some(h) = history {
                // The address is only a key: the history is read through the panel.
                kept.entry(h)
                    .or_insert_with(|| panel.history().map(History::recent).unwrap_or_default());
            }
            owner.push(history);
            board.rows.push(Row {
                snapshot,
                pool: pool.map(str::to_owned),
                history: Vec::new(),
                panicked,
                namesakes: 1,
            });
        });
    }
    let mut names: HashMap<&str, usize> = HashMap::new();
    for row in &board.rows {
        *names.entry(row.snapshot.name.as_str()).or_default() += 1;
    }
    let namesakes: Vec<usize> = board
        .rows
        .iter()
        .map(|row| names[row.snapshot.name.as_str()])
        .collect();
    for (row, n) in board.rows.iter_mut().zip(namesakes) {
        row.namesakes = n;
    }
    for h in extra {
        kept.entry(Arc::as_ptr(h)).or_insert_with(|| h.recent());
    }
    for (row, history) in board.rows.iter_mut().zip(&owner) {
        if let Some(recorded) = history.and_then(|h| kept.get(&h)) {
            row.history = recorded
                .iter()
                .filter(|r| r.breaker == row.snapshot.name)
                .cloned()
                .collect();
        }
    }
    let mut recent: Vec<Recorded> = kept.into_values().flatten().collect();
    recent.sort_by(|a, b| b.wall.cmp(&a.wall).then(b.seq.cmp(&a.seq)));
    recent.dedup();
    recent.truncate(RECENT);
    board.recent = recent;
    board.rows.sort_by(|a, b| {
        rank(&a.snapshot)
            .cmp(&rank(&b.snapshot))
            .then_with(|| a.snapshot.name.cmp(&b.snapshot.name))
    });
    board
}

/// Which breaker a panel is (its address): the same breaker given twice (by hand and in a
/// registry) is one breaker, two breakers with one name are two.
fn identity(panel: &dyn Panel) -> *const () {
    std::ptr::from_ref(panel).cast()
}

/// Open first, then half-open, then closed.
fn rank(snapshot: &Snapshot) -> u8 {
    match snapshot.state {
        State::Open => 0,
        State::HalfOpen => 1,
        State::Closed => 2,
    }
}

/// What a control did: the breaker after it (`None` if its clock panicked), and whether its
/// user code (an observer told of the change, the clock) panicked meanwhile.
#[derive(Debug)]
pub(super) struct Controlled {
    pub(super) row: Option<Row>,
    pub(super) panicked: bool,
}

/// Applies `control` to the breaker named `name`, if one of `sources` has it (`None` if no
/// breaker has that name), and records in its history a control that changed no state (only
/// the forced mode), as manual: every control is in the history. A panic of the breaker's
/// user code ends here, after the control took effect (the breaker stays consistent).
pub(super) fn control(sources: &[Source], name: &str, control: Control) -> Option<Controlled> {
    let mut done = None;
    for source in sources {
        source(&mut |panel, pool| {
            if done.is_none() && panel.name() == name {
                done = Some(apply(panel, pool, control));
            }
        });
        if done.is_some() {
            break;
        }
    }
    done
}

/// How many breakers of `sources` are named `name`: a control acts only on a name one
/// breaker has (two breakers with one name, a registry's key and a breaker given by hand,
/// say, would leave the operator acting on one while the other stays as it was).
pub(super) fn named(sources: &[Source], name: &str) -> usize {
    let mut found = HashSet::new();
    for source in sources {
        source(&mut |panel, _| {
            if panel.name() == name {
                found.insert(identity(panel));
            }
        });
    }
    found.len()
}

/// [`control`] on one breaker.
fn apply(panel: &dyn Panel, pool: Option<&str>, control: Control) -> Controlled {
    let mut panics = FirstPanic::default();
    let before = panel.history().map(History::recorded);
    panics.catch((), || panel.control(control));
    let snapshot = match contain::catch(|| panel.snapshot(&mut panics)) {
        Ok(snapshot) => Some(snapshot),
        Err(payload) => {
            panics.keep(payload);
            None
        }
    };
    if let (Some(history), Some(before), Some(after)) = (panel.history(), before, &snapshot) {
        let told = history
            .recent()
            .iter()
            .any(|r| r.seq >= before && r.breaker == after.name && r.origin == Origin::Manual);
        if !told {
            let unchanged = Transition::new(&after.name, after.state, after.state, after.at)
                .with_origin(Origin::Manual)
                .with_counts(after.counts)
                .with_totals(after.totals)
                .with_forced(after.forced)
                .with_dry_run(after.dry_run);
            history.on_transition(&unchanged);
        }
    }
    let panicked = panics.is_some();
    end(panics);
    let row = snapshot.map(|snapshot| Row {
        history: panel
            .history()
            .map(|h| h.recent_for(&snapshot.name))
            .unwrap_or_default(),
        snapshot,
        pool: pool.map(str::to_owned),
        panicked: false,
        namesakes: 1,
    });
    Controlled { row, panicked }
}
