//! optgate-report: turns an [`Analysis`] into what people read — the proposal table, the
//! per-variant statistics, the matched per-epoch table, the 10-dimension checklist,
//! provenance — as plain text, Markdown, JSON, CSV, SVG plots, one self-contained HTML
//! page ([`html`]) and JUnit XML for CI systems ([`junit`]).
//!
//! JSON shape: a [`Report`] serialises as the `Analysis` object with its fields at the top
//! level (`#[serde(flatten)]`) plus `experiment`, `checklist`, `provenance` and `arms`. So
//! `optgate analyze --format json` and the daemon's report JSON are the same object; the
//! daemon's simply has the metadata filled in.
//!
//! A report is built by one function, `optgate_evidence::report::build_report`, for an
//! execution and for a samples file alike (`optgate analyze`: [`parse_samples`], then that);
//! this crate defines its shape and renders it ([`render`], [`html`], [`junit`],
//! [`plots::write_plots`]).

pub mod campaign;
pub mod campaign_formats;
pub mod checklist;
pub mod figures;
pub mod history_html;
pub mod html;
pub mod junit;
pub mod load;
pub mod markup;
pub mod model;
pub mod page;
pub mod plots;
pub mod provenance;
pub mod render;
pub mod samples_csv;
pub mod terminal;
pub mod utilisation;

pub use checklist::{
    APPLICATION_ORDER, ChecklistRow, DIMENSIONS, DeclaredVerdict, Verdict, build_checklist,
};
pub use history_html::{
    ChangeMark, HistoryPoint, HistorySeries, HistoryTable, history_page, history_section,
};
pub use html::{render_html, render_html_with, render_html_with_history};
pub use junit::{render_junit, render_junit_suites};
pub use load::LoadSummary;
pub use model::*;
pub use plots::{Plot, PlotError, draw_plots, write_plots};
pub use provenance::{
    DecisionProvenance, JobProvenance, LookProvenance, SamplesProvenance, SequentialProvenance,
};
pub use render::{render_csv, render_json, render_markdown, render_table, render_table_width};
pub use samples_csv::{
    FileProblem, HeaderProblem, LimitProblem, Problem, RowProblem, RunsProblem, Samples,
    SamplesError, parse_samples, read_samples_file,
};
pub use utilisation::{ArmUtilisation, TaskUse, UseOf, UtilisationFinding};
