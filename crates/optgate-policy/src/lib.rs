//! The decision policy the engine applies at each look, pure (no I/O, no store, no
//! protocol): the planned looks and what follows a look (`decide`), and the staged rule's
//! per-variant stopping (`staged`). The daemon's engine and `benches/decision-cost` call it.

pub mod decide;
pub mod staged;
