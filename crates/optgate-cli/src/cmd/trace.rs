//! `optgate trace summary PATH... [--json]`: DFTracer traces summed per category, name and
//! epoch — the same aggregation a `source: dftracer` metric uses.

use std::path::PathBuf;

use anyhow::Result;

use optgate_dftracer::AggregateOptions;

use crate::exit;

/// `optgate trace SUBCOMMAND`.
pub fn trace(command: crate::choices::TraceCommand) -> Result<i32> {
    match command {
        crate::choices::TraceCommand::Summary {
            paths,
            epoch_marker,
            category,
            json,
        } => summary(&paths, epoch_marker, category, json),
    }
}

pub fn summary(
    paths: &[PathBuf],
    epoch_marker: Option<String>,
    category: Option<String>,
    json: bool,
) -> Result<i32> {
    let opts = AggregateOptions {
        epoch_marker,
        category,
    };
    let summary = optgate_dftracer::summarize_paths(paths, &opts)
        .map_err(|e| exit::with_code(exit::INVALID_INPUT, e))?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        out!("{}", optgate_dftracer::render_table(&summary));
    }
    for d in &summary.diagnostics {
        errln!("{}:{}: {}", d.file.display(), d.line, d.message);
    }
    Ok(exit::OK)
}
