//! [`FleetStats`]: what a shared breaker did with its store, and the figures metrics read of
//! it (the `prometheus` feature's [`FleetCollector`](crate::prometheus::FleetCollector),
//! `lazybreaker-otel`'s `BreakerMetrics::shared`).

/// What a [`SharedBreaker`](crate::SharedBreaker) did with its store, read without side effects:
/// [`SharedBreaker::stats`](crate::SharedBreaker::stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct FleetStats {
    /// Store operations made (each is one round trip), connections excluded.
    pub round_trips: u64,
    /// Store operations that failed or timed out (each time, the breaker decided locally).
    pub store_errors: u64,
    /// Local decisions this process wrote to the shared record.
    pub published: u64,
    /// Shared decisions of other processes this process adopted.
    pub adopted: u64,
    /// Times this process wrote a vanished record again.
    pub recreated: u64,
    /// Half-open probes this process did not send because the fleet's probe slots were
    /// all held (rejected with [`Rejected::TooManyRequests`](lazybreaker::Rejected::TooManyRequests)).
    pub fleet_rejections: u64,
    /// The shared generation this process follows.
    pub generation: u64,
    /// Whether the store is failing now (the breaker decides locally).
    pub degraded: bool,
}

/// One of a [`FleetStats`]' figures as metrics export it: its name (`circuit_breaker_fleet_`
/// and the name in Prometheus, `circuit_breaker.fleet.` and the name in OpenTelemetry), its
/// unit (UCUM, as OpenTelemetry writes it), what it means, and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetFigure {
    /// The figure's name, snake case.
    pub name: &'static str,
    /// Its unit, as OpenTelemetry writes it (`{operation}`, `1`).
    pub unit: &'static str,
    /// What it means, one sentence.
    pub help: &'static str,
    /// Its value.
    pub value: u64,
}

impl FleetStats {
    /// The counts (each never goes down): `round_trips`, `store_errors`, `published`,
    /// `adopted`, `recreated`, `probe_rejections` (the
    /// [`fleet_rejections`](Self::fleet_rejections)).
    ///
    /// # Examples
    ///
    /// ```
    /// use lazybreaker::Breaker;
    /// use lazybreaker_fleet::{MemoryStore, SharedBreaker};
    ///
    /// let shared = SharedBreaker::builder(MemoryStore::new())
    ///     .build(Breaker::builder().name("payments"))
    ///     .unwrap();
    /// let counts: Vec<_> = shared.stats().counts().collect();
    /// let names: Vec<_> = counts.iter().map(|f| f.name).collect();
    /// assert_eq!(names[..2], ["round_trips", "store_errors"]);
    /// assert!(counts.iter().all(|f| f.value == 0)); // nothing called yet
    /// ```
    pub fn counts(&self) -> impl ExactSizeIterator<Item = FleetFigure> {
        let figure = |name, unit, help, value| FleetFigure {
            name,
            unit,
            help,
            value,
        };
        [
            figure(
                "round_trips",
                "{operation}",
                "Store operations made, one round trip each.",
                self.round_trips,
            ),
            figure(
                "store_errors",
                "{operation}",
                "Store operations that failed or timed out (the breaker then decided locally).",
                self.store_errors,
            ),
            figure(
                "published",
                "{decision}",
                "Local decisions written to the shared record.",
                self.published,
            ),
            figure(
                "adopted",
                "{decision}",
                "Decisions of other instances adopted from the shared record.",
                self.adopted,
            ),
            figure(
                "recreated",
                "{record}",
                "Times a vanished shared record was written again.",
                self.recreated,
            ),
            figure(
                "probe_rejections",
                "{call}",
                "Half-open probes not sent because the fleet's probe slots were all held.",
                self.fleet_rejections,
            ),
        ]
        .into_iter()
    }

    /// The present values: `generation` (the shared generation followed) and `degraded`
    /// (1 while the store is failing and the breaker decides locally, else 0).
    pub fn levels(&self) -> impl ExactSizeIterator<Item = FleetFigure> {
        [
            FleetFigure {
                name: "generation",
                unit: "{generation}",
                help: "The shared generation this instance follows.",
                value: self.generation,
            },
            FleetFigure {
                name: "degraded",
                unit: "1",
                help: "1 while the store is failing (the breaker decides locally), else 0.",
                value: u64::from(self.degraded),
            },
        ]
        .into_iter()
    }
}
