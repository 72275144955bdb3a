//! [`Ticket`]: what an admitted request carries to its result.

use crate::generation::Generation;

/// What an admitted request carries to its result: the generation and window age it was
/// admitted in, and, for a call a slow-call policy's lane admitted, the in-flight slot it
/// holds (see [`InFlightSlots`](crate::in_flight_slots::InFlightSlots)). Two words: the generation and the slot share one, so that
/// a ticket is built and stored a word at a time (a word read back from two narrower
/// stores would stall its load).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    age: u64,
    /// `[slot: 32][generation: 32]` (the generation as [`Generation::raw`] stores it). The
    /// slot: the lane's slot held, plus one; [`Ticket::BY_MACHINE`]: tracked in the
    /// machine's [`InFlight`]; 0: not tracked.
    word: u64,
}

impl Ticket {
    /// A request admitted in `generation` with no window age: where the window does not roll
    /// (the age of a fixed window is always zero).
    #[inline]
    pub(crate) fn unaged(generation: Generation) -> Self {
        Self::aged(generation, 0)
    }

    /// A request admitted in `generation` at window age `age` (the lock-free lane's
    /// admission in a rolling window).
    #[inline]
    pub(crate) fn aged(generation: Generation, age: u64) -> Self {
        Self {
            age,
            word: u64::from(generation.raw()),
        }
    }

    /// This ticket, holding in-flight slot `slot` (the lane's admission of a slow-call
    /// policy's call).
    #[inline]
    pub(crate) fn in_slot(self, slot: usize) -> Self {
        debug_assert!(slot < Self::BY_MACHINE as usize - 1);
        self.with_slot(slot as u32 + 1)
    }

    /// A call in flight tracked by the machine (see [`Ticket::slot`]).
    const BY_MACHINE: u32 = u32::MAX;

    /// This ticket, its call tracked in flight by the machine (a slow-call threshold).
    #[inline]
    pub(super) fn by_machine(self) -> Self {
        self.with_slot(Self::BY_MACHINE)
    }

    #[inline(always)]
    fn with_slot(self, slot: u32) -> Self {
        Self {
            age: self.age,
            word: (self.word & u64::from(u32::MAX)) | (u64::from(slot) << 32),
        }
    }

    /// The slot half of the word.
    #[inline(always)]
    fn slot_word(&self) -> u32 {
        (self.word >> 32) as u32
    }

    /// The lane's in-flight slot this ticket holds, if any.
    #[inline(always)]
    pub(crate) fn slot(&self) -> Option<usize> {
        match self.slot_word() {
            0 | Self::BY_MACHINE => None,
            slot => Some(slot as usize - 1),
        }
    }

    /// Whether the call is tracked in flight (a slow-call threshold), by the lane or by the
    /// machine: its result then never counts on the lane but through its slot.
    #[inline(always)]
    pub(crate) fn tracked(&self) -> bool {
        self.word >> 32 != 0
    }

    #[inline]
    pub(crate) fn generation(&self) -> Generation {
        // Truncation intended: the low half is the generation.
        Generation::from_raw(self.word as u32)
    }

    /// The window age the request was admitted at (zero where the window does not roll).
    #[inline]
    pub(crate) fn age(&self) -> u64 {
        self.age
    }

    /// The ticket of a shadow call: a call a breaker in dry run admitted although it would
    /// have rejected it. Its result is counted nowhere: it changes nothing, as a rejection
    /// changes nothing. Its generation is one no generation ever is.
    pub(crate) const SHADOW: Self = Self {
        age: 0,
        word: Generation::SHADOW.raw() as u64,
    };

    /// Whether this is a shadow call's ticket (see [`Ticket::SHADOW`]).
    #[inline(always)]
    pub(crate) fn is_shadow(&self) -> bool {
        self.generation() == Generation::SHADOW
    }
}
